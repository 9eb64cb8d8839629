"""judge-grpo: train a pointwise or pairwise judge with GRPO.

download → prepare → evaluate (before) → [SFT → evaluate (sft)] → train (GRPO) → evaluate (after)
  → register → log

With `sft.enabled`, LLaMA-Factory fine-tunes model.path on the `messages` rows of `sft.source`
first, and GRPO starts from that model (lineage tags on the MLflow run).

`register` makes each trained model an MLflow model version (`judge-grpo-<mode>`, the SFT model
`judge-grpo-<mode>-sft`) with its lineage; `champion` moves to it only when it beats the current
champion on the same evaluation (tasks/register.py).

Every stage is cached on what it depends on (tasks/policies.py, judgeflow/caching.py): a
scheduled retraining on unchanged data reuses every stage and submits no job. The run's
`run-summary` artifact says, per stage, whether it ran or came from the cache.
"""

from typing import Any

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from judgeflow.config import load_config
from judgeflow.console import comparison_rows
from judgeflow.modes import JudgeMode
from judgeflow.stages import sft_source_config, val_source_config, with_policy
from judgeflow.tracking import resolve_tracking_uri
from tasks.credentials import use_job_secrets, use_storage_credentials
from tasks.data import download, prepare
from tasks.evaluate import evaluate
from tasks.policies import cached, cached_job
from tasks.register import register_model
from tasks.sft import prepare_sft, record_sft, sft
from tasks.tracking import (
    StageRecorder,
    log_summary,
    publish_comparison,
    publish_summary,
    record_data,
    record_evaluation,
    record_training,
    start_tracking,
)
from tasks.train import cancel_submitted_jobs, train

#: The evaluations a run compares, in order (the champion's when the gate had to measure it).
LABELS = ["before", "sft", "after", "champion"]


@flow(
    name="judge-grpo",
    log_prints=True,
    on_cancellation=[cancel_submitted_jobs],
    on_crashed=[cancel_submitted_jobs],
)
def judge_grpo(
    mode: JudgeMode = "pointwise",
    recipe: str | None = None,
    profile: str | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """`recipe` defaults to grpo-<mode>; `overrides` are `dotted.key=value` strings."""
    cfg = load_config(
        recipe or f"grpo-{mode}",
        profile=profile,
        overrides=overrides or [],
        report=get_run_logger().warning,
    )
    use_storage_credentials(cfg)  # storage.credentials_block: keys into the env, not params
    use_job_secrets(cfg)  # cluster.secrets=prefect:BLOCK: the same, for the stage jobs
    run_id = start_tracking(cfg)
    stage = StageRecorder()
    metrics: dict[str, float] = {}
    mid = after = None
    registry: dict[str, dict[str, Any]] = {}
    try:
        manifest = stage("download", cached(download), cfg)
        val_manifest = stage("download[val]", cached(download), val_source_config(cfg)) if cfg.data.val_source else None  # fmt: skip
        data = stage("prepare", cached(prepare), cfg, manifest, val_manifest)
        record_data(cfg, run_id, manifest, data)
        if cfg.evaluation.enabled:
            before = stage("evaluate[before]", cached(evaluate), cfg, cfg.model.path, data, run_id, "before")  # fmt: skip
            metrics |= record_evaluation(cfg, run_id, "before", before)
        rl_cfg, tuned = cfg, None
        if cfg.sft.enabled:
            sft_manifest = stage("download[sft]", cached(download), sft_source_config(cfg))
            sft_data = stage("prepare[sft]", cached(prepare_sft), cfg, sft_manifest)
            tuned = stage("sft", cached_job(sft, cfg), cfg, sft_data.file, run_id)
            record_sft(cfg, run_id, tuned, sft_data.file, sft_data)
            stage.add_metrics("sft", tuned.metrics)
            rl_cfg = with_policy(cfg, tuned.model_dir)  # GRPO starts from the SFT model
            if cfg.evaluation.enabled:
                mid = stage("evaluate[sft]", cached(evaluate), rl_cfg, tuned.model_dir, data, run_id, "sft")  # fmt: skip
                metrics |= record_evaluation(cfg, run_id, "sft", mid)
        trained = stage("train", cached_job(train, cfg), rl_cfg, data, run_id)
        record_training(rl_cfg, run_id, trained)
        stage.add_metrics("train", {"global_step": trained.model.global_step, **trained.model.metrics})  # fmt: skip
        if cfg.evaluation.enabled:
            after = stage("evaluate[after]", cached(evaluate), rl_cfg, trained.model.model_dir, data, run_id, "after")  # fmt: skip
            metrics |= record_evaluation(cfg, run_id, "after", after)
        if cfg.register.enabled:
            evaluations = comparison_rows(metrics, LABELS)
            if tuned:
                registry["sft"], seen = register_model(stage, cfg, run_id, data, tuned.model_dir, "sft", mid, evaluations)  # fmt: skip
                metrics |= seen
            registry["final"], seen = register_model(stage, rl_cfg, run_id, data, trained.model.model_dir, "final", after, evaluations)  # fmt: skip
            metrics |= seen
    except BaseException as exc:
        publish_summary(cfg, run_id, stage.rows, str(flow_run.get_id()))
        log_summary(cfg, run_id, {"mlflow_run_id": run_id, "error": repr(exc)}, status="FAILED")
        raise

    for row in stage.rows:  # each evaluation's row shows its own metrics
        if row["stage"].startswith("evaluate["):
            label = row["stage"].removeprefix("evaluate[").removesuffix("]")
            stage.add_metrics(row["stage"], {k: v for k, v in metrics.items() if k.startswith(f"{label}/")})  # fmt: skip
    table = publish_summary(cfg, run_id, stage.rows, str(flow_run.get_id()))
    trained_in = [trained.mlflow_run_id, tuned.mlflow_run_id if tuned else ""]
    comparison = publish_comparison(cfg, run_id, metrics, LABELS, trained_in)
    summary = {
        "mlflow_run_id": run_id,
        "tracking_uri": resolve_tracking_uri(cfg.tracking.tracking_uri),
        "mlflow_url": table[0]["mlflow"] if table else None,
        "checkpoint": trained.model.model_dir,
        "global_step": trained.model.global_step,
        "metrics": metrics,
        "comparison": comparison,
        "stages": {row["stage"]: row["status"] for row in stage.rows},
        "registry": registry,
    }
    log_summary(cfg, run_id, summary)
    return summary
