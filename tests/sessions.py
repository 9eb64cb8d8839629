"""Which processes belong to this test session, when pytest-xdist runs sessions side by side.

Each pytest process (the one of a serial run, or each xdist worker) puts its PID in
`JF_TEST_SESSION`, and every process it starts inherits it: servers, stage jobs, Ray, the dev
cluster's daemons, and Slurm jobs (sbatch exports the submitter's environment). The checks for
left-behind processes count only processes of this session, so one worker's servers are not
another's leftovers. `scripts/test` checks once more after pytest, for every process.
"""

from __future__ import annotations

import os
from pathlib import Path

MARK = "JF_TEST_SESSION"


def mark_this_session() -> None:
    """Mark the processes this pytest process starts from now on."""
    os.environ[MARK] = str(os.getpid())


def of_this_session(pid: int) -> bool:
    """`pid` carries this session's mark (a process whose environment cannot be read counts)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except PermissionError:
        return True
    except OSError:  # gone
        return False
    return f"{MARK}={os.environ[MARK]}".encode() in environ.split(b"\0")
