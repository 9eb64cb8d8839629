"""Start, signal and stop a whole process tree: the one way judgeflow runs engine commands.

Engines start trees that outlive their leader if only the leader is signalled: torchrun puts
its workers in new sessions, Ray renames and re-parents its workers, verl's driver leaves
children behind. A tree started here runs in its own session with a unique marker in its
environment, which every descendant inherits, so :meth:`ProcessTree.stop` finds all of it (same
session, the marker, or a temp dir it owns) and stops it: SIGTERM, a grace period, SIGKILL.
On Linux each leader also gets SIGTERM if the process that started it dies (PDEATHSIG).

Used by the Ray bootstrap (`ray start`, the driver), the plain and torchrun stages and the
LLaMA-Factory and verl engines.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

from judgeflow.parent_death import die_with_parent

#: Environment variable every process of a tree inherits; stop() finds stragglers by it.
TREE_ENV = "JUDGEFLOW_PROC_TREE"
_POLL_S = 0.1

Log = Callable[[str], None]
logger = logging.getLogger(__name__)


def _proc_ids(pid: int) -> tuple[int, int] | None:
    """(process group, session) of a live process, read from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[2]), int(fields[3])


def _has_marker(pid: int, marker: bytes) -> bool:
    """Whether `pid`'s environment lists `marker` in TREE_ENV (trees nest: `outer:inner`)."""
    prefix = f"{TREE_ENV}=".encode()
    try:
        entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(e.startswith(prefix) and marker in e[len(prefix) :].split(b":") for e in entries)


def tree_pids(session: int, marker: str, temp_dir: Path | None = None) -> list[int]:
    """PIDs of one started tree: same session, its env marker, or its temp dir on the command
    line (Ray renames workers, so their command line does not say whose they are)."""
    me = str(os.getpid())
    needle = str(temp_dir).encode() if temp_dir else None
    mark = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or entry.name == me:
            continue
        pid = int(entry.name)
        ids = _proc_ids(pid)
        if ids is None:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if ids[1] == session or (needle and needle in cmdline) or _has_marker(pid, mark):
            found.append(pid)
    return found


def signal_all(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


@dataclass
class ProcessTree:
    """One started command and everything it starts, in its own session."""

    name: str
    proc: subprocess.Popen[bytes]
    marker: str
    temp_dir: Path | None = None

    @classmethod
    def start(
        cls,
        name: str,
        command: Sequence[str],
        env: Mapping[str, str],
        *,
        stdout: IO[bytes] | int | None = None,
        stderr: IO[bytes] | int | None = subprocess.STDOUT,
        temp_dir: Path | None = None,
    ) -> ProcessTree:
        """Start `command`; `stdout=None` keeps ours (a job's log), `stderr` joins stdout."""
        marker = uuid.uuid4().hex
        # A tree started inside another keeps the outer marker too, so stopping the outer tree
        # also finds what the inner one started (even when the inner leader died first).
        markers = ":".join(filter(None, [env.get(TREE_ENV), marker]))
        proc = subprocess.Popen(
            list(command),
            env={**env, TREE_ENV: markers},
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr if stdout is not None else None,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        return cls(name, proc, marker, temp_dir)

    def pids(self) -> list[int]:
        """Live processes of this tree (the leader included while it runs)."""
        return tree_pids(self.proc.pid, self.marker, self.temp_dir)

    def stop(self, grace_s: float, log: Log = logger.warning) -> None:
        """SIGTERM the leader, wait, then SIGTERM and finally SIGKILL whatever is left."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                log(f"[judgeflow] {self.name} did not stop in {grace_s:.0f}s; killing it")
        deadline = time.monotonic() + grace_s
        left = self.pids()
        if left:
            signal_all(left, signal.SIGTERM)
        while left and time.monotonic() < deadline:
            time.sleep(_POLL_S)
            left = self.pids()
        if left:
            log(f"[judgeflow] SIGKILL to {len(left)} leftover process(es) of {self.name}")
            signal_all(left, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


def run_tree(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    grace_s: float = 60.0,
    name: str | None = None,
    log: Log = logger.warning,
    on_line: Callable[[str], None] | None = None,
) -> int:
    """Run `command` with our stdout/stderr and return its exit code. On any exception
    (SystemExit from a signal too), and if the leader left children behind, stop the tree.

    With `on_line`, output is read line by line, copied to our stdout and passed to `on_line`.
    """
    pipe = subprocess.PIPE if on_line is not None else None
    tree = ProcessTree.start(name or Path(command[0]).name, command, env, stdout=pipe)
    try:
        if tree.proc.stdout is not None and on_line is not None:
            out = sys.stdout
            for raw in iter(tree.proc.stdout.readline, b""):
                line = raw.decode(errors="replace")
                out.write(line)
                out.flush()
                on_line(line)
        return tree.proc.wait()
    finally:
        if tree.proc.poll() is None or tree.pids():
            tree.stop(grace_s, log)


@contextlib.contextmanager
def exit_on_signals(log: Log) -> Iterator[Callable[[], None]]:
    """Turn the first SIGTERM/SIGINT into SystemExit(128+sig) so ``finally`` tears down.

    Yields ``disarm``: call it when teardown starts, so a signal can no longer cut teardown
    short; a signal that arrives after that still ends the call with SystemExit once teardown is
    done. Outside the main thread handlers cannot be installed; PDEATHSIG and ``finally`` still
    cover that case.
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    armed, pending = [True], [0]

    def handler(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(RuntimeError):  # a `log` that prints: print() is not reentrant
            log(f"[judgeflow] got {signal.Signals(signum).name}; tearing down")
        if not armed[0]:
            pending[0] = pending[0] or signum
            return
        armed[0] = False
        raise SystemExit(128 + signum)

    def disarm() -> None:
        armed[0] = False

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield disarm
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    if pending[0]:
        raise SystemExit(128 + pending[0])
