"""The Prefect server restarted while a Slurm stage runs: the job keeps running, the flow run
ends Completed, and no second job is submitted.

A real `prefect server start` (SQLite) is stopped while the train stage's Slurm job trains on
the dev cluster and started again on the same port and database; `judgeflow run` runs in a
subprocess against it, as a worker would run it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from servers import Service, free_port

if TYPE_CHECKING:
    from conftest import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(900)]

BIN = Path(sys.executable).parent
#: Prefect stays down until the job has trained three more steps (at most this long).
OUTAGE_S = 120
MAX_STEPS = 30


def _step(home: Path) -> int:
    steps = [
        json.loads(p.read_text() or "{}").get("step", 0)
        for p in (home / "jobs").glob("*/train/progress.json")
    ]
    return max(steps, default=0)


def test_prefect_restart_while_a_slurm_stage_trains(
    slurm_cluster: SlurmCluster, tmp_path: Path, tiny_model: Path
) -> None:
    port = free_port()
    server_env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-server")}
    server_env.pop("PREFECT_API_URL", None)
    server = Service(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        f"http://127.0.0.1:{port}/api/health",
        tmp_path / "prefect-server" / "server.log",
        server_env,
    )
    api = f"http://127.0.0.1:{port}/api"
    home = tmp_path / "home"
    home.mkdir()
    (home / "tiny-model").symlink_to(tiny_model, target_is_directory=True)
    env = {
        **{k: v for k, v in slurm_cluster.env.items() if not k.startswith(("PYTEST_", "PREFECT_"))},
        "PREFECT_API_URL": api,
        "JUDGEFLOW_HOME": str(home),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }
    server.start()
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    flow = subprocess.Popen(
        [str(BIN / "judgeflow"), "run", "grpo-pointwise", "--profile", "tiny",
         "--set", "engine=trl", "--set", "cluster.backend=slurm", "--set", "cluster.partition=debug",
         "--set", "cluster.timeout_min=15", "--set", "cluster.ray_num_cpus=1",
         "--set", "cluster.ray_object_store_mb=80", "--set", "cluster.poll_s=1",
         "--set", "sft.enabled=false", "--set", "evaluation.enabled=false",
         "--set", f"grpo.max_steps={MAX_STEPS}", "--set", "grpo.save_freq=1000"],
        env=env, stdout=(tmp_path / "flow.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while _step(home) < 2:
            assert flow.poll() is None, (tmp_path / "flow.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "training never started"
            time.sleep(1)
        before = _step(home)
        server.stop()
        deadline = time.monotonic() + OUTAGE_S
        while _step(home) < before + 3 and time.monotonic() < deadline:  # the job trains on
            time.sleep(0.5)
        during = _step(home)
        assert during < MAX_STEPS, "the stage ended before Prefect came back: train longer"
        server.start()
        assert flow.wait(600) == 0, (tmp_path / "flow.log").read_text()[-4000:]
        assert during > before, "the job went on training while Prefect was down"

        jobs = slurm_cluster.run("sacct", "-X", "-n", "-P", "-S", since, "--name", "judgeflow-train", "-o", "JobID,State")  # fmt: skip
        assert [line.split("|")[1] for line in jobs.split()] == ["COMPLETED"], jobs  # one job

        from prefect.client.orchestration import PrefectClient

        async def states() -> list[str]:
            async with PrefectClient(api) as client:
                return [r.state.type.value for r in await client.read_flow_runs() if r.state]

        assert asyncio.run(states()) == ["COMPLETED"]
    finally:
        if flow.poll() is None:
            flow.kill()
        server.stop()
