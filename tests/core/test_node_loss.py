"""A lost node or a killed stage command is a failure a resubmission can get past; the job
says so itself, since its Slurm state (FAILED) cannot."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from judgeflow.cluster import StageFailed, StageSpec, submit
from judgeflow.cluster.heartbeat import Heartbeat, Watchdog, beat_file
from judgeflow.config import ClusterConfig


def test_the_watchdog_names_the_rank_that_went_silent(tmp_path: Path) -> None:
    lost: list[tuple[int, float]] = []
    beating = Heartbeat(tmp_path, 1)
    silent = Heartbeat(tmp_path, 2)
    silent.beat()  # it was there once
    dog = Watchdog(tmp_path, range(1, 3), lost_after_s=1.5, on_lost=lambda r, s: lost.append((r, s)), poll_s=0.1)  # fmt: skip
    stop = threading.Event()

    def keep_beating() -> None:
        while not stop.is_set():
            beating._next = 0.0  # beat now, not every two seconds: the test is short
            beating.beat()
            time.sleep(0.1)

    thread = threading.Thread(target=keep_beating)
    thread.start()
    started = time.monotonic()
    dog.start()
    dog.join(10)
    stop.set()
    thread.join()
    assert dog.lost == 2 and [r for r, _ in lost] == [2]
    assert 1.5 <= lost[0][1] < 3 and time.monotonic() - started < 5
    assert beat_file(tmp_path, 1).read_text() != "1"  # rank 1 kept writing


def _local(tmp_path: Path, code: str) -> StageSpec:
    return StageSpec(name="victim", command=[sys.executable, "-c", code], workdir=str(tmp_path), ray=False)  # fmt: skip


@pytest.mark.parametrize(
    ("code", "retryable", "says"),
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", True, "killed by SIGKILL"),
        ("raise SystemExit(75)", True, "a node of the allocation was lost"),
        ("raise SystemExit(3)", False, "exited with code 3"),
    ],
)
def test_a_killed_command_is_retryable_a_failing_one_is_not(
    tmp_path: Path, code: str, retryable: bool, says: str
) -> None:
    """Real jobs through the local backend (submitit: the same handle as on Slurm)."""
    handle = submit(_local(tmp_path, code), ClusterConfig(backend="local", gpus_per_node=0))
    with pytest.raises(StageFailed) as failed:
        handle.result()
    assert failed.value.retryable is retryable
    assert says in str(failed.value)
