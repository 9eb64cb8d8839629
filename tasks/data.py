"""Data tasks: download a source (manifest) and prepare verl RL parquet (data report).

Both are cached on content (`tasks.policies.cached`, keys from `judgeflow.caching`); what they
record in MLflow and the Prefect UI happens in the flow (`judgeflow.stages.records.record_data`),
so a cached run records it too.
"""

from __future__ import annotations

from prefect import task
from prefect.runtime import task_run

from judgeflow import stages
from judgeflow.config import RunConfig
from judgeflow.config.redaction import strip_credentials
from judgeflow.storage import Manifest
from tasks.policies import BACKOFF, JITTER, retry_transient


def _download_name() -> str:
    """`download[<source>]`, the source without credentials: Prefect keeps and shows the name."""
    cfg: RunConfig = task_run.parameters["cfg"]
    return f"download[{strip_credentials(cfg.data.label)}]"


@task(
    name="download",
    task_run_name=_download_name,
    retries=3,
    retry_delay_seconds=BACKOFF,
    retry_jitter_factor=JITTER,
    retry_condition_fn=retry_transient,
)
def download(cfg: RunConfig) -> Manifest:
    return stages.download_stage(cfg)


@task(
    name="prepare",
    task_run_name="prepare[{cfg.mode}]",
    retries=2,
    retry_delay_seconds=BACKOFF,
    retry_jitter_factor=JITTER,
    retry_condition_fn=retry_transient,
)
def prepare(
    cfg: RunConfig, manifest: Manifest, val_manifest: Manifest | None = None
) -> stages.PreparedData:
    return stages.prepare_stage(cfg, manifest, val_manifest)
