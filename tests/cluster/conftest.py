"""The real dev Slurm cluster (infra/slurm/dev-cluster) as a session fixture.

`slurm_cluster` runs `up` unless the cluster already answers, points this process at it
(`SLURM_CONF` in os.environ, so sbatch/sacct/submitit called from tests find it), and runs
`down` at the end only if it was the one that started it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sessions import processes

REPO_ROOT = Path(__file__).resolve().parents[2]
DEV_CLUSTER = REPO_ROOT / "infra" / "slurm" / "dev-cluster"
UP_TIMEOUT_S = 900  # a cold `up` installs Debian packages first


@dataclass(frozen=True)
class SlurmCluster:
    state_dir: Path
    partition: str
    nodes: tuple[str, ...]

    @property
    def slurm_conf(self) -> Path:
        return self.state_dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """Environment for a process that talks to the cluster (sbatch, sacct, submitit)."""
        return {**os.environ, "SLURM_CONF": str(self.slurm_conf)}

    def run(self, *args: str, timeout: float = 60) -> str:
        """Run a Slurm client command against the cluster; return its stdout."""
        proc = subprocess.run(
            args, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def queued(self, job_id: str) -> bool:
        """The job is still pending or running (a job slurmctld already purged is not)."""
        return job_id in self.run("squeue", "-h", "-o", "%i").split()


def _state_dir() -> Path:
    """Same rule as infra/slurm/dev-cluster/lib.sh."""
    if os.environ.get("DEV_SLURM_DIR"):
        return Path(os.environ["DEV_SLURM_DIR"])
    home = os.environ.get("JUDGEFLOW_HOME") or str(REPO_ROOT / ".judgeflow")
    return Path(home) / "slurm"


def _answers(cluster: SlurmCluster) -> bool:
    """slurmctld of this state dir responds (the cluster was up before the session)."""
    if not cluster.slurm_conf.exists():
        return False
    try:
        return "is UP" in cluster.run("scontrol", "ping", timeout=15)
    except (OSError, RuntimeError, subprocess.TimeoutExpired):
        return False


def _script(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DEV_CLUSTER / name)], capture_output=True, text=True, timeout=UP_TIMEOUT_S, check=False
    )


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    cluster = SlurmCluster(state_dir=_state_dir(), partition="debug", nodes=("node1", "node2"))
    started_here = False
    if not _answers(cluster):
        if os.geteuid() != 0:
            pytest.skip(f"dev Slurm cluster is not up; start it with: sudo {DEV_CLUSTER}/up")
        started_here = True
        up = _script("up")
        if up.returncode != 0:
            _script("down")  # stop whatever part of it did start
            pytest.fail(f"{DEV_CLUSTER}/up failed ({up.returncode}):\n{up.stderr}", pytrace=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", str(cluster.slurm_conf))
        try:
            yield cluster
        finally:
            if started_here:
                down = _script("down")
                if down.returncode != 0:
                    print(f"{DEV_CLUSTER}/down failed ({down.returncode}):\n{down.stderr}")


def _leftovers(cluster: SlurmCluster) -> list[str]:
    """Slurm jobs still queued or running, and Ray/stage processes of judgeflow jobs (of this
    session or of a Slurm job: a second xdist worker's local stages are not this test's)."""
    jobs = cluster.run("squeue", "-h", "-o", "%i %j %T").split("\n")
    markers = ("jf-ray-", "judgeflow.stages.jobs", "submitit.core._submit")
    procs = [
        f"{p.pid} {p.args[:200]}"
        for p in processes()
        if any(m in p.args for m in markers) and (p.of_this_session or p.in_a_slurm_job)
    ]
    return [j for j in jobs if j.strip()] + procs


@pytest.fixture(autouse=True)
def nothing_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every test that used the cluster: no Slurm job, Ray process or stage process."""
    yield
    if "slurm_cluster" not in request.fixturenames:
        return
    cluster: SlurmCluster = request.getfixturevalue("slurm_cluster")
    deadline = time.monotonic() + 60  # teardown and accounting take a few seconds
    left = _leftovers(cluster)
    while left and time.monotonic() < deadline:
        time.sleep(1)
        left = _leftovers(cluster)
    assert not left, "left behind after the test:\n" + "\n".join(left)
