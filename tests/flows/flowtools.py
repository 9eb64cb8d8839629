"""Read what Prefect recorded about a flow run; copy and edit sample data (flow tests)."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from waits import HANG_GUARD_S

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "judgeflow" / "samples"


def task_runs(flow_run_id: str) -> list[Any]:
    """Every task run of a flow run (name, state, run_count), oldest first."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    async def read() -> list[Any]:
        async with get_client() as client:
            return await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                sort=TaskRunSort.EXPECTED_START_TIME_ASC,
            )

    return asyncio.run(read())


def task_runs_when(flow_run_id: str, recorded: Callable[[list[Any]], bool]) -> list[Any]:
    """The flow run's task runs once `recorded(runs)` holds: Prefect's client sends task-run
    states in the background, so a read right after the flow returns can miss the last ones."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not recorded(runs := task_runs(flow_run_id)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return runs


def stage_states(flow_run_id: str) -> dict[str, str]:
    """`download`/`prepare`/`train`/… -> the state name of its task run (`Cached`, `Completed`)."""
    return {
        run.name.split("[", 1)[0]: run.state.name
        for run in task_runs(flow_run_id)
        if run.state is not None
    }


def copy_sample(dest_dir: Path, name: str = "openjudge_pointwise.jsonl") -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(SAMPLES / name, dest_dir / name))


def edit_row(path: Path, row: int, edit: Any) -> None:
    """Apply `edit(record)` to one jsonl row in place."""
    lines = path.read_text().splitlines()
    record = json.loads(lines[row])
    edit(record)
    lines[row] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
