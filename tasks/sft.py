"""SFT tasks: validate the judge SFT rows, and the LLaMA-Factory SFT stage as a job.

GRPO (judges) and RLVR (GRRM) start from the model `sft` returns. The stage is cached on the
SFT data's sha256 and the SFT configuration (`judgeflow.caching.sft_key`), so an unchanged
retraining reuses the SFT model instead of training it again.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefect import task

from judgeflow import stages
from judgeflow.config import RunConfig
from judgeflow.storage import Manifest
from tasks.policies import BACKOFF, JITTER, retry_transient
from tasks.submission import run_job, training_progress


@dataclass(frozen=True)
class SftOutcome:
    """The SFT model, the job that trained it and the MLflow run that holds its metrics."""

    model_dir: str
    job_id: str
    mlflow_run_id: str
    metrics: dict[str, float]


@task(
    name="prepare-sft",
    retries=2,
    retry_delay_seconds=BACKOFF,
    retry_jitter_factor=JITTER,
    retry_condition_fn=retry_transient,
)
def prepare_sft(cfg: RunConfig, manifest: Manifest) -> stages.SftData:
    return stages.prepare_sft_stage(cfg, manifest)


@task(
    name="sft",
    task_run_name="sft[{cfg.recipe}@{cfg.cluster.backend}]",
    retry_condition_fn=retry_transient,
)
def sft(cfg: RunConfig, sft_file: str, run_id: str) -> SftOutcome:
    """LLaMA-Factory SFT of model.path on `sft_file` (`messages` parquet)."""
    progress = training_progress(cfg, "sft")
    job_id, result = run_job(cfg, stages.sft_job_spec(cfg, sft_file, run_id), on_progress=progress)
    return SftOutcome(str(result["model_dir"]), job_id, run_id, dict(result.get("metrics", {})))
