"""A judge-paid policy on the dev Slurm cluster, its judge served inside its own allocation: the
rlvr-judged flow (real Prefect, MLflow, Slurm) submits the train stage as a Slurm job, which
serves the judge (`mlflow models serve` on CPU, a port free in the job, an instance id of the
job's own; `judgeflow.stages.served_judge`) and trains the policy with TRL paid by it; the judge
is stopped with the job. (Two jobs' judges on one node, and a judge that dies while its job
trains: tests/inference/test_judge_served_in_allocation.py.)
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from mlflow.tracking import MlflowClient
from test_judge_grpo_on_slurm import _jobs, _now, _queue, _slurm_overrides

if TYPE_CHECKING:
    from conftest import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_policy_trains_on_slurm_paid_by_the_judge_its_job_serves(
    slurm_cluster: SlurmCluster,
    prefect_server: str,
    mlflow_server: str,
    judgeflow_home: Path,
    tiny_model: Path,
) -> None:
    from flows.rlvr_judged import rlvr_judged

    since = _now()
    summary = rlvr_judged(
        profile="tiny-hackable",
        overrides=_slurm_overrides(
            mlflow_server,
            "grpo.max_steps=2",
            "evaluation.enabled=false",
            # the untrained tiny model as the judge: every reply reaches it and none parses
            f"reward.judge={tiny_model}",
            "reward.judge_mode=pointwise",
            "reward.judge_max_new_tokens=4",
            "reward.judge_max_failure_rate=1",
        ),
    )
    run = MlflowClient(mlflow_server).get_run(summary["mlflow_run_id"])
    job_id = run.data.tags["judgeflow.train.job_id"]
    assert (job_id, "COMPLETED") in _jobs(slurm_cluster, "judgeflow-train", since)
    assert _queue(slurm_cluster, "judgeflow-train") == []
    # TRL inside the job was paid through the served judge: it was shown every rollout
    history = MlflowClient(mlflow_server).get_metric_history(
        run.info.run_id, "train/judge_format_failure_rate"
    )
    assert [(m.step, m.value) for m in history] == [(1, 1.0), (2, 1.0)]
    # the job's own judge: served on a port picked in the job, checked to be this job's
    [log] = (judgeflow_home / "artifacts" / "runs").glob("*/judge-server.log")
    posts = re.findall(r"POST /invocations HTTP/1.1\" 200", log.read_text())
    assert len(posts) >= 4  # asked which judge it is (the job, the reward), then each step
    stage_log = "\n".join(
        p.read_text(errors="replace")
        for p in (judgeflow_home / "jobs").glob(f"{run.info.run_id}/train/jobs/*_log.*")
    )
    [(port, instance)] = re.findall(
        r"serving the paying judge at http://127.0.0.1:(\d+)/invocations \(instance (\w+);",
        stage_log,
    )
    assert port != "5055" and not list(log.parent.glob("judge-model-*"))
    assert not list(log.parent.glob("judge-server-*.exited"))  # it never died
    running = subprocess.run(["pgrep", "-f", instance], capture_output=True, text=True)
    assert running.stdout.split() == []  # stopped with the job
