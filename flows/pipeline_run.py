"""What the pipelines (`judge_grpo`, `rlvr`, `grrm`) share around their steps.

`PipelineRun` opens the pipeline's MLflow run, runs each step as a Prefect task and notes
whether it ran or came from the cache (`StageRecorder`), records what a step produced in MLflow
(`judgeflow.stages.records`, inside the flow, so the run graph shows the pipeline's steps and no
bookkeeping), and at the end, or when a step fails, publishes the run summary and closes the
MLflow run. `prepare_steps` and `train_steps` are the GRPO pipelines' steps, in order, and
`grpo_pipeline` runs them for judges and policies alike (a judge-paid policy adds its own steps
around them in its flow). `register_model` is the champion gate's part: measure the champion on
this run's evaluation set when it has no numbers there, then register and decide, under the
model's lock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from prefect.artifacts import create_table_artifact
from prefect.runtime import flow_run

from judgeflow import stages
from judgeflow.cluster import submitted
from judgeflow.config import RunConfig, with_policy
from judgeflow.console import comparison_rows, report_stage
from judgeflow.stages import records, sft_source_config, val_source_config
from judgeflow.stages.register import (
    champion_config,
    champion_to_measure,
    registered_name,
    registry_lock,
)
from judgeflow.tracking import Tracker, resolve_tracking_uri
from tasks.credentials import use_secrets
from tasks.data import download, prepare
from tasks.evaluate import evaluate
from tasks.policies import cached, cached_job
from tasks.register import register
from tasks.sft import SftOutcome, prepare_sft, sft
from tasks.train import TrainOutcome, train


@dataclass
class StageRecorder:
    """Runs stage tasks and remembers, per stage: ran / cached / failed, duration, metrics."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, stage: str, task_: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        state = task_(*args, return_state=True, **kwargs)
        status = "cached" if state.name == "Cached" else "ran" if state.is_completed() else "failed"
        row = {"stage": stage, "status": status, "duration_s": round(time.monotonic() - start, 1)}
        if status == "failed":
            row["error"] = (state.message or "")[:300]
        self.rows.append(row)
        report_stage(stage, status, row["duration_s"])
        result = state.result()  # raises the stage's error when it failed
        if isinstance(result, dict) and (checked := stages.decontamination_of(result)):
            row["decontamination"] = checked  # an evaluation: said beside its overlap_rows
        return result

    def status(self, stage: str) -> str | None:
        return next((r["status"] for r in self.rows if r["stage"] == stage), None)

    def add_metrics(self, stage: str, metrics: dict[str, Any]) -> None:
        for row in self.rows:
            if row["stage"] == stage:
                row.setdefault("metrics", {}).update(metrics)

    def mark(self, stage: str, status: str) -> None:
        """Correct a stage's status: `register` reusing an earlier version is `cached`."""
        for row in self.rows:
            if row["stage"] == stage:
                row["status"] = status

    def add_note(self, stage: str, note: str) -> None:
        """A line for people (the registry's decision) in the stage's summary row."""
        for row in self.rows:
            if row["stage"] == stage:
                row["note"] = note


#: The evaluations a run compares, in order: the champions' when the gate had to measure them
#: (`champion-sft` for an SFT version, `champion` for the final one).
COMPARED = ("before", "sft", "after", "champion-sft", "champion")


