"""A task retried while its Slurm job still runs follows that job instead of submitting another
(the jobs file of the run names it; `tasks.submission._still_running`, `judgeflow.cluster.attach`)."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from judgeflow.cluster import JobSpec, submit, submitted, watch
from judgeflow.config import load_config

if TYPE_CHECKING:
    from conftest import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(300)]


def test_a_retried_task_follows_the_job_it_submitted(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    from tasks.submission import _still_running

    cfg = load_config(
        "grpo-pointwise",
        overrides=["cluster.backend=slurm", "cluster.partition=debug", "cluster.gpus_per_node=0",
                   f"cluster.shared_dir={tmp_path / 'jobs'}", "cluster.timeout_min=5"],
    )  # fmt: skip
    done = tmp_path / "release"
    spec = JobSpec(
        name="train",
        command=[sys.executable, "-c", (
            "import json, os, pathlib, time\n"
            f"while not pathlib.Path({str(done)!r}).exists(): time.sleep(0.5)\n"
            "json.dump({'ok': 1}, open(os.path.join(os.environ['JUDGEFLOW_STAGE_DIR'], 'result.json'), 'w'))"
        )],
        workdir=str(tmp_path / "jobs" / "run" / "train"),
        ray=False,
    )  # fmt: skip
    key = f"flow-run-{uuid.uuid4().hex[:8]}"
    assert _still_running(cfg, spec, key) is None  # nothing submitted yet: submit
    first = submit(spec, cfg.cluster)
    submitted.record(
        cfg.cluster.shared_dir, key, backend="slurm", job_id=first.job_id, stage="train"
    )

    again = _still_running(cfg, spec, key)  # the retried task
    assert again is not None and again.job_id == first.job_id
    done.touch()
    assert watch(again, on_log=lambda _line: None, poll_s=1.0) == {"ok": 1}
    deadline = time.monotonic() + 60  # the result is written a moment before Slurm ends the job
    while slurm_cluster.queued(first.job_id):
        assert time.monotonic() < deadline, "the job did not end after writing its result"
        time.sleep(0.5)
    assert _still_running(cfg, spec, key) is None  # finished: a later attempt submits anew
