"""judgeflow's own log records made in a flow or task run land in that run's logs in Prefect
(tasks/run_logs.py, which every flow gets by importing tasks/); a record made outside any run
stays out of Prefect and raises no warning. A real Prefect server; no training."""

from __future__ import annotations

import asyncio
import logging
import uuid
import warnings
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _logs(flow_run_id: uuid.UUID) -> list[Any]:
    from prefect import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    async def read() -> list[Any]:
        async with get_client() as client:
            return await client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
            )

    return asyncio.run(read())


def test_judgeflow_records_made_in_a_run_go_to_its_logs(prefect_server: str) -> None:
    from prefect import flow, task
    from prefect.logging.handlers import APILogHandler

    from judgeflow.retries import retried
    from tasks.run_logs import route_core_logs

    route_core_logs()  # what importing tasks/ did (a test before this one may have undone it)
    mark = uuid.uuid4().hex[:8]
    failures = [TimeoutError(f"slow {mark}")]

    def bookkeeping() -> str:
        if failures:
            raise failures.pop()
        return "recorded"

    @task
    def a_task() -> None:
        logging.getLogger("judgeflow.stages").info("in the task %s", mark)

    @flow
    def a_flow() -> str:
        a_task()
        return retried(bookkeeping, f"record {mark}", delays=(0,))  # the core warns, then retries

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Prefect's handler warns about records outside a run
        logging.getLogger("judgeflow.stages").warning("outside any run %s", mark)
        state = a_flow(return_state=True)
    assert state.result() == "recorded"
    flow_run_id = state.state_details.flow_run_id
    assert flow_run_id is not None
    APILogHandler().flush()

    ours = [log for log in _logs(flow_run_id) if mark in log.message]
    found = sorted((log.name, log.level, log.message, log.task_run_id is not None) for log in ours)
    assert found == [
        ("judgeflow.retries", logging.WARNING,
         f"record {mark}: TimeoutError (slow {mark}); again in 0s", False),
        ("judgeflow.stages", logging.INFO, f"in the task {mark}", True),
    ]  # fmt: skip
