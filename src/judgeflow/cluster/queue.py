"""What Slurm's live queue says of a job, read with `squeue` (sacct lags a submission and an
ending by seconds): the one query both the submitter and a starting stage need."""

from __future__ import annotations

import subprocess


def squeue_state(job_id: str) -> str | None:
    """The job's state word as `squeue` has it ('' once the queue no longer holds it); None
    when `squeue` cannot answer (not installed, the controller down or slow)."""
    try:
        proc = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return "" if "Invalid job id" in proc.stderr else None
    return proc.stdout.strip()
