"""Canary secrets planted everywhere a user can put one, searched for in every byte the run left.

`judgeflow run` as a user runs it (a subprocess) against a real Prefect server and an MLflow
server of this test alone, training the tiny model in a local job. Secrets: a `--set
cluster.env.HF_TOKEN=…` on the command line, `cluster.secrets` naming an environment variable
and a Prefect Secret block, and MLflow / Hugging Face credentials in the environment. None may
appear in the output, Prefect's flow run (parameters), task runs, logs or artifacts, MLflow's
database, params, tags or artifacts, or any file of the run except the job's input file, which
must be readable by its owner alone — and the job must have received them.

Credentials inside URLs get the same search: an MLflow tracking URI with user:password@ (an
MLflow server behind basic auth; the test's server does not check them, but MLflow's client
sends them), database DSNs with a password in `cluster.env`, and data sources on an HTTP server
behind basic auth (which does check them), each from the command line and from a recipe file of
the user's own.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from servers import FilesBehindBasicAuth

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


def _judgeflow_run(recipe: str, sets: list[str], env: dict[str, str]) -> str:
    """`judgeflow run RECIPE` on the tiny profile as a user runs it; its output."""
    base = [
        "--profile", "tiny", "--set", "sft.enabled=false", "--set", "grpo.max_steps=2",
        "--set", "evaluation.limit=4",
    ]  # fmt: skip
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "judgeflow"), "run", recipe, *base, *sets],
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, **env},
        capture_output=True, text=True, timeout=480,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    sys.stdout.write(output[-4000:])
    assert proc.returncode == 0, output[-3000:]
    return output


def _train_input(judgeflow_home: Path) -> str:
    """The train job's input file, after checking every input file is its owner's alone."""
    input_files = list((judgeflow_home / "jobs").rglob("input.json"))
    assert input_files, "the train stage ran as a job with an input file"
    for path in input_files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    return next(p for p in input_files if p.parent.name == "train").read_text()


def _everything_the_run_left(
    output: str, judgeflow_home: Path, mlflow_root: Path, mlflow_uri: str
) -> dict[str, str]:
    """Where to look for a leak, as text: the run's output, every file of the run but the jobs'
    input files (job folders, summaries, Prefect's local files), the MLflow server's every byte
    (database, artifacts such as summary.json, log), MLflow's params and tags, and what Prefect
    keeps about the flow run."""
    from mlflow.tracking import MlflowClient

    found = {
        "output": output,
        "files": b"\n".join(
            p.read_bytes()
            for p in judgeflow_home.rglob("*")
            if p.is_file() and p.name != "input.json" and "tiny-model" not in p.parts
        ).decode("utf-8", "replace"),
        "mlflow server (database, artifacts, log)": b"\n".join(
            p.read_bytes() for p in mlflow_root.rglob("*") if p.is_file()
        ).decode("utf-8", "replace"),
    }
    client = MlflowClient(mlflow_uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert runs, "the run is in MLflow"
    found["mlflow params and tags"] = "\n".join(f"{r.data.params}{r.data.tags}" for r in runs)
    flow_run_id = runs[0].data.tags["prefect.flow_run_id"]
    found["prefect"] = _prefect_records(flow_run_id)
    return found


def _prefect_database() -> str:
    """Every byte of the Prefect server's SQLite database (and its write-ahead log)."""
    from prefect.settings import PREFECT_API_DATABASE_CONNECTION_URL

    url = str(PREFECT_API_DATABASE_CONNECTION_URL.value())
    db = Path(url.split(":///", 1)[1])
    files = [p for p in db.parent.glob(db.name + "*") if p.is_file()]
    assert files, url
    return b"\n".join(p.read_bytes() for p in files).decode("utf-8", "replace")


def test_no_secret_reaches_anything_but_the_jobs_own_input_file(
    prefect_server: str, own_mlflow_server: str, judgeflow_home: Path, tmp_path: Path
) -> None:
    from prefect.blocks.system import Secret

    Secret(value=CANARIES["block"]).save("canary-api-key", overwrite=True)
    env = {
        "JUDGEFLOW_HOME": str(judgeflow_home),
        "PREFECT_API_URL": prefect_server,
        "MLFLOW_TRACKING_URI": own_mlflow_server,
        "CANARY_DB_PASSWORD": CANARIES["env"],
        "MLFLOW_TRACKING_USERNAME": "someone",
        "MLFLOW_TRACKING_PASSWORD": CANARIES["mlflow"],
        "HF_TOKEN": CANARIES["hf"],
    }
    output = _judgeflow_run(
        "grpo-pointwise",
        [
            "--set", "register.enabled=false",
            "--set", f"cluster.env.HF_TOKEN={CANARIES['cli']}",
            "--set", "cluster.secrets.DB_PASSWORD=env:CANARY_DB_PASSWORD",
            "--set", "cluster.secrets.API_KEY=prefect:canary-api-key",
        ],
        env,
    )  # fmt: skip

    # The train job's input file holds all three (tests/config/test_secrets.py shows a job's
    # command receives what its input file holds), readable by its owner alone.
    train_input = _train_input(judgeflow_home)
    for name in ("cli", "env", "block"):
        assert CANARIES[name] in train_input  # the one file that must hold them

    found = _everything_the_run_left(output, judgeflow_home, tmp_path / "mlflow", own_mlflow_server)
    assert "cluster.secrets.API_KEY=prefect:canary-api-key" in found["prefect"]  # the reference
    for where, text in found.items():
        for name, canary in CANARIES.items():
            assert canary not in text, f"the {name} secret leaked into {where}"
    database = _prefect_database()  # where the Secret block itself lives, and nothing else
    for name, canary in CANARIES.items():
        assert name == "block" or canary not in database, f"the {name} secret leaked into Prefect"


URL_CANARIES = {
    "tracking": "canary-url-mlflow-2c81f4",  # MLFLOW_TRACKING_URI=http://alice:…@host:port
    "cli dsn": "canary-url-cli-6d03ae",  # --set cluster.env.DATABASE_URL=postgresql://etl:…@db/x
    "recipe dsn": "canary-url-recipe-91f5b2",  # cluster.env.ANALYTICS_DSN in the user's recipe
    "cli data": "canary-url-data-0b7e53",  # --set data.source=http://reader:…@host/…
    "recipe data": "canary-url-val-e24c9a",  # data.val_source in the user's recipe
}


def test_no_credentials_in_a_url_reach_anything_but_the_jobs_own_input_file(
    prefect_server: str, own_mlflow_server: str, judgeflow_home: Path, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    from judgeflow.storage import SAMPLES_DIR

    host = own_mlflow_server.removeprefix("http://")
    served = tmp_path / "served"
    for folder, name in (("data", "tinyjudge_pointwise.jsonl"), ("val", "tinyjudge_pointwise_val.jsonl")):  # fmt: skip
        (served / folder).mkdir(parents=True)
        (served / folder / name).write_bytes((SAMPLES_DIR / name).read_bytes())
    users = {"reader": URL_CANARIES["cli data"], "validator": URL_CANARIES["recipe data"]}
    data_server = FilesBehindBasicAuth(served, users)
    data_host = data_server.url.removeprefix("http://")
    recipe = tmp_path / "my-recipe.yaml"
    recipe.write_text(
        "base: grpo-pointwise\n"
        "cluster:\n  env:\n"
        f"    ANALYTICS_DSN: postgresql://reader:{URL_CANARIES['recipe dsn']}@olap:5432/events\n"
        "profiles:\n  tiny:\n    data:\n"  # over the tiny profile's own validation file
        f"      val_source: http://validator:{URL_CANARIES['recipe data']}@{data_host}/val/tinyjudge_pointwise_val.jsonl\n"
    )
    env = {
        "JUDGEFLOW_HOME": str(judgeflow_home),
        "PREFECT_API_URL": prefect_server,
        "MLFLOW_TRACKING_URI": f"http://alice:{URL_CANARIES['tracking']}@{host}",
        "MLFLOW_TRACKING_USERNAME": "",
        "MLFLOW_TRACKING_PASSWORD": "",
    }
    with data_server:
        output = _judgeflow_run(
            str(recipe),
            [
                "--set", f"cluster.env.DATABASE_URL=postgresql://etl:{URL_CANARIES['cli dsn']}@db/x",
                "--set", f"data.source=http://reader:{URL_CANARIES['cli data']}@{data_host}/data/tinyjudge_pointwise.jsonl",
            ],
            env,
        )  # fmt: skip

    # The download had the data server's credentials, from the command line and the recipe.
    fetched = {path for path, authorised in data_server.requests if authorised}
    assert fetched >= {"/data/tinyjudge_pointwise.jsonl", "/val/tinyjudge_pointwise_val.jsonl"}

    # The job got every credential through its input file: MLflow's as its own variables.
    train_input = json.loads(_train_input(judgeflow_home))["secret_env"]
    assert train_input["MLFLOW_TRACKING_USERNAME"] == "alice"
    assert train_input["MLFLOW_TRACKING_PASSWORD"] == URL_CANARIES["tracking"]
    assert URL_CANARIES["cli dsn"] in train_input["DATABASE_URL"]
    assert URL_CANARIES["recipe dsn"] in train_input["ANALYTICS_DSN"]

    # The URLs themselves are still shown and stored, without their credentials.
    run = MlflowClient(own_mlflow_server).search_runs(
        [e.experiment_id for e in MlflowClient(own_mlflow_server).search_experiments()],
        filter_string="tags.`judgeflow.recipe` != ''",
    )[0]
    assert run.data.params["cluster.env.ANALYTICS_DSN"] == "postgresql://olap:5432/events"
    data_url = f"{data_server.url}/data/tinyjudge_pointwise.jsonl"
    assert run.data.tags["judgeflow.data.source"] == data_url
    assert run.data.params["data.val_source"] == f"{data_server.url}/val/tinyjudge_pointwise_val.jsonl"  # fmt: skip
    links = [v for k, v in run.data.tags.items() if k.startswith("judgeflow.registered.")
             and k.endswith(".url")]  # fmt: skip
    assert links and all(link.startswith(f"{own_mlflow_server}/#/models/") for link in links)
    assert f"{own_mlflow_server}/#/experiments/" in output

    found = _everything_the_run_left(output, judgeflow_home, tmp_path / "mlflow", own_mlflow_server)
    assert f"download[{data_url}]" in found["prefect"]  # the task run's name
    found["prefect database"] = _prefect_database()
    for where, text in found.items():
        for name, canary in URL_CANARIES.items():
            assert canary not in text, f"the {name} credentials leaked into {where}"
