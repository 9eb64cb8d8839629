"""The left-behind checks count this session's processes (tests/sessions.py): if the mark did
not reach the processes a test starts, those checks would find nothing and pass."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from sessions import MARK, of_this_session, processes

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    children: list[subprocess.Popen[bytes]] = []
    yield children
    for child in children:
        child.kill()
        child.wait()


def test_a_started_process_is_of_this_session_and_an_unmarked_one_is_not(
    started: list[subprocess.Popen[bytes]],
) -> None:
    unmarked = {k: v for k, v in os.environ.items() if k != MARK}
    ours = subprocess.Popen(SLEEP)
    other = subprocess.Popen(SLEEP, env=unmarked)
    in_job = subprocess.Popen(SLEEP, env={**unmarked, "SLURM_JOB_ID": "7"})
    started += [ours, other, in_job]
    assert of_this_session(ours.pid)
    assert not of_this_session(other.pid) and not of_this_session(in_job.pid)
    seen = {p.pid: p for p in processes()}
    assert seen[ours.pid].of_this_session and "time.sleep(60)" in seen[ours.pid].args
    assert not seen[other.pid].of_this_session and not seen[other.pid].in_a_slurm_job
    assert seen[in_job.pid].in_a_slurm_job
    assert os.getpid() not in seen
