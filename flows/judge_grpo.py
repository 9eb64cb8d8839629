"""judge-grpo: train a pointwise or pairwise judge with GRPO.

download → prepare → evaluate (before) → train → evaluate (after) → log
"""

from typing import Any, Literal

from prefect import flow

from judgeflow.config import load_config
from judgeflow.tracking import resolve_tracking_uri
from tasks.data import download, prepare
from tasks.evaluate import evaluate
from tasks.tracking import log_summary, start_tracking
from tasks.train import cancel_submitted_jobs, train


@flow(
    name="judge-grpo",
    log_prints=True,
    on_cancellation=[cancel_submitted_jobs],
    on_crashed=[cancel_submitted_jobs],
)
def judge_grpo(
    mode: Literal["pointwise", "pairwise"] = "pointwise",
    recipe: str | None = None,
    profile: str | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """`recipe` defaults to grpo-<mode>; `overrides` are `dotted.key=value` strings."""
    cfg = load_config(recipe or f"grpo-{mode}", profile=profile, overrides=overrides or [])
    run_id = start_tracking(cfg)
    try:
        manifest = download(cfg, run_id)
        data = prepare(cfg, manifest, run_id)
        before = (
            evaluate(cfg, cfg.model.path, data, run_id, "before") if cfg.evaluation.enabled else {}
        )
        retrying = train.with_options(
            retries=cfg.cluster.retries, retry_delay_seconds=cfg.cluster.retry_delay_s
        )
        model = retrying(cfg, data, run_id)
        after = (
            evaluate(cfg, model.model_dir, data, run_id, "after") if cfg.evaluation.enabled else {}
        )
    except BaseException as exc:
        log_summary(cfg, run_id, {"mlflow_run_id": run_id, "error": repr(exc)}, status="FAILED")
        raise

    summary = {
        "mlflow_run_id": run_id,
        "tracking_uri": resolve_tracking_uri(cfg.tracking.tracking_uri),
        "checkpoint": model.model_dir,
        "global_step": model.global_step,
        "metrics": {**before, **after},
    }
    log_summary(cfg, run_id, summary)
    return summary
