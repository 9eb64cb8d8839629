"""What every stage shares: its results, the artifact store, where a run's files go."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from judgeflow.config import RunConfig
from judgeflow.config.redaction import flatten
from judgeflow.retries import retrying
from judgeflow.storage import ArtifactStore, Manifest
from judgeflow.tracking import Tracker, git_commit

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


@dataclass(frozen=True)
class SftData:
    """The validated SFT conversations (`messages` parquet) and their report."""

    file: str
    report: dict[str, Any]  # counts (read / written / dropped), dropped rows, sha256


@dataclass(frozen=True)
class GrrmData:
    """What the GRRM pipeline trains on: SFT messages, RL rows (train, test) and the reports."""

    sft_file: str
    rl: PreparedData  # train_file: augmented RL rows; val_file: the un-augmented test split
    reports: dict[str, tuple[str, dict[str, Any]]]  # "sft"/"rl_train"/"rl_test" -> (file, report)


def store_for(cfg: RunConfig) -> ArtifactStore:
    return ArtifactStore(cfg.storage.root)


def fetch(cfg: RunConfig, uri: str) -> str:
    """A local path for what a stage reads: itself, or a store URI's verified local copy."""
    return str(store_for(cfg).fetch(uri))


def local_manifest(cfg: RunConfig, manifest: Manifest) -> Manifest:
    """`manifest` with its files on this machine: the download dir, or the published copy."""
    if Path(manifest.local_dir).is_dir() or not manifest.uri:
        return manifest
    return replace(manifest, local_dir=fetch(cfg, manifest.uri))


def _published(cfg: RunConfig, local_dir: Path, *parts: str) -> Callable[[str], str]:
    """Publish `local_dir` to the store (a remote one); map its local paths to their URIs."""
    store = store_for(cfg)
    if store.is_local:
        return lambda path: path
    uri = store.publish(local_dir, *parts)

    def to_uri(path: str) -> str:
        rel = Path(path).relative_to(local_dir).as_posix()
        return uri if rel == "." else f"{uri}/{rel}"

    return to_uri


def run_dir(cfg: RunConfig, run_id: str) -> Path:
    """Where a run's checkpoints live (local store, or a local staging dir for remote stores)."""
    return store_for(cfg).local_dir("runs", run_id)


def _short_hash(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def _wandb_tags(cfg: RunConfig) -> dict[str, str]:
    """Where the run's W&B runs are: the project (`entity/project`); each stage's W&B run is
    `<this run's id>-<stage>`, grouped under this run's id."""
    w = cfg.tracking.wandb
    if not w.project:
        return {}
    return {"judgeflow.wandb.project": f"{w.entity}/{w.project}" if w.entity else w.project,
            "judgeflow.wandb.mode": w.mode}  # fmt: skip


@retrying("open the MLflow run")
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
            **_wandb_tags(cfg),
            **(tags or {}),
        },
    )
    tracker.log_params(flatten(cfg))
    return tracker
