"""judgeflow's own log records in the logs of the Prefect run they are made in.

The core logs through `logging.getLogger("judgeflow.…")` and knows nothing of Prefect. Here the
`judgeflow` logger gets Prefect's API log handler, as Prefect's `logging.extra_loggers` setting
(`PREFECT_LOGGING_EXTRA_LOGGERS`) would give it, with two differences: records made outside any
flow or task run are left to the other handlers (the setting's handler warns about each), and
the logger shows INFO unless an entry point chose its level (`judgeflow --quiet`, …): Prefect
leaves an extra logger at the root's WARNING.

`tasks/__init__.py` calls `route_core_logs` once: every flow imports tasks/, so it holds in each
process a flow or task runs in, `judgeflow run`, the flow run a worker starts for a deployment
(which loads the flow's file by path), and a Ray worker running a task alike.
"""

from __future__ import annotations

import logging

from prefect.context import get_run_context
from prefect.exceptions import MissingContextError
from prefect.logging.handlers import APILogHandler

from judgeflow.log_setup import LOGGER


def _in_a_run(record: logging.LogRecord) -> bool:
    """A record Prefect can file under a flow run: made inside one, or naming one."""
    if getattr(record, "flow_run_id", None):
        return True
    try:
        get_run_context()
    except MissingContextError:
        return False
    return True


def route_core_logs() -> None:
    """Send judgeflow's records made in a flow or task run to that run's logs; at most once (the
    `extra_loggers` setting naming `judgeflow` counts)."""
    logger = logging.getLogger(LOGGER)
    if not any(isinstance(handler, APILogHandler) for handler in logger.handlers):
        handler = APILogHandler()
        handler.addFilter(_in_a_run)
        logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