class PipelineRun:
    """One pipeline run: its MLflow run, its steps, the metrics its evaluations measured and
    the registry's decisions. Use it as a context manager: a step that fails still leaves the
    run summary and a FAILED MLflow run behind."""

    def __init__(
        self,
        cfg: RunConfig,
        labels: tuple[str, ...] = COMPARED,
        tags: dict[str, str] | None = None,
    ) -> None:
        """`labels`: the evaluations the run compares, in the comparison's order; `tags`: more
        tags of the MLflow run (the judge that pays a policy)."""
        use_secrets(cfg)  # Secret blocks it names: into the environment, never into parameters
        self.cfg = cfg
        self.labels = list(labels)
        self.flow_run_id = str(flow_run.get_id() or "")
        tags = {
            "prefect.flow_run_id": self.flow_run_id,
            "prefect.flow_run_name": str(flow_run.get_name() or ""),
            **(tags or {}),
        }
        run_name = f"{cfg.recipe}:{flow_run.get_name()}"
        self.tracker = stages.start_tracking(cfg, run_name=run_name, tags=tags)
        self.run_id = self.tracker.run_id
        self.steps = StageRecorder()
        self.metrics: dict[str, float] = {}
        self.registry: dict[str, dict[str, Any]] = {}

    def __enter__(self) -> PipelineRun:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None:
            self._publish_summary()
            failed = {"mlflow_run_id": self.run_id, "error": repr(error)}
            records.finish_run(self.tracker, failed, status="FAILED")

    def step(self, name: str, task: Any, *args: Any) -> Any:
        """Run a step's task; the run summary says whether it ran or came from the cache."""
        return self.steps(name, task, *args)

    def record_data(self, manifest: Any, data: stages.PreparedData) -> None:
        table = records.record_data(self.tracker, self.cfg, manifest, data)
        description = f"Data report for {self.cfg.recipe}: {data.report_file}"
        create_table_artifact(key="data-report", table=table, description=description)

    def record_grrm_data(self, manifest: Any, data: stages.GrrmData) -> None:
        table = records.record_grrm_data(self.tracker, self.cfg, manifest, data)
        description = f"GRRM data for {self.cfg.recipe}"
        create_table_artifact(key="data-report", table=table, description=description)

    def evaluate(
        self, label: str, cfg: RunConfig, model_dir: str, data: Any
    ) -> dict[str, Any] | None:
        """The evaluation `label` of `model_dir` (a cached step) with its numbers recorded;
        None when `evaluation.enabled` is off."""
        if not self.cfg.evaluation.enabled:
            return None
        name = f"evaluate[{label}]"
        result: dict[str, Any] = self.steps(
            name, cached(evaluate), cfg, model_dir, data, self.run_id, label
        )
        self.metrics |= records.record_evaluation(self.tracker, self.cfg, label, result)
        return result

    def sft(self, cfg: RunConfig, sft_file: str, data: stages.SftData | None = None) -> SftOutcome:
        """The SFT step (a job, cached) and its lineage tags."""
        tuned: SftOutcome = self.steps("sft", cached_job(sft, self.cfg), cfg, sft_file, self.run_id)
        records.record_sft(self.tracker, self.cfg, tuned, sft_file, data)
        self.steps.add_metrics("sft", tuned.metrics)
        return tuned

    def train(self, cfg: RunConfig, data: Any) -> TrainOutcome:
        """The GRPO / RLVR step (a job, cached) and where its model is."""
        trained: TrainOutcome = self.steps(
            "train", cached_job(train, self.cfg), cfg, data, self.run_id
        )
        records.record_training(self.tracker, cfg, trained)
        model = trained.model
        self.steps.add_metrics("train", {"global_step": model.global_step, **model.metrics})
        return trained

    def register(
        self,
        kind: str,
        cfg: RunConfig,
        data: Any,
        model_dir: str,
        evaluation: dict[str, Any] | None,
        refusal: str | None = None,
    ) -> None:
        """Register `model_dir` as a version (`kind`: sft or final) when `register.enabled`;
        `refusal` keeps it from becoming champion (the hacking gate's reasons)."""
        if not self.cfg.register.enabled:
            return
        comparison = comparison_rows(self.metrics, self.labels)
        decision, measured = register_model(
            self.steps, cfg, self.tracker, data, model_dir, kind, evaluation, comparison, refusal
        )
        self.registry[kind] = decision
        self.metrics |= measured

    def finish(self, trained_in: list[str] | None = None, **fields: Any) -> dict[str, Any]:
        """Publish the run summary and the comparison, close the MLflow run; the flow's return
        value: `fields` (the model, …) beside the metrics, stages and registry decisions.
        `trained_in`: the runs that trained a cached step's model (their curves)."""
        for row in self.steps.rows:  # each evaluation's row shows its own metrics
            if row["stage"].startswith("evaluate["):
                label = row["stage"].removeprefix("evaluate[").removesuffix("]")
                own = {k: v for k, v in self.metrics.items() if k.startswith(f"{label}/")}
                self.steps.add_metrics(row["stage"], own)
        table = self._publish_summary()
        comparison = records.record_comparison(
            self.tracker, self.cfg, self.metrics, self.labels, trained_in
        )
        if comparison:
            create_table_artifact(
                key="before-after",
                table=[_rounded(row) for row in comparison],
                description=f"{self.cfg.recipe}: judge quality on the validation split, per "
                "evaluation",
            )
        summary = {
            "mlflow_run_id": self.run_id,
            "tracking_uri": resolve_tracking_uri(self.cfg.tracking.tracking_uri),
            "mlflow_url": table[0]["mlflow"] if table else None,
            **fields,
            "metrics": self.metrics,
            "comparison": comparison,
            "stages": {row["stage"]: row["status"] for row in self.steps.rows},
            "registry": self.registry,
        }
        records.finish_run(self.tracker, summary)
        return summary

    def _publish_summary(self) -> records.Table:
        """The `run-summary` table artifact and the `judgeflow.cached.<stage>` tags."""
        jobs = (
            submitted.by_stage(self.cfg.cluster.shared_dir, self.flow_run_id)
            if self.cfg.cluster.backend != "local"
            else {}
        )
        table = records.record_summary(self.tracker, self.steps.rows, jobs)
        create_table_artifact(
            key="run-summary",
            table=table,
            description=f"{self.cfg.recipe}: what each stage did in this run (cached = reused, "
            "no job)",
        )
        return table


