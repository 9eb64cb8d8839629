"""grrm: a group ranking reward model for machine translation.

    download → prepare (SFT, RL train, RL test) → SFT → evaluate → RLVR from the SFT model → evaluate
      → register → log

`stage` picks the part to run: `sft`, `rlvr` or `full`. `rlvr` starts from the newest SFT model of
the same lineage (same data and SFT settings, found in MLflow), or from `model.path` when an
override sets it. Every stage is cached as in judge-grpo: an unchanged retraining submits no job.
`register` makes the SFT model a version of `grrm-sft` and the RLVR model one of `grrm` (its parent
the SFT version); `champion` moves only to a version better on the same evaluation.
With `data.shards` > 1 the augmented RL train split is prepared by the `prepare-grrm-rl-sharded`
subflow on Ray (`data.ray_address`, local by default) first; its bytes are the same either way.
"""

from typing import Any, Literal

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from flows.prepare_sharded import prepare_rl_train
from judgeflow.config import load_config
from judgeflow.console import comparison_rows
from judgeflow.stages import val_source_config, with_policy
from judgeflow.tracking import resolve_tracking_uri
from tasks.credentials import use_job_secrets, use_storage_credentials
from tasks.data import download
from tasks.evaluate import evaluate
from tasks.grrm import find_sft_model, prepare_grrm, record_grrm_data
from tasks.policies import cached, cached_job
from tasks.register import register_model
from tasks.sft import record_sft, sft
from tasks.tracking import (
    StageRecorder,
    log_summary,
    publish_comparison,
    publish_summary,
    record_evaluation,
    record_training,
    start_tracking,
)
from tasks.train import cancel_submitted_jobs, train

#: The evaluations a run compares, in order (the champions' when the gate had to measure them).
LABELS = ["before", "sft", "after", "champion-sft", "champion"]


@flow(
    name="grrm",
    log_prints=True,
    on_cancellation=[cancel_submitted_jobs],
    on_crashed=[cancel_submitted_jobs],
)
def grrm(
    recipe: str = "grrm-full",
    stage: Literal["sft", "rlvr", "full"] = "full",
    profile: str | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    cfg = load_config(
        recipe, profile=profile, overrides=overrides or [], report=get_run_logger().warning
    )
    use_storage_credentials(cfg)  # storage.credentials_block: keys into the env, not params
    use_job_secrets(cfg)  # cluster.secrets=prefect:BLOCK: the same, for the stage jobs
    run_id = start_tracking(cfg)
    steps = StageRecorder()
    metrics: dict[str, float] = {}
    model_dir = cfg.model.path
    registry: dict[str, dict[str, Any]] = {}
    tuned_eval = after = None
    try:
        manifest = steps("download", cached(download), cfg)
        rl_train = prepare_rl_train(steps, cfg, manifest)  # data.shards > 1: on Ray
        val_manifest = steps("download[val]", cached(download), val_source_config(cfg)) if cfg.data.val_source else None  # fmt: skip
        data = steps("prepare", cached(prepare_grrm), cfg, manifest, rl_train, val_manifest)
        record_grrm_data(cfg, run_id, data)
        if stage in ("sft", "full"):
            tuned = steps("sft", cached_job(sft, cfg), cfg, data.sft_file, run_id)
            record_sft(cfg, run_id, tuned, data.sft_file)
            steps.add_metrics("sft", tuned.metrics)
            model_dir = tuned.model_dir
            if cfg.evaluation.enabled:
                tuned_eval = steps("evaluate[sft]", cached(evaluate), with_policy(cfg, model_dir), model_dir, data.rl, run_id, "sft")  # fmt: skip
                metrics |= record_evaluation(cfg, run_id, "sft", tuned_eval)
            if cfg.register.enabled:
                registry["sft"], seen = register_model(steps, cfg, run_id, data.rl, model_dir, "sft", tuned_eval, comparison_rows(metrics, LABELS))  # fmt: skip
                metrics |= seen
        elif not any(o.startswith("model.path=") for o in overrides or []):
            model_dir = find_sft_model(cfg, data.sft_file)  # RLVR only: this lineage's SFT
        if stage in ("rlvr", "full"):
            rl_cfg = with_policy(cfg, model_dir)
            if stage == "rlvr" and cfg.evaluation.enabled:
                result = steps("evaluate[before]", cached(evaluate), rl_cfg, model_dir, data.rl, run_id, "before")  # fmt: skip
                metrics |= record_evaluation(cfg, run_id, "before", result)
            trained = steps("train", cached_job(train, cfg), rl_cfg, data.rl, run_id)
            record_training(rl_cfg, run_id, trained)
            steps.add_metrics("train", {"global_step": trained.model.global_step, **trained.model.metrics})  # fmt: skip
            model_dir = trained.model.model_dir
            if cfg.evaluation.enabled:
                after = steps("evaluate[after]", cached(evaluate), rl_cfg, model_dir, data.rl, run_id, "after")  # fmt: skip
                metrics |= record_evaluation(cfg, run_id, "after", after)
            if cfg.register.enabled:
                registry["final"], seen = register_model(steps, rl_cfg, run_id, data.rl, model_dir, "final", after, comparison_rows(metrics, LABELS))  # fmt: skip
                metrics |= seen
    except BaseException as exc:
        publish_summary(cfg, run_id, steps.rows, str(flow_run.get_id()))
        log_summary(cfg, run_id, {"mlflow_run_id": run_id, "error": repr(exc)}, status="FAILED")
        raise

    for row in steps.rows:  # each evaluation's row shows its own metrics
        if row["stage"].startswith("evaluate["):
            label = row["stage"].removeprefix("evaluate[").removesuffix("]")
            steps.add_metrics(row["stage"], {k: v for k, v in metrics.items() if k.startswith(f"{label}/")})  # fmt: skip
    publish_summary(cfg, run_id, steps.rows, str(flow_run.get_id()))
    comparison = publish_comparison(cfg, run_id, metrics, LABELS, None)
    summary = {
        "mlflow_run_id": run_id,
        "tracking_uri": resolve_tracking_uri(cfg.tracking.tracking_uri),
        "stage": stage,
        "checkpoint": model_dir,
        "metrics": metrics,
        "comparison": comparison,
        "stages": {row["stage"]: row["status"] for row in steps.rows},
        "registry": registry,
    }
    log_summary(cfg, run_id, summary)
    return summary
