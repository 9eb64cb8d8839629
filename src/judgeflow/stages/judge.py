"""Judging unlabeled data with a trained judge: what `judgeflow judge` runs, in this process or
as a job (`stages.jobs.judge_job_spec`), and what it records in MLflow. On GPUs under verl the
completions come from verl's validation mode (vLLM), one verl run per
`evaluation.rows_per_verl_run` rows; otherwise from HF generation."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from judgeflow.config import ConfigError, RunConfig
from judgeflow.engines.verl_eval import evaluation_gpus
from judgeflow.inference.batch import judge_file, summary_metrics
from judgeflow.inference.claim import claim_output
from judgeflow.inference.verdicts import INPUT_COLUMNS
from judgeflow.modes import JUDGE_MODELS, Mode
from judgeflow.registry import judge_tags
from judgeflow.storage import local_weights
from judgeflow.tracking import Tracker

__all__ = [
    "EXPERIMENT",
    "judge_stage",
    "judges_with_verl",
    "judging_batch",
    "record_judging",
    "start_judging_run",
]

#: The MLflow experiment of judging runs.
EXPERIMENT = "judgeflow-judge"


def judges_with_verl(cfg: RunConfig) -> bool:
    """Judging on GPUs under verl runs its validation mode (vLLM), as evaluation does; without
    a GPU, or under TRL, it is HF generation."""
    return cfg.resolved_engine == "verl" and evaluation_gpus(cfg) > 0


def judging_batch(cfg: RunConfig) -> int:
    """Rows judged, and recorded, at a time: one verl run's (`evaluation.rows_per_verl_run`),
    or one HF generation batch's (`evaluation.batch_size`)."""
    e = cfg.evaluation
    return e.rows_per_verl_run if judges_with_verl(cfg) else e.batch_size


def judge_stage(
    cfg: RunConfig,
    model_uri: str,
    data: str,
    output: str,
    *,
    model_ref: str,
    skip_invalid: bool = False,
    progress: Callable[[int, int], None] | None = None,
    workdir: str | Path | None = None,
) -> dict[str, Any]:
    """Judge every row of `data` into `output` with the weights at `model_uri`; the summary
    (`JudgingSummary.to_dict`). verl's files go under `workdir` (default: the job's folder)."""
    from judgeflow.engines.generate import Generator, HFGenerator

    if cfg.mode not in INPUT_COLUMNS:
        raise ConfigError(
            f"`judgeflow judge` judges {', '.join(INPUT_COLUMNS)} rows, not {cfg.mode}"
        )
    if data.startswith("sample://"):  # a shipped sample: its file in the package
        from judgeflow.storage import resolve_uri

        data = resolve_uri(data)
    with claim_output(output, data):  # a bad location or a running judging: refused first
        weights = local_weights(model_uri, cfg.storage.root)
        generator: Generator
        if judges_with_verl(cfg):
            from judgeflow.engines.verl_eval import verl_judging_generator

            scratch = workdir or os.environ.get("JUDGEFLOW_STAGE_DIR") or tempfile.mkdtemp()
            generator = verl_judging_generator(cfg, weights, scratch)
        else:
            generator = HFGenerator(weights, batch_size=cfg.evaluation.batch_size)
        summary = judge_file(
            generator,
            cast(Mode, cfg.mode),
            data,
            output,
            model=model_ref,
            max_new_tokens=cfg.evaluation.max_new_tokens,
            batch_size=judging_batch(cfg),
            skip_invalid=skip_invalid,
            on_progress=progress,
        )
    return summary.to_dict()


def start_judging_run(cfg: RunConfig, model: str, version: str | None, data: str) -> Tracker:
    """The MLflow run of one judging: what judged what, with which settings. A policy (mode
    rlvr) is no judge: it is refused here, before anything is recorded."""
    if cfg.mode not in JUDGE_MODELS:
        raise ConfigError(
            f"{model} is a policy (mode {cfg.mode}), not a judge: it answers prompts and writes no "
            "verdict. Score it on RLVR rows with `judgeflow evaluate MODEL --mode rlvr --data "
            "ROWS`, or judge with a judge (models:/judge-grpo-pointwise@champion, …)"
        )
    tracker = Tracker.start(
        EXPERIMENT,
        run_name=f"judge {data.rsplit('/', 1)[-1]}",
        tracking_uri=cfg.tracking.tracking_uri,
        tags={
            **judge_tags(cfg, model, version),
            "judgeflow.judge_data": data,
            "judgeflow.backend": cfg.cluster.backend,
        },
    )
    tracker.log_params({f"evaluation.{k}": v for k, v in cfg.evaluation.model_dump().items()})
    return tracker


def record_judging(tracker: Tracker, summary: dict[str, Any]) -> None:
    """The summary's numbers as metrics, the summary itself as `judging/summary.json`."""
    tracker.set_tags({"judgeflow.judge_output": summary["output"]})
    tracker.log_metrics(summary_metrics(summary))
    tracker.log_dict(summary, "judging/summary.json")
