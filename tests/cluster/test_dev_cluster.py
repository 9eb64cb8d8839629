"""The dev Slurm cluster behaves like a real one: two nodes, accounting, scancel, submitit.

cd /work/main && .venv/bin/python -m pytest tests/cluster -q -m cluster
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from waits import HANG_GUARD_S

if TYPE_CHECKING:  # tests/ is not a package; the fixture's type lives in this dir's conftest
    from conftest import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]


def _poll(
    probe: Callable[[], str], accept: Callable[[str], bool], timeout_s: float = HANG_GUARD_S
) -> str:
    """Call probe until accept(result) or timeout; return the last result either way."""
    deadline = time.monotonic() + timeout_s
    result = probe()
    while not accept(result) and time.monotonic() < deadline:
        time.sleep(0.5)
        result = probe()
    return result


def _sacct_state(cluster: SlurmCluster, job_id: str) -> str:
    # Accounting is written asynchronously: right after a job ends sacct may not list it yet.
    out = cluster.run("sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State")
    return out.strip().splitlines()[0] if out.strip() else ""


def test_both_nodes_idle(slurm_cluster: SlurmCluster) -> None:
    out = _poll(
        lambda: slurm_cluster.run(
            "sinfo", "-h", "-N", "-p", slurm_cluster.partition, "-o", "%N %T"
        ),
        lambda o: (
            sorted(o.split("\n")) == sorted(["", *(f"{n} idle" for n in slurm_cluster.nodes)])
        ),
    )
    states = dict(line.split() for line in out.splitlines())
    assert states == dict.fromkeys(slurm_cluster.nodes, "idle")


def test_two_node_job_runs_on_both_nodes(slurm_cluster: SlurmCluster) -> None:
    # srun returns as soon as the step ends (sbatch --wait polls, adding seconds).
    out = slurm_cluster.run(
        "srun",
        "-N2",
        "--ntasks-per-node=1",
        "bash",
        "-c",
        "echo $SLURM_JOB_ID $SLURMD_NODENAME",
        timeout=120,
    )
    job_ids, nodes = zip(*(line.split() for line in out.splitlines()), strict=True)

    assert sorted(nodes) == sorted(slurm_cluster.nodes)
    assert len(set(job_ids)) == 1
    state = _poll(lambda: _sacct_state(slurm_cluster, job_ids[0]), lambda s: s == "COMPLETED")
    assert state == "COMPLETED"


def test_scancel_kills_a_running_job(slurm_cluster: SlurmCluster) -> None:
    tag = f"judgeflow-scancel-{uuid.uuid4().hex[:8]}"  # find the job's process by this
    job_id = (
        slurm_cluster.run(
            "sbatch",
            "--parsable",
            "--output=/dev/null",
            "--job-name",
            tag,
            "--wrap",
            f"exec bash -c 'exec -a {tag} sleep 600'",
        )
        .strip()
        .split(";")[0]
    )
    state = _poll(
        lambda: slurm_cluster.run("squeue", "-h", "-j", job_id, "-o", "%T").strip(),
        lambda s: s == "RUNNING",
    )
    assert state == "RUNNING"
    assert _poll(lambda: str(_pids_with_arg0(tag)), lambda p: p != "[]") != "[]"

    slurm_cluster.run("scancel", job_id)
    # Killed by the cancel: accounting says so, and the job's process is gone.
    state = _poll(lambda: _sacct_state(slurm_cluster, job_id), lambda s: s.startswith("CANCELLED"))
    assert state.startswith("CANCELLED")
    assert _poll(lambda: str(_pids_with_arg0(tag)), lambda p: p == "[]") == "[]"


def _pids_with_arg0(arg0: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and (proc / "cmdline").read_bytes().split(b"\0")[0] == arg0.encode()
            ):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def test_submitit_runs_a_function_on_both_nodes(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    submitit = pytest.importorskip("submitit")

    # Nested, so cloudpickle ships it by value: the job's Python cannot import this test module.
    def rank_and_node() -> tuple[int, str]:
        import os

        import submitit

        return submitit.JobEnvironment().global_rank, os.environ["SLURMD_NODENAME"]

    assert os.environ["SLURM_CONF"] == str(slurm_cluster.slurm_conf)  # the fixture set it
    executor = submitit.AutoExecutor(folder=tmp_path, cluster="slurm")
    executor.update_parameters(
        slurm_partition=slurm_cluster.partition, nodes=2, tasks_per_node=1, timeout_min=5
    )
    job = executor.submit(rank_and_node)
    results = sorted(job.results())

    assert [rank for rank, _ in results] == [0, 1]
    assert sorted(node for _, node in results) == sorted(slurm_cluster.nodes)
    # submitit reads the state from sacct, which lags the result file by about a second.
    assert _poll(lambda: job.state, lambda s: s == "COMPLETED") == "COMPLETED"


def test_submitit_sees_a_cancelled_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """With accounting, a job killed under submitit fails fast instead of hanging."""
    submitit = pytest.importorskip("submitit")

    def sleep_long() -> None:
        import time

        time.sleep(600)

    executor = submitit.AutoExecutor(folder=tmp_path, cluster="slurm")
    executor.update_parameters(slurm_partition=slurm_cluster.partition, timeout_min=5)
    job = executor.submit(sleep_long)
    _poll(lambda: job.state, lambda s: s == "RUNNING")
    job.cancel(check=True)

    # Without accounting this would wait forever (the module's timeout is the hang guard); with
    # it, the result says the job ended cancelled.
    with pytest.raises(submitit.core.utils.UncompletedJobError) as ended:
        job.result()
    assert "has not produced any output (state: CANCELLED" in str(ended.value), str(ended.value)
