"""Per-job temp dirs: a live owner's dir is never swept; a SIGKILLed owner's is, by the next
sweep; a dir without the owner lock (another program's, or one being created) is left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from judgeflow.cluster.temp_dirs import OWNER_LOCK, OwnedDir, sweep_stale

HOLDER = """
import sys
from judgeflow.cluster.temp_dirs import OwnedDir
owned = OwnedDir.create(sys.argv[1], sys.argv[2])
print(owned.path, flush=True)
sys.stdin.read()  # hold the dir until the test closes our stdin or kills us
owned.remove()
"""


def _holder(base: Path, prefix: str = "jf-t-") -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(base), prefix],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_a_live_owners_dir_is_kept_and_a_killed_owners_is_swept(tmp_path: Path) -> None:
    alive, alive_dir = _holder(tmp_path)
    killed, killed_dir = _holder(tmp_path)
    (killed_dir / "session_latest").mkdir()  # what Ray leaves: sockets, logs
    (killed_dir / "session_latest" / "raylet.out").write_text("log")
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    assert killed_dir.is_dir()  # no teardown ran

    assert sweep_stale(tmp_path, "jf-t-*") == [killed_dir]
    assert not killed_dir.exists()
    assert alive_dir.is_dir() and (alive_dir / OWNER_LOCK).is_file()

    assert alive.stdin is not None
    alive.stdin.close()  # the owner removes its own dir on the way out
    assert alive.wait(timeout=30) == 0
    assert not alive_dir.exists()
    assert sweep_stale(tmp_path, "jf-t-*") == []


def test_only_dead_owners_dirs_of_this_host_and_pattern_are_swept(tmp_path: Path) -> None:
    foreign = tmp_path / "jf-t-foreign"  # no lock file: made by something else, or being made
    foreign.mkdir()
    other_host = tmp_path / "jf-t-elsewhere"  # a dead owner's, but on another host (shared fs)
    other_host.mkdir()
    (other_host / OWNER_LOCK).write_bytes(b"some-other-host")
    killed, other_prefix = _holder(tmp_path, "other-")
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    assert sweep_stale(tmp_path, "jf-t-*") == []
    assert foreign.is_dir() and other_host.is_dir() and other_prefix.is_dir()
    assert sweep_stale(tmp_path, "other-*") == [other_prefix]  # its own pattern finds it


def test_remove_is_idempotent(tmp_path: Path) -> None:
    owned = OwnedDir.create(tmp_path, "jf-t-")
    owned.remove()
    owned.remove()
    assert not owned.path.exists()


def test_a_dir_held_by_this_process_is_not_swept_by_it_either(tmp_path: Path) -> None:
    """flock locks belong to the open file: a second open in the same process cannot take it,
    so a bootstrap sweeping before its second rank on one host (tests) spares the first."""
    owned = OwnedDir.create(tmp_path, "jf-t-")
    assert sweep_stale(tmp_path, "jf-t-*") == []
    assert owned.path.is_dir()
    owned.remove()
