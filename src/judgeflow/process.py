"""Run a command in its own process group, and take the whole group down if we are interrupted.

Engines (verl's driver, torchrun, LLaMA-Factory) leave children behind; a stage that is
cancelled must not. Output goes to our stdout/stderr so the job log shows it as it happens.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence


def run_in_process_group(
    command: Sequence[str], env: Mapping[str, str], *, grace_s: float = 60.0
) -> int:
    """The command's exit code; on any exception (SystemExit from a signal too) SIGTERM the
    group, then SIGKILL it after `grace_s`."""
    proc = subprocess.Popen(list(command), env=dict(env), start_new_session=True)
    try:
        return proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
