"""The pipeline's stages as plain functions: config in, paths and metrics out.

Prefect tasks wrap these one to one (`tasks/`); a Slurm job or a test can call them directly.
Each stage leaves its outputs in the artifact store under a content-derived key, so a re-run
with the same inputs finds them in the same place.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from judgeflow.cluster.stage import PROGRESS_FILE, RESULT_FILE, StageSpec
from judgeflow.config import RunConfig, flatten, judgeflow_home
from judgeflow.storage import ArtifactStore, Manifest, download, write_json
from judgeflow.tracking import Tracker, git_commit, resolve_tracking_uri

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class PreparedData:
    train_file: str
    val_file: str | None
    report_file: str
    report: dict[str, Any]


@dataclass(frozen=True)
class TrainedModel:
    model_dir: str  # final weights + tokenizer, loadable with from_pretrained
    checkpoint_dir: str | None
    global_step: int
    resumed_from: str | None
    metrics: dict[str, float]


def store_for(cfg: RunConfig) -> ArtifactStore:
    return ArtifactStore(cfg.storage.root)


def start_tracking(
    cfg: RunConfig, *, run_name: str | None = None, tags: dict[str, str] | None = None
) -> Tracker:
    """Open the pipeline's MLflow run and record the flattened config and lineage tags."""
    tracker = Tracker.start(
        cfg.tracking.experiment,
        run_name=run_name or cfg.recipe,
        tracking_uri=cfg.tracking.tracking_uri,
        tags={
            "judgeflow.recipe": cfg.recipe,
            "judgeflow.mode": cfg.mode,
            "judgeflow.engine": cfg.resolved_engine,
            "judgeflow.backend": cfg.cluster.backend,
            "judgeflow.config_hash": cfg.fingerprint(),
            "judgeflow.base_model": cfg.model.path,
            "judgeflow.git_commit": git_commit(Path(__file__).parent) or "unknown",
            **(tags or {}),
        },
    )
    tracker.log_params(flatten(cfg))
    return tracker


def download_stage(cfg: RunConfig, progress: Progress | None = None) -> Manifest:
    """Fetch the data source into the store, keyed by source + revision."""
    key = _short_hash(cfg.data.source, cfg.data.revision or "")
    dest = store_for(cfg).local_dir("sources", key)
    return download(cfg.data.source, dest, revision=cfg.data.revision, progress=progress)


def prepare_stage(cfg: RunConfig, manifest: Manifest) -> PreparedData:
    """Validate and render the judge prompts into verl RL parquet (+ a validation split)."""
    from judgeflow.data import prepare_judge

    if cfg.mode == "grrm":
        raise NotImplementedError("GRRM data preparation runs in the grrm flow")
    params = _prepare_params(cfg)
    tokenizer = cfg.model.path if cfg.data.filter_overlong_prompts else None
    identity = {**params, "tokenizer": tokenizer, "max_prompt_length": cfg.data.max_prompt_length}
    key = _short_hash(manifest.content_hash, cfg.mode, json.dumps(identity, sort_keys=True))
    out_dir = store_for(cfg).local_dir("prepared", key)
    result = prepare_judge(
        cfg.mode,
        [str(p) for p in manifest.paths],
        str(out_dir / f"{cfg.mode}.parquet"),
        tokenizer=tokenizer,
        max_prompt_length=cfg.data.max_prompt_length if tokenizer else None,
        **params,
    )
    return PreparedData(
        train_file=str(result.train_path),
        val_file=str(result.val_path) if result.val_path else None,
        report_file=str(result.report_path),
        report=result.report,
    )


