"""Scheduled retraining on Slurm costs nothing when nothing changed: the second run on the same
data reuses every stage and submits no Slurm job (asserted on Slurm's accounting).

Real Prefect, MLflow and dev Slurm cluster; TRL inside the job (no GPUs here).
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from mlflow.tracking import MlflowClient
from test_judge_grpo_on_slurm import _jobs, _now, _slurm_overrides

if TYPE_CHECKING:
    from conftest import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(900)]


def _task_runs(flow_run_id: str) -> dict[str, Any]:
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    async def read() -> list[Any]:
        async with get_client() as client:
            return await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )

    return {run.name: run for run in asyncio.run(read())}


def test_second_run_on_unchanged_data_submits_no_slurm_job(
    slurm_cluster: SlurmCluster, prefect_server: str, mlflow_server: str, judgeflow_home: Path
) -> None:
    from flows.judge_grpo import judge_grpo

    overrides = _slurm_overrides(mlflow_server, "evaluation.enabled=false", "grpo.max_steps=2")
    mlflow = MlflowClient(mlflow_server)

    since = _now()
    first = judge_grpo(mode="pointwise", profile="tiny", overrides=overrides)
    tags = mlflow.get_run(first["mlflow_run_id"]).data.tags
    job_id = tags["judgeflow.train.job_id"]
    assert _jobs(slurm_cluster, "judgeflow-train", since) == [(job_id, "COMPLETED")]
    # The train task run is named after its job, and the registered version names it too.
    assert f"train[grpo-pointwise@slurm:{job_id}]" in _task_runs(tags["prefect.flow_run_id"])
    version = mlflow.get_model_version(
        "judge-grpo-pointwise", first["registry"]["final"]["version"]
    )
    assert version.tags["judgeflow.slurm_job_ids"] == job_id

    time.sleep(1.1)  # sacct -S has one-second resolution
    since = _now()
    start = time.monotonic()
    second = judge_grpo(mode="pointwise", profile="tiny", overrides=overrides)
    print(f"second run (nothing changed): {time.monotonic() - start:.1f}s")

    assert second["stages"] == {
        "download": "cached", "download[val]": "cached", "prepare": "cached", "train": "cached",
        "register[final]": "cached"
    }  # fmt: skip
    assert second["checkpoint"] == first["checkpoint"]
    assert _jobs(slurm_cluster, "judgeflow-train", since) == []  # no job at all
    runs = _task_runs(mlflow.get_run(second["mlflow_run_id"]).data.tags["prefect.flow_run_id"])
    states = {re.sub(r"\[.*", "", name): run.state.name for name, run in runs.items()}
    assert [states[s] for s in ("download", "prepare", "train")] == ["Cached"] * 3
    tags = mlflow.get_run(second["mlflow_run_id"]).data.tags
    assert tags["judgeflow.cached.train"] == "true"
    assert tags["judgeflow.train.job_id"] == job_id  # the job that trained the reused model
