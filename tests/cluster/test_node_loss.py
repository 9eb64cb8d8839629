"""A lost node or a killed stage command is a failure a resubmission can get past; the job
says so itself, since its Slurm state (FAILED) cannot."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import cast

import pytest

from judgeflow.cluster import JobFailed, JobSpec, submit
from judgeflow.cluster.heartbeat import Heartbeat, Watchdog, beat_file
from judgeflow.config import ClusterConfig


class _BeatingAtEveryLook:
    """Rank 1's heartbeat file as the watchdog reads it: the real `Heartbeat` beats each time the
    watchdog looks, so rank 1 is alive however a busy machine schedules the threads (a beating
    thread that sleeps could stall past `lost_after_s` and be taken for the lost rank)."""

    def __init__(self, heartbeat: Heartbeat) -> None:
        self.heartbeat = heartbeat

    def read_text(self) -> str:
        self.heartbeat._next = 0.0  # beat now, not every two seconds
        self.heartbeat.beat()
        return self.heartbeat.path.read_text()


def test_the_watchdog_names_the_rank_that_went_silent(tmp_path: Path) -> None:
    lost: list[tuple[int, float]] = []
    beating = Heartbeat(tmp_path, 1)
    silent = Heartbeat(tmp_path, 2)
    silent.beat()  # it was there once
    files = {1: cast(Path, _BeatingAtEveryLook(beating)), 2: beat_file(tmp_path, 2)}
    dog = Watchdog(
        tmp_path, range(1, 3), lost_after_s=1.5, on_lost=lambda r, s: lost.append((r, s)),
        poll_s=0.1, files=files,
    )  # fmt: skip
    dog.start()
    dog.join(timeout=120)  # a hang guard: it returns once it has reported a rank
    assert not dog.is_alive(), "the watchdog never reported the silent rank"
    assert dog.lost == 2 and [r for r, _ in lost] == [2]
    assert lost[0][1] > 1.5  # silent for longer than allowed, by the watchdog's own clock
    assert int(beat_file(tmp_path, 1).read_text()) > 1  # rank 1 kept writing


def _local(tmp_path: Path, code: str) -> JobSpec:
    return JobSpec(name="victim", command=[sys.executable, "-c", code], workdir=str(tmp_path), ray=False)  # fmt: skip


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
    with pytest.raises(JobFailed) as failed:
        handle.result()
    assert failed.value.retryable is retryable
    assert says in str(failed.value)
