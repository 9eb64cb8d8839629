"""A worker killed mid-run leaves no flow run "Running" forever, and no job running for nobody.

A real `prefect server start` (its services evaluate automations), judgeflow's automation
(deployments/automations/crashed-flow-runs.yaml, created with deployments/setup-automations.sh),
and `judgeflow run` in a subprocess training the tiny model in a local job. The flow's process is
SIGKILLed as a dying worker's would be: the automation marks the run Crashed once its heartbeats
stop, and the job, which nothing follows any more, stops itself (`cluster.orphan_timeout_s`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from servers import free_port, stop, wait_http

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HEARTBEAT_S = 30  # Prefect's minimum
WITHIN_S = 45


@pytest.fixture
def prefect_api(tmp_path: Path) -> Iterator[str]:
    """A Prefect server of this test alone, as `prefect server start` runs it (with services)."""
    port = free_port()
    home = tmp_path / "prefect-server"
    home.mkdir()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    log = home / "server.log"
    proc = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/api/health", 120, proc, log)
        yield f"http://127.0.0.1:{port}/api"
    finally:
        stop(proc)


def _states(api: str) -> list[tuple[str, str]]:
    from prefect.client.orchestration import PrefectClient

    async def read() -> list[tuple[str, str]]:
        async with PrefectClient(api) as client:
            runs = await client.read_flow_runs()
            return [(str(r.id), r.state.type.value if r.state else "") for r in runs]

    return asyncio.run(read())


def _processes(mentioning: Path) -> list[int]:
    """PIDs whose command line mentions `mentioning` (a job's input file, the test's folder)."""
    wanted = str(mentioning).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if wanted in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_a_killed_flow_process_is_marked_crashed_and_its_job_stops(
    prefect_api: str, tmp_path: Path, tiny_model: Path
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PREFECT_"))},
        "PREFECT_API_URL": prefect_api,
        "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_S),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "JUDGEFLOW_HOME": str(tmp_path / "home"),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "tiny-model").symlink_to(tiny_model, target_is_directory=True)
    # The automation as shipped, with a window this test can wait for.
    shipped = yaml.safe_load((REPO / "deployments/automations/crashed-flow-runs.yaml").read_text())
    shipped["automations"][0]["trigger"]["within"] = WITHIN_S
    automation = tmp_path / "crashed-flow-runs.yaml"
    automation.write_text(yaml.safe_dump(shipped))
    setup = subprocess.run(
        [str(REPO / "deployments/setup-automations.sh"), str(automation)],
        env={**env, "PREFECT": str(BIN / "prefect")}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert setup.returncode == 0, setup.stdout + setup.stderr

    flow = subprocess.Popen(
        [str(BIN / "judgeflow"), "run", "grpo-pointwise", "--profile", "tiny",
         "--set", "sft.enabled=false", "--set", "evaluation.enabled=false",
         "--set", "register.enabled=false", "--set", "grpo.max_steps=5000",
         "--set", "grpo.save_freq=1000", "--set", "cluster.orphan_timeout_s=20"],
        env=env, stdout=(tmp_path / "flow.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        progress = []
        while not progress:
            assert flow.poll() is None, (tmp_path / "flow.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "training never started"
            progress = [
                p for p in (tmp_path / "home" / "jobs").glob("*/train/progress.json")
                if json.loads(p.read_text() or "{}").get("step", 0) >= 1
            ]  # fmt: skip
            time.sleep(1)
        train_dir = progress[0].parent
        job = train_dir / "input.json"
        assert _processes(job), "the train job runs"
        flow.send_signal(signal.SIGKILL)  # the worker dies: no hook, no state change
        flow.wait(30)
        assert [s for _, s in _states(prefect_api)] == ["RUNNING"]

        # The job notices that nothing follows it and stops, freeing what it holds.
        deadline = time.monotonic() + 120
        while _processes(job):
            assert time.monotonic() < deadline, "the orphaned job kept running"
            time.sleep(1)
        failure = json.loads((train_dir / "failure.json").read_text())
        assert "nothing followed the job" in failure["reason"]

        # The automation marks the run Crashed once its heartbeats have stopped.
        deadline = time.monotonic() + HEARTBEAT_S + WITHIN_S + 120
        while (states := [s for _, s in _states(prefect_api)]) != ["CRASHED"]:
            assert time.monotonic() < deadline, f"the flow run is still {states}"
            time.sleep(2)
    finally:
        if flow.poll() is None:
            flow.kill()
        for pid in _processes(tmp_path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
