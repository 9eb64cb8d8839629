"""Tasks around the pipeline's MLflow run, and what the Prefect UI shows about a run.

`StageRecorder` runs a stage task, notes whether it ran or came from the cache and how long it
took; `publish_summary` turns that into the `run-summary` table artifact and MLflow tags.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.runtime import flow_run

from judgeflow import stages
from judgeflow.cluster import submitted
from judgeflow.config import RunConfig
from judgeflow.console import comparison_rows, report_stage
from judgeflow.storage import Manifest
from judgeflow.tracking import Tracker
from tasks.policies import BACKOFF, retry_transient

_retrying = {
    "retries": 3,
    "retry_delay_seconds": BACKOFF,
    "retry_condition_fn": retry_transient,
}


@task(name="start-tracking", **_retrying)
def start_tracking(cfg: RunConfig) -> str:
    """Open the MLflow run (params, lineage tags) and return its id."""
    tags = {
        "prefect.flow_run_id": str(flow_run.get_id() or ""),
        "prefect.flow_run_name": str(flow_run.get_name() or ""),
    }
    return stages.start_tracking(
        cfg, run_name=f"{cfg.recipe}:{flow_run.get_name()}", tags=tags
    ).run_id


@task(name="record-data", **_retrying)
def record_data(cfg: RunConfig, run_id: str, manifest: Manifest, data: stages.PreparedData) -> None:
    """Manifest, data report and counts into MLflow; the data report as a table artifact."""
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    tracker.log_dict(manifest.to_dict(), "data/manifest.json")
    tracker.set_tags(
        {
            "judgeflow.data.source": cfg.data.source,
            "judgeflow.data.manifest_hash": manifest.content_hash,
        }
    )
    tracker.log_dict(data.report, f"data/{Path(data.report_file).name}")  # also when on S3
    counts = data.report["counts"]
    examples = counts["examples_written"]
    rows = counts.get("rows_written", examples)  # pairwise validation: two rows per example
    if val_source := data.report.get("val_source"):  # data.val_source: its rows are the split
        val_counts = val_source["counts"]
        examples = {**examples, "val": sum(val_counts["examples_written"].values())}
        rows = {**rows, "val": sum(val_counts.get("rows_written", val_counts["examples_written"]).values())}  # fmt: skip
    dropped = data.report["dropped"]["by_reason"]
    duplicates = _duplicate_counts(data.report.get("duplicates") or {})
    tracker.log_metrics(
        {f"data/rows_{split}": n for split, n in rows.items()}
        | {f"data/examples_{split}": n for split, n in examples.items()}
        | {f"data/dropped_{why}": n for why, n in dropped.items()}
        | {f"data/duplicates_{where}": n for where, n in duplicates.items()}
        | {"data/rows_read": counts["rows_read"]}
    )
    create_table_artifact(
        key="data-report",
        table=[{"what": "rows read", "count": counts["rows_read"]}]
        + [{"what": f"examples written ({split})", "count": n} for split, n in examples.items()]
        + [{"what": f"rows written ({split})", "count": n} for split, n in rows.items()]
        + [{"what": f"dropped: {why}", "count": n} for why, n in dropped.items()]
        + [{"what": f"duplicate prompts: {w}", "count": n} for w, n in duplicates.items()],
        description=f"Data report for {cfg.recipe}: {data.report_file}",
    )


def _duplicate_counts(duplicates: dict[str, Any]) -> dict[str, int]:
    """`within_train`, `across_val`, …: units whose prompt repeats (the report lists them)."""
    return {
        f"{where}_{split}": int(entry.get("count", 0))
        for where in ("within", "across")
        for split, entry in (duplicates.get(where) or {}).items()
    }


@task(name="record-training", **_retrying)
def record_training(cfg: RunConfig, run_id: str, outcome: Any) -> None:
    """Where the model is and which job/run trained it (a cached model: an earlier run), and
    the metrics its job could not deliver while MLflow was down (`metrics-spool.jsonl`)."""
    model = outcome.model
    trained_in = outcome.mlflow_run_id or run_id
    spool = stages.metrics_spool(cfg, trained_in, "train")
    Tracker.attach(trained_in, cfg.tracking.tracking_uri).replay_spool(spool)
    Tracker.attach(run_id, cfg.tracking.tracking_uri).set_tags(
        {
            "judgeflow.train.job_id": outcome.job_id,
            "judgeflow.train.mlflow_run_id": outcome.mlflow_run_id,
            "judgeflow.train.start_model": cfg.model.path,  # the SFT model when SFT ran
            "judgeflow.checkpoint": model.model_dir,
            "judgeflow.global_step": model.global_step,
            "judgeflow.resumed_from": model.resumed_from,
        }
    )


@task(name="record-evaluation", **_retrying)
def record_evaluation(
    cfg: RunConfig, run_id: str, label: str, result: dict[str, Any]
) -> dict[str, float]:
    """Log `eval/<metric>` as `<label>/<metric>` (e.g. before/accuracy), what decontamination
    found (tag `judgeflow.decontamination.<label>`: checked, overlap-allowed or unchecked), the
    predictions table, the details (`eval/<label>_details.json`: confusion, breakdowns, overlap)
    and the pictures (`plots/<label>_*.png`)."""
    from judgeflow.evaluation import JudgeEvaluation, write_evaluation_artifacts

    metrics = {f"{label}/{k.removeprefix('eval/')}": v for k, v in result["metrics"].items()}
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    tracker.log_metrics(metrics)
    if checked := stages.decontamination_of(result):
        tracker.set_tags({f"judgeflow.decontamination.{label}": checked})
    tracker.log_table(result["rows"], f"eval/{label}_predictions.json")
    if result.get("details"):
        evaluation = JudgeEvaluation(result["metrics"], result["rows"], result["details"])
        with tempfile.TemporaryDirectory() as tmp:
            for path in write_evaluation_artifacts(evaluation, cfg.mode, label, Path(tmp)):
                tracker.log_artifact(path, "plots" if path.suffix == ".png" else "eval")
    return metrics


@task(name="log-summary", **_retrying)
def log_summary(
    cfg: RunConfig, run_id: str, summary: dict[str, Any], status: str = "FINISHED"
) -> None:
    """Record what the run produced and close it."""
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    tracker.set_tags(
        {"judgeflow.checkpoint": summary.get("checkpoint"), "judgeflow.status": status}
    )
    tracker.log_dict(summary, "summary.json")
    tracker.finish(status)


# ---------------------------------------------------------------------------- run summary


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


#: The run-summary's metric columns, in order: a stage's `<anything>/<name>` metric lands in
#: the column `<name>` (e.g. `after/reward_mean` and `train/reward_mean` both in reward_mean).
SUMMARY_COLUMNS = ("global_step", "reward_mean", "format_failure_rate", "exact_match", "mae",
                   "accuracy", "consistent_accuracy", "position_bias", "ranking_accuracy",
                   "loss", "overlap_rows")  # fmt: skip


def summary_table(
    rows: list[dict[str, Any]], *, link: str, jobs: dict[str, list[str]]
) -> list[dict[str, Any]]:
    """One row per stage, one column per key metric (empty where a stage has none)."""
    table = []
    for row in rows:
        metrics = {
            key.rsplit("/", 1)[-1]: value
            for key, value in row.get("metrics", {}).items()
            if "/subset/" not in key  # the per-subset breakdown is in the evaluation's details
        }
        entry: dict[str, Any] = {
            "stage": row["stage"],
            "status": row["status"],
            "duration_s": row["duration_s"],
        }
        for column in SUMMARY_COLUMNS:
            value = metrics.get(column)
            entry[column] = round(float(value), 4) if isinstance(value, int | float) else ""
        entry["decontamination"] = row.get("decontamination", "")
        entry["slurm_job_ids"] = ", ".join(jobs.get(_job_stage(row["stage"]), []))
        entry["note"] = row.get("note", "")
        entry["error"] = row.get("error", "")
        entry["mlflow"] = link
        table.append(entry)
    optional = (*SUMMARY_COLUMNS, "decontamination", "note")
    used = {c for c in optional if any(e[c] != "" for e in table)}
    return [{k: v for k, v in e.items() if k not in optional or k in used} for e in table]


@task(name="publish-summary", **_retrying)
def publish_summary(
    cfg: RunConfig, run_id: str | None, rows: list[dict[str, Any]], flow_run_id: str
) -> list[dict[str, Any]]:
    """The `run-summary` table artifact (stage, status, duration, key metrics, jobs, MLflow link)
    and `judgeflow.cached.<stage>` tags on the MLflow run."""
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri) if run_id else None
    link = (tracker.url() or f"mlflow run {run_id}") if tracker else ""
    jobs = (
        submitted_jobs(cfg.cluster.shared_dir, flow_run_id)
        if cfg.cluster.backend == "slurm"
        else {}
    )
    table = summary_table(rows, link=link, jobs=jobs)
    create_table_artifact(
        key="run-summary",
        table=table,
        description=f"{cfg.recipe}: what each stage did in this run (cached = reused, no job)",
    )
    if tracker:
        tracker.set_tags(
            {_tag(row["stage"]): str(row["status"] == "cached").lower() for row in rows}
        )
    return table


#: Training curves drawn into `plots/training_curves.png`: (metric, panel title).
CURVES = (
    ("sft/loss", "SFT loss"),
    ("train/reward_mean", "GRPO reward (mean)"),
    ("train/format_failure_rate", "GRPO format-failure rate"),
    ("val/reward_mean", "validation reward (mean)"),
)


@task(name="publish-comparison", **_retrying)
def publish_comparison(
    cfg: RunConfig,
    run_id: str,
    metrics: dict[str, float],
    labels: list[str],
    trained_in: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The before → after comparison: a `before-after` table artifact in Prefect; in MLflow the
    same table (`eval/comparison.json`), its bar chart and the training curves as PNGs.

    A stage that came from the cache logged its curve in the run that trained it: `trained_in`
    lists those runs (SFT's, GRPO's), searched after this one.
    """
    from judgeflow.evaluation.plots import plot_comparison, plot_curves

    rows = comparison_rows(metrics, labels)
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    sources = [tracker] + [
        Tracker.attach(other, cfg.tracking.tracking_uri)
        for other in dict.fromkeys(trained_in or [])
        if other and other != run_id
    ]
    with tempfile.TemporaryDirectory() as tmp:
        curves = {
            title: next((h for t in sources if (h := t.metric_history(key))), [])
            for key, title in CURVES
        }
        if any(curves.values()):
            png = plot_curves(curves, Path(tmp) / "training_curves.png", title=f"{cfg.recipe}: training")  # fmt: skip
            tracker.log_image_file(png, "plots")
        if rows:
            png = plot_comparison(rows, Path(tmp) / "before_after.png", title=f"{cfg.recipe}: before → after")  # fmt: skip
            tracker.log_image_file(png, "plots")
    if rows:
        tracker.log_table(rows, "eval/comparison.json")
        create_table_artifact(
            key="before-after",
            table=[_rounded(row) for row in rows],
            description=f"{cfg.recipe}: judge quality on the validation split, per evaluation",
        )
    return rows


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}


def submitted_jobs(shared_dir: str, flow_run_id: str) -> dict[str, list[str]]:
    """Job ids per stage name (`train`, `evaluate-before`, …) that this flow run submitted."""
    path = submitted.jobs_file(shared_dir, flow_run_id)
    out: dict[str, list[str]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            out.setdefault(entry["stage"], []).append(str(entry["job_id"]))
    return out


def _tag(stage: str) -> str:
    """MLflow tag for a stage row: `evaluate[before]` -> `judgeflow.cached.evaluate-before`."""
    return "judgeflow.cached." + re.sub(r"[^\w./ -]+", "-", stage).strip("-")


def _job_stage(stage: str) -> str:
    """Summary row `evaluate[before]` -> registry stage `evaluate-before`."""
    return stage.replace("[", "-").rstrip("]")
