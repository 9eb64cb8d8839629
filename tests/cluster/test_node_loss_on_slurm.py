"""A node lost in the middle of a multi-node stage, on the dev Slurm cluster: the stage fails
because the watchdog noticed (not at the time limit), retryably, and the allocation is released.

The fake "nodes" share this host, so a dying node is simulated by freezing every process of
rank 1 (SIGSTOP: a hung node that answers nothing; Slurm itself sees no failed task). Only
judgeflow's heartbeat watchdog can notice.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from judgeflow.cluster import JobFailed, JobSpec, submit, watch
from judgeflow.config import ClusterConfig

if TYPE_CHECKING:
    from conftest import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(600)]


def _rank_processes(job_id: str, rank: int) -> list[int]:
    """PIDs of this host whose environment says they belong to `rank` of Slurm job `job_id`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SLURM_JOB_ID={job_id}".encode() in env and f"SLURM_PROCID={rank}".encode() in env:
            found.append(int(entry.name))
    return found


def test_a_hung_worker_node_fails_the_stage_fast_and_frees_the_allocation(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    started = tmp_path / "driver-started"
    spec = JobSpec(
        name="long",
        command=[sys.executable, "-c", f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(900)"],
        workdir=str(tmp_path / "long"),
        ray=True,
        ray_num_cpus=1,
        ray_object_store_mb=80,
        node_timeout_s=10,
    )  # fmt: skip
    cluster = ClusterConfig(
        backend="slurm", partition="debug", nodes=2, gpus_per_node=0, timeout_min=30,
        ray_num_cpus=1, ray_object_store_mb=80, poll_s=1.0,
    )  # fmt: skip
    handle = submit(spec, cluster)
    frozen: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while not started.exists():
            assert time.monotonic() < deadline, "the driver never started"
            time.sleep(0.5)
        frozen = _rank_processes(handle.job_id, 1)
        assert frozen, "rank 1 has processes"
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        log: list[str] = []
        with pytest.raises(JobFailed) as failed:
            watch(handle, on_log=log.append, poll_s=1.0)  # the module's timeout guards it
        took = time.monotonic() - t0
        # It failed because rank 0's watchdog found rank 1 silent and stopped the driver (the
        # node-lost exit code), not because of the time limit or anything else.
        assert failed.value.retryable is True
        assert "a node of the allocation was lost" in str(failed.value)
        noticed = [
            line for line in log if re.search(r"rank 1 silent for \d+s: its node is lost", line)
        ]
        assert noticed, "\n".join(log[-40:])
        deadline = time.monotonic() + 120  # a hang guard
        while slurm_cluster.queued(handle.job_id):
            assert time.monotonic() < deadline, "the allocation was not released"
            time.sleep(1)
        print(f"lost node noticed and the stage failed in {took:.1f}s")
    finally:
        for pid in frozen:  # whatever Slurm did not kill: wake it so it can die
            for sig in (signal.SIGCONT, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        # A node that dies takes its /tmp with it (a reboot); this one shares the test host's.
        for leftover in Path("/tmp").glob(f"jf-ray-{handle.job_id}-1-*"):
            shutil.rmtree(leftover, ignore_errors=True)
