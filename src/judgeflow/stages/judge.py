"""Judging unlabeled data with a trained judge: what `judgeflow judge` runs, in this process or
as a job (`stages.jobs.judge_job_spec`), and what it records in MLflow."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from judgeflow.config import ConfigError, RunConfig
from judgeflow.inference.batch import judge_file, summary_metrics
from judgeflow.inference.pyfunc import local_weights
from judgeflow.inference.verdicts import INPUT_COLUMNS
from judgeflow.modes import Mode
from judgeflow.tracking import Tracker, git_commit

__all__ = ["EXPERIMENT", "judge_stage", "record_judging", "start_judging_run"]

#: The MLflow experiment of judging runs.
EXPERIMENT = "judgeflow-judge"


def judge_stage(
    cfg: RunConfig,
    model_uri: str,
    data: str,
    output: str,
    *,
    model_ref: str,
    skip_invalid: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Judge every row of `data` into `output` with the weights at `model_uri` (HF generation,
    on a GPU when the job has one); the summary (`JudgingSummary.to_dict`)."""
    from judgeflow.engines.generate import HFGenerator

    if cfg.mode not in INPUT_COLUMNS:
        raise ConfigError(
            f"`judgeflow judge` judges {', '.join(INPUT_COLUMNS)} rows, not {cfg.mode}"
        )
    weights = local_weights(model_uri, cfg.storage.root)
    summary = judge_file(
        HFGenerator(weights, batch_size=cfg.evaluation.batch_size),
        cast(Mode, cfg.mode),
        data,
        output,
        model=model_ref,
        max_new_tokens=cfg.evaluation.max_new_tokens,
        batch_size=cfg.evaluation.batch_size,
        skip_invalid=skip_invalid,
        on_progress=progress,
    )
    return summary.to_dict()


def start_judging_run(cfg: RunConfig, model: str, version: str | None, data: str) -> Tracker:
    """The MLflow run of one judging: what judged what, with which settings."""
    tracker = Tracker.start(
        EXPERIMENT,
        run_name=f"judge {data.rsplit('/', 1)[-1]}",
        tracking_uri=cfg.tracking.tracking_uri,
        tags={
            "judgeflow.model": model,
            "judgeflow.model_uri": cfg.model.path,
            "judgeflow.registered_version": version or "",
            "judgeflow.mode": cfg.mode,
            "judgeflow.judge_data": data,
            "judgeflow.backend": cfg.cluster.backend,
            "judgeflow.git_commit": git_commit(Path(__file__).parent) or "unknown",
        },
    )
    tracker.log_params({f"evaluation.{k}": v for k, v in cfg.evaluation.model_dump().items()})
    return tracker


def record_judging(tracker: Tracker, summary: dict[str, Any]) -> None:
    """The summary's numbers as metrics, the summary itself as `judging/summary.json`."""
    tracker.set_tags({"judgeflow.judge_output": summary["output"]})
    tracker.log_metrics(summary_metrics(summary))
    tracker.log_dict(summary, "judging/summary.json")
