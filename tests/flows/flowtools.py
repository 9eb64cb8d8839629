"""Read what Prefect recorded about a flow run; copy and edit sample data (flow tests)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, timeout: float, proc: Any, log: Path) -> None:
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: server exited ({proc.returncode}); see {log}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url}: not healthy after {timeout:.0f}s; see {log}")


def stop_group(proc: Any) -> None:
    """Stop a process we started, and its process group, by PID."""
    import os
    import subprocess

    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
