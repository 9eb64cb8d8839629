"""The deployments in deployments/prefect.yaml, for real: a Prefect server, `prefect deploy`,
a process work pool and worker, `prefect deployment run … --watch`, and a cron schedule.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from servers import free_port, wait_http
from servers import stop as stop_group

pytestmark = [pytest.mark.slow(seconds=95), pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).parent / "prefect")
DEPLOYMENTS = {
    "judge-grpo/grpo-pointwise",
    "judge-grpo/grpo-pairwise",
    "judge-grpo/retrain-grpo-pointwise",
    "judge-grpo/retrain-grpo-pairwise",
    "grrm/grrm-sft",
    "grrm/grrm-rlvr",
    "grrm/grrm-full",
    "grrm/retrain-grrm-full",
    "rlvr/rlvr",
    "rlvr/retrain-rlvr",
    "rlvr-judged/rlvr-judged",
    "judge-data/judge-data",
}


@pytest.fixture
def prefect_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """`prefect server start` (SQLite, its own PREFECT_HOME) with every service, scheduler
    included (visiting the deployments every 5 s, not Prefect's 60); this process's client
    talks to it too."""
    home = tmp_path / "prefect-home"
    home.mkdir()
    port = free_port()
    log = home / "server.log"
    proc = subprocess.Popen(
        [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": "",
             "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5"},
        stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    api = f"http://127.0.0.1:{port}/api"
    try:
        wait_http(f"{api}/health", 90, proc, log)
        monkeypatch.setenv("PREFECT_API_URL", api)
        # The session's test-harness server, if an earlier test started it, is a settings
        # context that outranks the environment: point this process's client here explicitly.
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings(updates={PREFECT_API_URL: api}):
            yield api
    finally:
        stop_group(proc)


def test_deployment_run_and_cron_schedule_complete_through_a_worker(
    prefect_api: str, mlflow_server: str, judgeflow_home: Path, tmp_path: Path, tiny_model: Path
) -> None:
    pool = f"judgeflow-test-{uuid.uuid4().hex[:6]}"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PREFECT_API_URL": prefect_api,
        "JUDGEFLOW_WORK_POOL": pool,
        "JUDGEFLOW_HOME": str(judgeflow_home),
        "MLFLOW_TRACKING_URI": mlflow_server,
        "PREFECT_WORKER_QUERY_SECONDS": "2",  # the worker looks for due runs every 2 s, not 10
    }
    deploy = subprocess.run(
        [str(REPO / "deployments" / "deploy.sh")],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert deploy.returncode == 0, deploy.stdout[-3000:] + deploy.stderr[-3000:]
    names = asyncio.run(_deployments())
    assert set(names) >= DEPLOYMENTS
    retrain = names["judge-grpo/retrain-grpo-pointwise"]
    assert [s.active for s in retrain.schedules] == [False]  # shipped paused

    worker_log = tmp_path / "worker.log"
    worker = subprocess.Popen(
        [PREFECT, "worker", "start", "--pool", pool],
        env=env, stdout=worker_log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    tiny = ["evaluation.enabled=false", "grpo.max_steps=2", "sft.enabled=false"]
    try:
        start = time.monotonic()
        run = subprocess.run(
            [
                PREFECT, "deployment", "run", "judge-grpo/grpo-pointwise",
                "--param", "profile=tiny", "--param", f"overrides={json.dumps(tiny)}", "--watch",
            ],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        print(f"deployment run: {time.monotonic() - start:.1f}s")
        assert run.returncode == 0, run.stdout[-3000:] + worker_log.read_text()[-5000:]
        assert "Completed" in run.stdout

        # A cron schedule on the retrain deployment (tiny parameters) creates a run, and the
        # worker completes it; on unchanged data every stage comes from the cache.
        start = time.monotonic()
        state = asyncio.run(_schedule_and_wait(retrain.id, {"profile": "tiny", "overrides": tiny}))
        print(f"cron run: {time.monotonic() - start:.1f}s after the schedule was created")
        assert state == "COMPLETED", worker_log.read_text()[-5000:]

        # judge-data: a judge over a file of rows, through the same worker
        rows = tmp_path / "rows.jsonl"
        rows.write_text(
            "".join(json.dumps({"query": f"q{i}", "response": "r"}) + "\n" for i in range(3))
        )
        verdicts = tmp_path / "verdicts.jsonl"
        params = {"model": str(tiny_model), "mode": "pointwise", "data": str(rows),
                  "output": str(verdicts), "overrides": ["evaluation.max_new_tokens=4"]}  # fmt: skip
        judged = subprocess.run(
            [PREFECT, "deployment", "run", "judge-data/judge-data", "--watch",
             *[arg for k, v in params.items() for arg in ("--param", f"{k}={json.dumps(v) if isinstance(v, list) else v}")]],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert judged.returncode == 0, judged.stdout[-3000:] + worker_log.read_text()[-5000:]
        assert len(verdicts.read_text().splitlines()) == 3
    finally:
        stop_group(worker)


async def _deployments() -> dict[str, Any]:
    from prefect import get_client

    async with get_client() as client:
        flows = {f.id: f.name for f in await client.read_flows()}
        return {f"{flows[d.flow_id]}/{d.name}": d for d in await client.read_deployments()}


async def _schedule_and_wait(deployment_id: uuid.UUID, parameters: dict[str, object]) -> str:
    from prefect import get_client
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.client.schemas.schedules import CronSchedule

    # Due 15 s from now, once a day: croniter's sixth field is the second, so the test need not
    # wait for the next whole minute as "* * * * *" would.
    due = datetime.now(UTC) + timedelta(seconds=15)
    cron = CronSchedule(cron=f"{due.minute} {due.hour} * * * {due.second}", timezone="UTC")
    async with get_client() as client:
        await client.create_deployment_schedules(
            deployment_id,
            [DeploymentScheduleCreate(schedule=cron, active=True, parameters=parameters)],
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            runs = await client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
            )
            for run in runs:
                if run.state and run.state.is_final():
                    return run.state.type.value
            await asyncio.sleep(2)
    return "no scheduled run finished within 180 s"