def register_model(
    steps: StageRecorder,
    cfg: RunConfig,
    tracker: Tracker,
    data: Any,
    model_dir: str,
    kind: str,
    evaluation: dict[str, Any] | None,
    comparison: list[dict[str, Any]] | None = None,
    refusal: str | None = None,
) -> tuple[dict[str, Any], dict[str, float]]:
    """Measure the champion on this evaluation set when needed, then register and decide, all
    under the registered model's lock (`stages.register.registry_lock`).

    Both steps show in the run summary; the champion's evaluation is recorded in `tracker`'s run.
    Returns the decision and the champion's metrics when it was measured (`champion/…`, for the
    summary).
    """
    run_id = tracker.run_id
    with registry_lock(registered_name(cfg, kind)):
        champion = champion_to_measure(cfg, kind, evaluation)
        measured, champion_metrics = None, {}
        if champion:
            label = "champion" if kind != "sft" else "champion-sft"
            rival = champion_config(cfg, champion.model_uri)
            measured = steps(
                f"evaluate[{label}]",
                cached(evaluate),
                rival,
                champion.model_uri,
                data,
                run_id,
                label,
            )
            champion_metrics = records.record_evaluation(tracker, cfg, label, measured)
        decision: dict[str, Any] = steps(
            f"register[{kind}]",
            register,
            cfg,
            run_id,
            model_dir,
            kind,
            evaluation,
            measured,
            comparison,
            refusal,
        )
    if decision["already_registered"]:  # the same weights as an earlier run: nothing new
        steps.mark(f"register[{kind}]", "cached")
    note = f"v{decision['version']} {decision['verdict']}: {decision['reason']}"
    steps.add_note(f"register[{kind}]", note)
    return decision, champion_metrics


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}


@dataclass(frozen=True)
class GrpoModels:
    """What `fit_steps` made: the prepared data, the GRPO outcome and the config it trained
    with, the SFT outcome (or None), and the evaluations: the start (`sft`, else `before`) and
    `after` (None with evaluation off)."""

    data: Any
    trained: TrainOutcome
    trained_cfg: RunConfig
    tuned: SftOutcome | None
    start: dict[str, Any] | None
    after: dict[str, Any] | None

    @property
    def start_label(self) -> str:
        return "sft" if self.tuned else "before"


def prepare_steps(run: PipelineRun, cfg: RunConfig) -> Any:
    """download → prepare (with the data report): the prepared data."""
    manifest = run.step("download", cached(download), cfg)
    val_manifest = None
    if cfg.data.has_val_data:
        val_manifest = run.step("download[val]", cached(download), val_source_config(cfg))
    data = run.step("prepare", cached(prepare), cfg, manifest, val_manifest)
    run.record_data(manifest, data)
    return data


def train_steps(run: PipelineRun, cfg: RunConfig, data: Any) -> GrpoModels:
    """evaluate (before) → [SFT → evaluate (sft)] → train → evaluate (after) → register."""
    models = fit_steps(run, cfg, data)
    register_steps(run, cfg, models)
    return models


def fit_steps(run: PipelineRun, cfg: RunConfig, data: Any) -> GrpoModels:
    """evaluate (before) → [SFT → evaluate (sft)] → train → evaluate (after)."""
    before = run.evaluate("before", cfg, cfg.model.path, data)
    rl_cfg, tuned, mid = cfg, None, None
    if cfg.sft.enabled:
        sft_manifest = run.step("download[sft]", cached(download), sft_source_config(cfg))
        sft_data = run.step("prepare[sft]", cached(prepare_sft), cfg, sft_manifest)
        tuned = run.sft(cfg, sft_data.file, sft_data)
        rl_cfg = with_policy(cfg, tuned.model_dir)  # GRPO starts from the SFT model
        mid = run.evaluate("sft", rl_cfg, tuned.model_dir, data)

    trained = run.train(rl_cfg, data)
    after = run.evaluate("after", rl_cfg, trained.model.model_dir, data)
    return GrpoModels(data, trained, rl_cfg, tuned, mid if tuned else before, after)


def register_steps(
    run: PipelineRun, cfg: RunConfig, models: GrpoModels, refusal: str | None = None
) -> None:
    """register the SFT model (when there is one), then the trained one; `refusal` (why the
    trained model must not become champion) goes to the gate."""
    if models.tuned:
        run.register("sft", cfg, models.data, models.tuned.model_dir, models.start)
    run.register(
        "final", models.trained_cfg, models.data, models.trained.model.model_dir, models.after,
        refusal,
    )  # fmt: skip


def finish_grpo(run: PipelineRun, models: GrpoModels, **fields: Any) -> dict[str, Any]:
    """The run summary (`PipelineRun.finish`) with the trained model; `fields` beside it."""
    trained, tuned = models.trained, models.tuned
    return run.finish(
        trained_in=[trained.mlflow_run_id, tuned.mlflow_run_id if tuned else ""],
        checkpoint=trained.model.model_dir,
        global_step=trained.model.global_step,
        **fields,
    )


def grpo_pipeline(cfg: RunConfig) -> dict[str, Any]:
    """The GRPO pipelines' steps (judge-grpo's judges, rlvr's policies): download → prepare →
    evaluate (before) → [SFT → evaluate (sft)] → train → evaluate (after) → register; returns
    the run summary. A judge-paid policy adds its own steps around these (flows/rlvr_judged.py)."""
    with PipelineRun(cfg) as run:
        models = train_steps(run, cfg, prepare_steps(run, cfg))
    return finish_grpo(run, models)
