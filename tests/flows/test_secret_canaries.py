"""Canary secrets planted everywhere a user can put one, searched for in every byte the run left.

`judgeflow run` as a user runs it (a subprocess) against a real Prefect server and an MLflow
server of this test alone, training the tiny model in a local job. Secrets: a `--set
cluster.env.HF_TOKEN=…` on the command line, `cluster.secrets` naming an environment variable
and a Prefect Secret block, and MLflow / Hugging Face credentials in the environment. None may
appear in the output, Prefect's flow run (parameters), task runs, logs or artifacts, MLflow's
database, params, tags or artifacts, or any file of the run except the job's input file, which
must be readable by its owner alone — and the job must have received them.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CANARIES = {
    "cli": "canary-cli-4b1d9e",  # --set cluster.env.HF_TOKEN=…
    "env": "canary-env-77aa02",  # cluster.secrets.DB_PASSWORD=env:…
    "block": "canary-block-c3f019",  # cluster.secrets.API_KEY=prefect:…
    "mlflow": "canary-mlflow-5e60d1",  # MLFLOW_TRACKING_PASSWORD
    "hf": "canary-hf-0917cc",  # HF_TOKEN of the user's shell
}


def _prefect_records(flow_run_id: str) -> str:
    """Everything Prefect keeps about the flow run, as text: the run, its tasks, logs, artifacts."""
    from prefect import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )

    async def read() -> str:
        async with get_client() as client:
            run = await client.read_flow_run(flow_run_id)
            tasks = await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id]))
            )
            logs = await client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id]))
            )
            artifacts = await client.read_artifacts(
                artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]))
            )
            parts = [run, *tasks, *logs, *artifacts]
            return "\n".join(p.model_dump_json() for p in parts)

    return asyncio.run(read())


def test_no_secret_reaches_anything_but_the_jobs_own_input_file(
    prefect_server: str, own_mlflow_server: str, judgeflow_home: Path, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient
    from prefect.blocks.system import Secret

    Secret(value=CANARIES["block"]).save("canary-api-key", overwrite=True)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
        "JUDGEFLOW_HOME": str(judgeflow_home),
        "PREFECT_API_URL": prefect_server,
        "MLFLOW_TRACKING_URI": own_mlflow_server,
        "CANARY_DB_PASSWORD": CANARIES["env"],
        "MLFLOW_TRACKING_USERNAME": "someone",
        "MLFLOW_TRACKING_PASSWORD": CANARIES["mlflow"],
        "HF_TOKEN": CANARIES["hf"],
    }
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "judgeflow"), "run", "grpo-pointwise",
            "--profile", "tiny",
            "--set", "sft.enabled=false", "--set", "grpo.max_steps=2",
            "--set", "evaluation.limit=4", "--set", "register.enabled=false",
            "--set", f"cluster.env.HF_TOKEN={CANARIES['cli']}",
            "--set", "cluster.secrets.DB_PASSWORD=env:CANARY_DB_PASSWORD",
            "--set", "cluster.secrets.API_KEY=prefect:canary-api-key",
        ],
        env=env, capture_output=True, text=True, timeout=480,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    sys.stdout.write(output[-4000:])
    assert proc.returncode == 0, output[-3000:]

    # The train job's input file holds all three (tests/core/test_secrets.py shows a job's
    # command receives what its input file holds), readable by its owner alone.
    input_files = list((judgeflow_home / "jobs").rglob("input.json"))
    assert input_files, "the train stage ran as a job with an input file"
    for path in input_files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    train_input = next(p for p in input_files if p.parent.name == "train").read_text()
    for name in ("cli", "env", "block"):
        assert CANARIES[name] in train_input  # the one file that must hold them

    found = {
        "output": output,
        "files": b"\n".join(
            p.read_bytes()
            for p in judgeflow_home.rglob("*")
            if p.is_file() and p.name != "input.json" and "tiny-model" not in p.parts
        ).decode("utf-8", "replace"),
        "mlflow server (database, artifacts, log)": b"\n".join(
            p.read_bytes() for p in (tmp_path / "mlflow").rglob("*") if p.is_file()
        ).decode("utf-8", "replace"),
    }
    client = MlflowClient(own_mlflow_server)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert runs, "the run is in MLflow"
    found["mlflow params and tags"] = "\n".join(f"{r.data.params}{r.data.tags}" for r in runs)
    flow_run_id = runs[0].data.tags["prefect.flow_run_id"]
    found["prefect"] = _prefect_records(flow_run_id)
    assert "cluster.secrets.API_KEY=prefect:canary-api-key" in found["prefect"]  # the reference
    for where, text in found.items():
        for name, canary in CANARIES.items():
            assert canary not in text, f"the {name} secret leaked into {where}"