def train_stage(
    cfg: RunConfig,
    data: PreparedData,
    *,
    output_dir: str | Path,
    run_id: str | None = None,
    metrics_sink: Callable[[dict[str, float], int], None] | None = None,
    progress: Progress | None = None,
) -> TrainedModel:
    """GRPO on the prepared data with the configured engine: TRL here, verl on a GPU cluster.

    Both resume from the newest checkpoint in `output_dir`, so a resubmitted job continues.
    """
    if cfg.resolved_engine == "verl":
        return _train_with_verl(cfg, data, output_dir=output_dir, run_id=run_id)
    from judgeflow.engines.trl import train_grpo

    result = train_grpo(
        trl_params(cfg, output_dir),
        data.train_file,
        eval_file=data.val_file,
        metrics_sink=metrics_sink,
        progress=progress,
        resume=True,
    )
    return TrainedModel(
        model_dir=str(result.final_model_dir),
        checkpoint_dir=str(result.last_checkpoint) if result.last_checkpoint else None,
        global_step=result.global_step,
        resumed_from=str(result.resumed_from) if result.resumed_from else None,
        metrics=dict(result.metrics),
    )


def _train_with_verl(
    cfg: RunConfig, data: PreparedData, *, output_dir: str | Path, run_id: str | None
) -> TrainedModel:
    """verl's trainer on this job's Ray cluster; metrics go to the pipeline's MLflow run."""
    from judgeflow.engines.verl import run_verl_stage

    run_name = Tracker.attach(run_id, cfg.tracking.tracking_uri).run_name() if run_id else None
    checkpoints = Path(output_dir) / "verl"
    resumed = (
        (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip()
        if (checkpoints / "latest_checkpointed_iteration.txt").exists()
        else None
    )
    result = run_verl_stage(
        cfg,
        train_files=[data.train_file],
        val_files=[data.val_file] if data.val_file else [data.train_file],
        checkpoint_dir=str(checkpoints),
        publish_to=("runs", run_id or "local", "final"),
        mlflow_run_id=run_id,
        tracking_uri=resolve_tracking_uri(cfg.tracking.tracking_uri),
        nnodes=cfg.cluster.nodes,
        n_gpus_per_node=cfg.cluster.gpus_per_node,
        experiment_name=run_name,
    )
    return TrainedModel(
        model_dir=str(result["model_dir"]),
        checkpoint_dir=str(result["checkpoint_dir"]),
        global_step=int(result["global_step"]),
        resumed_from=f"global_step_{resumed}" if resumed else None,
        metrics={},
    )


def evaluate_stage(cfg: RunConfig, model_dir: str, data: PreparedData) -> dict[str, Any]:
    """Judge metrics of `model_dir` on the validation split (predictions for a table)."""
    from judgeflow.evaluation import evaluate_judge

    if not data.val_file:
        return {"metrics": {}, "rows": []}
    result = evaluate_judge(
        model_dir,
        data.val_file,
        mode=cfg.mode,
        max_new_tokens=cfg.evaluation.max_new_tokens,
        limit=cfg.evaluation.limit,
        batch_size=cfg.evaluation.batch_size,
    )
    return {"metrics": dict(result.metrics), "rows": list(result.predictions)}


def trl_params(cfg: RunConfig, output_dir: str | Path) -> Any:
    """Map the engine-neutral GRPO config onto TRL's knobs."""
    from judgeflow.engines.trl import GrpoParams

    g = cfg.grpo
    return GrpoParams(
        model_path=cfg.model.path,
        output_dir=str(output_dir),
        reward=cfg.mode,
        learning_rate=g.learning_rate,
        num_generations=g.rollout_n,
        prompts_per_step=g.train_batch_size,
        micro_batch_size=g.rollout_n,  # one prompt's group per forward/backward pass
        max_prompt_length=cfg.data.max_prompt_length,
        max_completion_length=cfg.data.max_response_length,
        max_steps=g.max_steps or -1,
        num_train_epochs=g.total_epochs,
        beta=g.kl_loss_coef if g.use_kl_loss else 0.0,
        temperature=g.temperature,
        save_steps=g.save_freq,
        eval_steps=g.test_freq,
        seed=cfg.data.seed,
        gradient_checkpointing=g.gradient_checkpointing,
    )


def run_dir(cfg: RunConfig, run_id: str) -> Path:
    """Where a run's checkpoints live (local store, or a local staging dir for remote stores)."""
    return store_for(cfg).local_dir("runs", run_id)


def _prepare_params(cfg: RunConfig) -> dict[str, Any]:
    d = cfg.data
    return {
        "val_fraction": d.val_fraction,
        "balance_positions": d.balance_positions,
        "seed": d.seed,
        "input_format": d.format,
        "skip_invalid": d.skip_invalid,
        "chosen_label": d.chosen_label,
        "rejected_label": d.rejected_label,
    }


def _short_hash(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------- stages as jobs
#
# A stage that runs as a job (Slurm, or a local process through the same interface) gets its
# inputs as one JSON file in its stage directory and leaves result.json and progress.json there.

STAGE_INPUT = "input.json"


def stage_spec(
    cfg: RunConfig,
    stage: str,
    run_id: str,
    payload: dict[str, Any],
    *,
    name: str | None = None,
    dry_run: bool = False,
) -> StageSpec:
    """The job for `stage` ("train" or "evaluate"): command, environment, shared directory.

    Unless `dry_run`, this writes the stage input file the command reads.
    """
    name = name or stage
    workdir = Path(cfg.cluster.shared_dir) / run_id / name
    if not dry_run:
        stage_input = {
            "stage": stage,
            "config": cfg.model_dump(mode="json"),
            "run_id": run_id,
            **payload,
        }
        write_json(workdir / STAGE_INPUT, stage_input)
    env = {
        **cfg.cluster.env,
        "MLFLOW_TRACKING_URI": resolve_tracking_uri(cfg.tracking.tracking_uri),
        "MLFLOW_RUN_ID": run_id,
        "JUDGEFLOW_HOME": str(judgeflow_home()),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    return StageSpec(
        name=name,
        command=[sys.executable, "-m", "judgeflow", "stage", "run", str(workdir / STAGE_INPUT)],
        workdir=str(workdir),
        env=env,
        ray=cfg.cluster.backend == "slurm",
        gpus_per_node=cfg.cluster.gpus_per_node,
        ray_num_cpus=cfg.cluster.ray_num_cpus,
        ray_object_store_mb=cfg.cluster.ray_object_store_mb,
        ray_dashboard=cfg.cluster.ray_dashboard,
    )


def train_stage_spec(
    cfg: RunConfig, data: PreparedData, run_id: str, *, dry_run: bool = False
) -> StageSpec:
    payload = {"data": asdict(data), "output_dir": str(run_dir(cfg, run_id))}
    return stage_spec(cfg, "train", run_id, payload, dry_run=dry_run)


def evaluate_stage_spec(
    cfg: RunConfig, model_dir: str, data: PreparedData, run_id: str, label: str
) -> StageSpec:
    payload = {"data": asdict(data), "model_dir": model_dir}
    return stage_spec(cfg, "evaluate", run_id, payload, name=f"evaluate-{label}")


def run_stage_job(input_file: str | Path) -> dict[str, Any]:
    """Inside the job: run the stage named in the input file; leave progress and result."""
    inp = json.loads(Path(input_file).read_text())
    cfg = RunConfig.model_validate(inp["config"])
    workdir = Path(input_file).parent
    data = PreparedData(**inp["data"])
    result: dict[str, Any]
    if inp["stage"] == "train":

        def progress(step: int, total: int) -> None:
            write_json(workdir / PROGRESS_FILE, {"step": step, "total": total})

        tracker = Tracker.attach(inp["run_id"], cfg.tracking.tracking_uri)
        model = train_stage(
            cfg,
            data,
            output_dir=inp["output_dir"],
            run_id=inp["run_id"],
            metrics_sink=tracker,
            progress=progress,
        )
        result = asdict(model)
    elif inp["stage"] == "evaluate":
        result = evaluate_stage(cfg, inp["model_dir"], data)
    else:
        raise ValueError(f"{input_file}: unknown stage {inp['stage']!r}")
    write_json(workdir / RESULT_FILE, result)
    return result
