"""GRRM tasks: prepare SFT + RL data (optionally the RL train split in shards on Ray); the SFT
cold start itself is `tasks.sft.sft`, shared with the judge recipes."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from judgeflow import stages
from judgeflow.config import RunConfig
from judgeflow.data import GrrmPrepareResult
from judgeflow.data import shards as grrm_shards
from judgeflow.registry import sft_models
from judgeflow.storage import Manifest
from tasks.policies import BACKOFF, JITTER, retry_transient


@task(
    name="prepare-grrm",
    retries=2,
    retry_delay_seconds=BACKOFF,
    retry_jitter_factor=JITTER,
    retry_condition_fn=retry_transient,
)
def prepare_grrm(
    cfg: RunConfig,
    manifest: Manifest,
    rl_train: GrrmPrepareResult | None = None,
    val_manifest: Manifest | None = None,
) -> stages.GrrmData:
    """SFT, RL train and RL test parquet; `rl_train` when the sharded flow already wrote it."""
    return stages.prepare_grrm_stage(cfg, manifest, rl_train, val_manifest)


@task(
    name="find-sft-model",
    retries=3,
    retry_delay_seconds=BACKOFF,
    retry_condition_fn=retry_transient,  # MLflow unreachable: retried; no such model: said now
)
def find_sft_model(cfg: RunConfig, sft_file: str) -> str:
    """The SFT model of this lineage (same SFT data and config), for an RLVR-only run."""
    model = sft_models.newest_sft_model(cfg, sft_file)
    if model is None:
        raise LookupError(
            f"no finished SFT of {cfg.recipe} on this data and SFT config in MLflow experiment "
            f"{cfg.tracking.experiment!r}: run `judgeflow run {cfg.recipe} --stage sft` (or "
            "full) first, or start RLVR from a model of your choice with --set model.path=…"
        )
    return model


# The shard tasks pass paths to intermediate files that the merge deletes: never cached.
@task(name="plan-grrm-shards", cache_policy=NO_CACHE)
def plan_grrm_shards(
    input: str, output: str, shards: int, options: dict[str, Any]
) -> grrm_shards.GrrmShardPlan:
    return grrm_shards.plan_grrm_rl_shards(input, output, shards, **options)


@task(
    name="prepare-grrm-rl-shard",
    task_run_name="prepare-grrm-rl-shard[{shard.index}]",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=BACKOFF,
    retry_jitter_factor=JITTER,
    retry_condition_fn=retry_transient,
)
def prepare_grrm_rl_shard(shard: grrm_shards.GrrmShard) -> grrm_shards.GrrmShardResult:
    return grrm_shards.prepare_grrm_rl_shard(shard)


@task(name="merge-grrm-shards", cache_policy=NO_CACHE)
def merge_grrm_shards(
    plan: grrm_shards.GrrmShardPlan, results: list[grrm_shards.GrrmShardResult]
) -> GrrmPrepareResult:
    return grrm_shards.merge_grrm_rl_shards(plan, results)
