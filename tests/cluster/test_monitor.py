"""Following a job (`watch`): how often it looks, and what it tells the job while it does.

A job that ends at its third look stands in for a real one here (real jobs are watched in
tests/cluster/test_slurm_jobs.py); the waits between looks are recorded, not slept.
"""

from __future__ import annotations

import logging
import types
from pathlib import Path
from typing import Any

import pytest

from judgeflow.cluster import JobSpec, monitor
from judgeflow.config import load_config


class _EndsAtThirdLook:
    """The handle `watch` follows: done on the third look, with a result and no log."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec, self.looks = spec, 0

    def done(self) -> bool:
        self.looks += 1
        return self.looks >= 3

    def log_tail(self, offset: int = 0) -> tuple[str, int]:
        return "", offset

    def result(self) -> dict[str, Any]:
        return {"ok": 1}


def test_cluster_poll_s_is_how_often_a_job_is_looked_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """How tasks/submission.py follows every job stage (`follow`, which `run_job` calls): it looks
    every `cluster.poll_s` seconds."""
    from tasks.submission import follow

    waits: list[float] = []
    monkeypatch.setattr(monitor, "time", types.SimpleNamespace(sleep=waits.append))
    cfg = load_config("grpo-pointwise", overrides=["cluster.poll_s=0.25"])
    spec = JobSpec(name="train", command=["true"], workdir=str(tmp_path))
    job: Any = _EndsAtThirdLook(spec)  # what `watch` reads of a `JobHandle`

    assert follow(cfg, job, logging.getLogger("test_monitor")) == {"ok": 1}
    assert waits == [0.25, 0.25]  # between the three looks, none after the last
    assert spec.flow_heartbeat_path.read_text() == "3"  # the job was told at every look
