"""`judgeflow judge --set cluster.backend=slurm` on the real dev cluster: the judging runs as a
Slurm job (one plain process on the evaluation's resources), the CLI follows it, and the
verdicts, the job and the MLflow run are all there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SlurmCluster
from mlflow.tracking import MlflowClient
from test_judge_grpo_on_slurm import _jobs, _now

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_judging_runs_as_a_slurm_job(
    slurm_cluster: SlurmCluster, mlflow_server: str, tiny_model: Path, tmp_path: Path
) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text(
        "".join(json.dumps({"query": f"q{i}", "response": "r"}) + "\n" for i in range(6))
    )
    out = tmp_path / "verdicts.parquet"
    settings = ["cluster.backend=slurm", "cluster.partition=debug", "cluster.poll_s=1",
                "cluster.timeout_min=15", "evaluation.gpus=0", "evaluation.batch_size=4",
                "evaluation.max_new_tokens=8", f"tracking.tracking_uri={mlflow_server}"]  # fmt: skip
    since = _now()
    env = {**slurm_cluster.env, "JUDGEFLOW_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "judgeflow"), "judge", str(tiny_model), "--mode",
         "pointwise", "--data", str(data), "--output", str(out),
         *[arg for s in settings for arg in ("--set", s)]],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [(job_id, state)] = _jobs(slurm_cluster, "judgeflow-judge", since)
    assert state == "COMPLETED" and f"Slurm job {job_id}" in done.stderr
    import pyarrow.parquet as pq

    verdicts = pq.read_table(out).to_pylist()
    assert [v["id"] for v in verdicts] == [str(i) for i in range(6)]
    run_id = done.stdout.split("MLflow run: ")[1].split()[0]
    run = MlflowClient(mlflow_server).get_run(run_id)
    assert run.data.metrics["judge/n"] == 6 and run.data.tags["judgeflow.backend"] == "slurm"
    assert not (tmp_path / "verdicts.parquet.judging.jsonl").exists()
    assert os.listdir(tmp_path / "home" / "jobs" / run_id / "judge")  # the job's own folder
