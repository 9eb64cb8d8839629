"""A stage two runs need at once is computed once; the cache-key lock dies with its holder.

Real Prefect (server, task engine, result store); the stage is a real `download` of a local
file. The first submission stays inside the stage until the second is seen from inside: refused
the stage's lock while the first holds it (the lock works), or inside the stage as well (it
does not). So the overlap is observed, not assumed, on however busy a machine.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from flowtools import copy_sample
from prefect import flow, task
from waits import HANG_GUARD_S

from judgeflow import stages
from judgeflow.caching import cache_dirs
from judgeflow.config import RunConfig, load_config
from judgeflow.storage import Manifest
from tasks.locking import FlockLockManager
from tasks.policies import cached


class Overlap:
    """What both submissions did, seen from inside: who entered the stage, and who was refused
    its lock while the other was inside it."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.entered: list[str] = []
        self.refused_while_inside: list[str] = []

    def enter(self) -> None:
        with self.changed:
            self.entered.append(threading.current_thread().name)
            self.changed.notify_all()

    def refused(self, holder: str) -> None:
        with self.changed:
            if self.entered:  # the other run is inside the stage, holding its key's lock
                self.refused_while_inside.append(holder)
                self.changed.notify_all()

    def wait_for_the_other_run(self) -> None:
        """Until the other run is seen waiting for the lock, or inside the stage too."""
        with self.changed:
            self.changed.wait_for(
                lambda: self.refused_while_inside or len(self.entered) > 1, HANG_GUARD_S
            )


seen = Overlap()


@task(name="download")
def watched_download(cfg: RunConfig) -> Manifest:
    seen.enter()
    seen.wait_for_the_other_run()
    return stages.download_stage(cfg)


@flow
def two_at_once(cfg: RunConfig) -> list[tuple[str, Manifest]]:
    stage = cached(watched_download)
    futures = [stage.submit(cfg), stage.submit(cfg)]
    results = [f.result() for f in futures]
    return [(f.state.name, result) for f, result in zip(futures, results, strict=True)]


@pytest.mark.slow(seconds=20)  # two pipeline runs, one waiting on the other
@pytest.mark.timeout(600)
def test_the_second_run_waits_for_the_first_and_reads_its_result(
    prefect_server: str,
    judgeflow_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    watch = Overlap()
    monkeypatch.setattr(sys.modules[__name__], "seen", watch)  # what the task body reports to
    try_acquire = FlockLockManager._try_acquire

    def observed_try_acquire(self: FlockLockManager, key: str, holder: str) -> bool:
        acquired = try_acquire(self, key, holder)
        if not acquired:
            watch.refused(holder)
        return acquired

    monkeypatch.setattr(FlockLockManager, "_try_acquire", observed_try_acquire)
    source = copy_sample(tmp_path / "source")
    cfg = load_config("grpo-pointwise", overrides=[f"data.source={source.as_uri()}"])

    outcomes = two_at_once(cfg)

    assert len(watch.entered) == 1, watch.entered  # computed once
    assert watch.refused_while_inside, "the other run never waited for the stage's lock"
    assert sorted(name for name, _ in outcomes) == ["Cached", "Completed"]
    (_, first), (_, second) = outcomes
    assert first.content_hash == second.content_hash and first.local_dir == second.local_dir
    # Nothing stays locked, and the lock files are where every run can see them.
    locks = FlockLockManager(cache_dirs()["locks"])
    lock_files = list(cache_dirs()["locks"].glob("download-*.lock"))
    assert len(lock_files) == 1
    assert not locks.is_locked(lock_files[0].stem)


HOLD = """
import sys, time
from tasks.locking import FlockLockManager
FlockLockManager(sys.argv[1]).acquire_lock("stage-key", holder="killed-run")
print("HELD", flush=True)
time.sleep(600)
"""


def test_a_killed_holder_leaves_no_lock_behind(tmp_path: Path) -> None:
    locks = FlockLockManager(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2],  # where `tasks` is
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "HELD"
        assert locks.is_locked("stage-key")
        assert not locks.acquire_lock("stage-key", "waiting-run", acquire_timeout=0.5)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    # The kernel released it: no stale lock to wait for, unlike a lock file.
    assert not locks.is_locked("stage-key")
    assert locks.acquire_lock("stage-key", "waiting-run", acquire_timeout=0)
    assert locks.is_lock_holder("stage-key", "waiting-run")
    assert not locks.is_lock_holder("stage-key", "someone-else")
    with pytest.raises(ValueError, match="No lock held by someone-else"):
        locks.release_lock("stage-key", "someone-else")
    locks.release_lock("stage-key", "waiting-run")
    assert not locks.is_locked("stage-key")
