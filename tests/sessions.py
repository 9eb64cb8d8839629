"""Which processes belong to this test session, when pytest-xdist runs sessions side by side.

Each pytest process (the one of a serial run, or each xdist worker) puts its PID in
`JF_TEST_SESSION`, and every process it starts inherits it: servers, stage jobs, Ray, the dev
cluster's daemons, and Slurm jobs (sbatch exports the submitter's environment). The checks for
left-behind processes count only processes of this session, so one worker's servers are not
another's leftovers. `scripts/test` checks once more after pytest, for every process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MARK = "JF_TEST_SESSION"


def mark_this_session() -> None:
    """Mark the processes this pytest process starts from now on."""
    os.environ[MARK] = str(os.getpid())


@dataclass(frozen=True)
class Process:
    pid: int
    args: str  # the command line, arguments joined by spaces
    environ: list[bytes] | None  # None: not readable (another user's process)

    @property
    def of_this_session(self) -> bool:
        """Carries this session's mark (a process whose environment cannot be read counts)."""
        return self.environ is None or f"{MARK}={os.environ[MARK]}".encode() in self.environ

    @property
    def in_a_slurm_job(self) -> bool:
        """Started by Slurm for a job: Slurm sets SLURM_CLUSTER_NAME beside SLURM_JOB_ID in every
        job's environment; ranks a test simulates with SLURM_* variables have no cluster name."""
        if self.environ is None:
            return False
        names = {v.split(b"=", 1)[0] for v in self.environ}
        return {b"SLURM_JOB_ID", b"SLURM_CLUSTER_NAME"} <= names


def processes() -> Iterator[Process]:
    """Every live process but this one, each read once."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            try:
                environ: list[bytes] | None = (entry / "environ").read_bytes().split(b"\0")
            except PermissionError:
                environ = None
        except OSError:  # gone
            continue
        yield Process(int(entry.name), args.strip(), environ)


def of_this_session(pid: int) -> bool:
    """`pid` carries this session's mark (see `Process.of_this_session`); a gone one does not."""
    try:
        environ: list[bytes] | None = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except PermissionError:
        environ = None
    except OSError:
        return False
    return Process(pid, "", environ).of_this_session
