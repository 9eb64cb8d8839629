"""Which jobs a pipeline run has submitted, so that cancelling the run can cancel them.

A flow run that is cancelled is killed; its on-cancellation hook runs elsewhere (the worker) and
finds the jobs here, keyed by the flow run id, on the shared filesystem.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from judgeflow.config import ClusterConfig


def jobs_file(shared_dir: str | Path, key: str) -> Path:
    return Path(shared_dir) / "submitted" / f"{key}.jsonl"


def record(shared_dir: str | Path, key: str, *, backend: str, job_id: str, stage: str) -> None:
    path = jobs_file(shared_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:  # one short line per submission: appends do not interleave
        fh.write(json.dumps({"backend": backend, "job_id": job_id, "stage": stage}) + "\n")


def _entries(shared_dir: str | Path, key: str) -> list[dict[str, str]]:
    """What `record` wrote under `key`, oldest first (none when nothing was submitted)."""
    path = jobs_file(shared_dir, key)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cancel_all(shared_dir: str | Path, key: str, cluster: ClusterConfig | None = None) -> list[str]:
    """Cancel every job recorded under `key`; returns the job ids it asked to stop. A Ray Job
    is stopped through the job server of `cluster` (the run's cluster section)."""
    cancelled = []
    ray_client = None
    for entry in _entries(shared_dir, key):
        job_id = str(entry["job_id"])
        if entry["backend"] == "slurm":
            subprocess.run(["scancel", job_id], check=False, capture_output=True, timeout=30)
        elif entry["backend"] == "ray":
            if cluster is None:
                continue
            from judgeflow.cluster.ray_jobs import client_for

            try:
                ray_client = ray_client or client_for(cluster)
                ray_client.stop_job(job_id)
            except Exception:  # finished already, or the server is gone: not stopped by us
                continue
        else:  # a local job is a process on this machine; SIGTERM makes it stop its command
            with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                os.kill(int(job_id), signal.SIGTERM)
        cancelled.append(job_id)
    return cancelled


def of_stage(shared_dir: str | Path, key: str, stage: str) -> list[dict[str, str]]:
    """The jobs recorded under `key` for `stage`, oldest first."""
    return [e for e in _entries(shared_dir, key) if e.get("stage") == stage]


def by_stage(shared_dir: str | Path, key: str) -> dict[str, list[str]]:
    """Job ids per stage name (`train`, `evaluate-before`, …) that run `key` submitted."""
    out: dict[str, list[str]] = {}
    for entry in _entries(shared_dir, key):
        out.setdefault(entry["stage"], []).append(str(entry["job_id"]))
    return out
