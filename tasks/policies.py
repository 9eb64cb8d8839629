"""Retry and cache policies shared by the tasks.

Retries: what `judgeflow.retries.is_transient` calls transient (network, HTTP 5xx, Slurm
submission, a job killed from outside) is retried with backoff; deterministic failures (bad
data, bad config, a source that does not exist, a job that failed by itself) fail at once.

Caching: `cached(task)` turns on Prefect's result persistence for a stage with a content-derived
key from `judgeflow.caching`, results and keys in two directories every worker can read
(`judgeflow.caching.cache_dirs`). A cached result whose files are gone is evicted, so the stage
runs again instead of handing out a dangling path. Runs that need the same key at once compute
it once: the stage's transaction holds the key's lock (`tasks.locking`) from the cache lookup
until the result is written, and the other runs wait, then read the finished record.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect.cache_policies import CachePolicy
from prefect.context import TaskRunContext
from prefect.exceptions import MissingContextError
from prefect.filesystems import LocalFileSystem
from prefect.logging import get_logger, get_run_logger
from prefect.results import ResultStore

from judgeflow import caching
from judgeflow.config import RunConfig
from judgeflow.retries import is_transient
from tasks.locking import FlockLockManager, holding

logger = get_logger("judgeflow.cache")

# Delays (seconds) between attempts: short enough for a hiccup, long enough for a restart.
BACKOFF = [2.0, 10.0, 30.0]
JITTER = 0.3


# ---------------------------------------------------------------------------- retries


def retry_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect `retry_condition_fn`: retry only what `is_transient` calls transient."""
    try:
        state.result()
    except Exception as exc:
        retry = is_transient(exc)
        logger.info("%s: %s (%s)", type(exc).__name__, "retrying" if retry else "not retried", exc)
        return retry
    return False


# ---------------------------------------------------------------------------- caching


@dataclass
class StageCache(CachePolicy):
    """Cache key of a pipeline stage (download, prepare, evaluate, sft, train) from
    `judgeflow.caching`."""

    stage: str = ""

    def compute_key(
        self,
        task_ctx: TaskRunContext,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        cfg: RunConfig = inputs["cfg"]
        if self.stage == "download":
            key = caching.download_key(cfg)
        elif self.stage == "prepare":
            val = inputs.get("val_manifest")
            hashes = inputs["manifest"].content_hash + (f"+{val.content_hash}" if val else "")
            key = caching.prepare_key(cfg, hashes)
        elif self.stage == "prepare-grrm":
            val = inputs.get("val_manifest")
            hashes = inputs["manifest"].content_hash + (f"+{val.content_hash}" if val else "")
            key = caching.prepare_grrm_key(cfg, hashes)
        elif self.stage == "evaluate":
            key = caching.evaluate_key(cfg, inputs["model_dir"], inputs["data"].report)
        elif self.stage == "prepare-sft":
            key = caching.prepare_sft_key(cfg, inputs["manifest"].content_hash)
        elif self.stage == "sft":
            key = caching.sft_key(cfg, inputs["sft_file"])
        elif self.stage == "train":
            key = caching.train_key(cfg, inputs["data"].report)
        else:
            raise ValueError(f"no cache key for stage {self.stage!r}")
        self._evict_if_unusable(key)
        return key

    def _evict_if_unusable(self, key: str) -> None:
        """Drop the key's record when it cannot be used; under its lock, so never while
        another run is writing it (that run's record is read once it is complete)."""
        dirs = caching.cache_dirs()
        record_path = dirs["keys"] / key
        locks = FlockLockManager(dirs["locks"])
        if locks.is_locked(key):  # the transaction waits for it; say why the task is idle
            run_logger().info(
                "cache %s: another run is computing %s; waiting for its result", key, self.stage
            )
        if not record_path.exists():
            return
        with holding(locks, key, holder=f"evict-{uuid.uuid4().hex}"):
            if not record_path.exists():
                return
            try:
                result = _store(dirs).read(key).result
            except Exception as exc:  # unreadable record (code moved on): run again
                logger.info("cache %s: unreadable (%s); running %s again", key, exc, self.stage)
                record_path.unlink(missing_ok=True)
                return
            if not caching.usable(result):
                logger.info("cache %s: its files are gone; running %s again", key, self.stage)
                record_path.unlink(missing_ok=True)


def run_logger(fallback: Any = logger) -> Any:
    """The flow or task run's logger (shown in the UI) when there is a run, else `fallback`."""
    try:
        return get_run_logger()
    except MissingContextError:
        return fallback


def _store(dirs: dict[str, Path]) -> ResultStore:
    return ResultStore(
        result_storage=LocalFileSystem(basepath=str(dirs["results"])),
        metadata_storage=LocalFileSystem(basepath=str(dirs["keys"])),
    )


#: The task parameters each stage's cache key is computed from (`StageCache.compute_key`).
KEY_INPUTS: dict[str, tuple[str, ...]] = {
    "download": ("cfg",),
    "prepare": ("cfg", "manifest", "val_manifest"),
    "prepare-grrm": ("cfg", "manifest", "val_manifest"),
    "prepare-sft": ("cfg", "manifest"),
    "sft": ("cfg", "sft_file"),
    "train": ("cfg", "data"),
    "evaluate": ("cfg", "model_dir", "data"),
}


def cached(task: Any, *, retries: int | None = None, retry_delay_s: float | None = None) -> Any:
    """`task` with its stage cache on: persisted results, keys in shared storage (at run time).

    Storage is resolved when the flow runs, so `$JUDGEFLOW_HOME` of the worker decides it. A task
    without a parameter its key is computed from fails here, not with a silently wrong key.
    """
    import inspect

    wanted = KEY_INPUTS.get(task.name)
    if wanted is None:
        raise ValueError(f"no cache key for task {task.name!r}; known: {', '.join(KEY_INPUTS)}")
    missing = [name for name in wanted if name not in inspect.signature(task.fn).parameters]
    if missing:
        raise TypeError(
            f"task {task.name!r} has no parameter {', '.join(missing)}, which its cache key "
            "reads (tasks/policies.py KEY_INPUTS): rename both together"
        )
    dirs = caching.cache_dirs()
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    policy = StageCache(stage=task.name).configure(
        key_storage=dirs["keys"],
        lock_manager=FlockLockManager(dirs["locks"]),
        isolation_level="SERIALIZABLE",  # one run computes a key, the others wait for it
    )
    options: dict[str, Any] = {
        "cache_policy": policy,
        "result_storage": dirs["results"],
        "persist_result": True,
    }
    if retries is not None:
        options["retries"] = retries
    if retry_delay_s is not None:
        options["retry_delay_seconds"] = retry_delay_s
    return task.with_options(**options)


def cached_job(task: Any, cfg: RunConfig) -> Any:
    """A stage that runs as a cluster job (train, sft), as the flows run it: cached, and
    retried `cluster.retries` times, `cluster.retry_delay_s` apart (a killed job, say)."""
    return cached(task, retries=cfg.cluster.retries, retry_delay_s=cfg.cluster.retry_delay_s)


__all__ = [
    "BACKOFF",
    "JITTER",
    "KEY_INPUTS",
    "StageCache",
    "cached",
    "cached_job",
    "is_transient",
    "retry_transient",
    "run_logger",
]
