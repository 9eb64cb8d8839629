"""The left-behind checks count this session's processes (tests/sessions.py): if the mark did
not reach the processes a test starts, those checks would find nothing and pass."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from sessions import MARK, of_this_session, processes

SLEEP = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]


def start(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A sleeping child that has finished starting: until the kernel has set up the new program
    (a moment after Popen returns, longer on a busy machine), /proc shows it with an empty
    command line and environment."""
    child = subprocess.Popen(SLEEP, env=env, stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"up\n"
    return child


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    children: list[subprocess.Popen[bytes]] = []
    yield children
    for child in children:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_a_started_process_is_of_this_session_and_an_unmarked_one_is_not(
    started: list[subprocess.Popen[bytes]],
) -> None:
    unmarked = {k: v for k, v in os.environ.items() if k != MARK}
    started.append(ours := start())
    started.append(other := start(unmarked))
    started.append(in_job := start({**unmarked, "SLURM_JOB_ID": "7", "SLURM_CLUSTER_NAME": "dev"}))
    started.append(simulated := start({**unmarked, "SLURM_JOB_ID": "8"}))  # a simulated rank
    assert of_this_session(ours.pid)
    assert not of_this_session(other.pid) and not of_this_session(in_job.pid)
    seen = {p.pid: p for p in processes()}
    assert seen[ours.pid].of_this_session and "time.sleep(60)" in seen[ours.pid].args
    assert not seen[other.pid].of_this_session and not seen[other.pid].in_a_slurm_job
    assert seen[in_job.pid].in_a_slurm_job and not seen[simulated.pid].in_a_slurm_job
    assert os.getpid() not in seen
