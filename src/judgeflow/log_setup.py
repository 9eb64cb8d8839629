"""Where judgeflow's log records are shown: chosen by the entry point that runs, never on import.

Every module logs through `logging.getLogger(__name__)`, under the `judgeflow` logger, and does
nothing else with logging: a program that uses judgeflow as a library raises, lowers or routes
its records with ordinary logging configuration. The entry points call `show_logs`:

- the `judgeflow` command (`--quiet`: warnings and errors only, `--verbose`: debug too), on
  stderr, in the shape of Prefect's console lines;
- a stage's job (`python -m judgeflow.stages.jobs_main`, the job runner, the Ray bootstrap): the bare
  message on the job's output, one flushed line per record, so its log file (the Slurm job log)
  reads as before and whoever follows it sees each line as it is written.

In a flow or task run, the flows' side (`tasks/run_logs.py`) adds Prefect's API handler, so the
records also reach that run's logs in Prefect.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

__all__ = ["CONSOLE_FORMAT", "JOB_FORMAT", "LOGGER", "level_for", "show_logs"]

LOGGER = "judgeflow"
#: The shape of Prefect's console lines, so a terminal running a flow reads as one log.
CONSOLE_FORMAT = "%(asctime)s.%(msecs)03d | %(levelname)-7s | %(name)s - %(message)s"
#: A job's output: the message alone, as the job printed it before it logged.
JOB_FORMAT = "%(message)s"


def level_for(*, quiet: bool = False, verbose: bool = False) -> int:
    """`--quiet` -> WARNING, `--verbose` -> DEBUG, neither -> INFO."""
    if quiet and verbose:
        raise ValueError("quiet and verbose exclude each other")
    return logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO


class _StandardStream(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stdout` / `sys.stderr` is when a record comes (as the logging
    module's own last-resort handler does), so a replaced stream (a test's capture, a runner
    that swaps it) still gets the line; flushed after every record."""

    def __init__(self, name: Literal["stdout", "stderr"]) -> None:
        self._which = name
        super().__init__()

    @property
    def stream(self) -> TextIO:
        stream: TextIO = getattr(sys, self._which)
        return stream

    @stream.setter
    def stream(self, _value: TextIO) -> None:  # StreamHandler.__init__ assigns it
        pass


def show_logs(
    level: int = logging.INFO,
    *,
    stream: Literal["stdout", "stderr"] = "stderr",
    fmt: str = CONSOLE_FORMAT,
) -> logging.Handler:
    """Show judgeflow's records of `level` and above on `stream`, once (a second call replaces
    the first's handler). They no longer reach the root logger's handlers, which would show them
    twice (Prefect puts its console handler there). Records of INFO and above are still made
    when `level` is higher (`--quiet`), for handlers that want them: a flow run's log in Prefect.
    Returns the handler."""
    logger = logging.getLogger(LOGGER)
    for old in [h for h in logger.handlers if isinstance(h, _StandardStream)]:
        logger.removeHandler(old)
    handler = _StandardStream(stream)
    handler.setFormatter(logging.Formatter(fmt, datefmt="%H:%M:%S"))
    handler.setLevel(level)
    logger.addHandler(handler)
    logger.setLevel(min(level, logging.INFO))
    logger.propagate = False
    return handler
