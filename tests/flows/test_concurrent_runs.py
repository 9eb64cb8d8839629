"""Two judge-grpo runs at once on the same data, sharing $JUDGEFLOW_HOME, Prefect and MLflow.

Real Prefect server, MLflow server and TRL training (local backend). The runs differ only in
their learning rate, so download, prepare and the evaluation before training have the same
cache key in both while training does not: the shared stages must be computed once (the other
run waits for the result and reads it whole), and each run keeps its own MLflow run, checkpoint
and job directories.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from flowtools import task_runs
from mlflow.tracking import MlflowClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SHARED = ("download", "prepare", "evaluate[before]")


def test_two_runs_at_once_share_cached_stages_and_keep_their_own_results(
    prefect_server: str, mlflow_server: str, judgeflow_home: Path, sample_source: Path
) -> None:
    from flows.judge_grpo import judge_grpo

    model_name = f"judge-grpo-concurrent-{uuid.uuid4().hex[:8]}"  # new to the shared registry

    def overrides(learning_rate: str) -> list[str]:
        return [
            f"tracking.tracking_uri={mlflow_server}",
            f"data.source={sample_source.as_uri()}",
            "data.val_source=null",  # validate on a split of that source
            "data.val_fraction=0.25",
            "sft.enabled=false",
            # The evaluation before training takes seconds (8 sampled verdicts per row): the
            # later run reaches it while the earlier one is still computing it.
            "evaluation.samples=8",
            "evaluation.temperature=1.0",
            "evaluation.max_new_tokens=96",
            "grpo.max_steps=2",
            f"grpo.learning_rate={learning_rate}",
            f"register.model_name={model_name}",
        ]

    outcomes: dict[str, Any] = {}
    start = threading.Barrier(2)

    def run(learning_rate: str) -> None:
        start.wait()
        try:
            outcomes[learning_rate] = judge_grpo(
                mode="pointwise", profile="tiny", overrides=overrides(learning_rate)
            )
        except BaseException as exc:  # reported by the assertion below
            outcomes[learning_rate] = exc

    threads = [threading.Thread(target=run, args=(lr,)) for lr in ("1e-3", "2e-3")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=540)
    assert not any(t.is_alive() for t in threads), "a run did not finish"
    errors = {lr: o for lr, o in outcomes.items() if isinstance(o, BaseException)}
    assert not errors, errors
    first, second = outcomes["1e-3"], outcomes["2e-3"]
    # Each run has its own MLflow run, checkpoint and job directories.
    assert first["mlflow_run_id"] != second["mlflow_run_id"]
    assert first["checkpoint"] != second["checkpoint"]
    for summary in (first, second):
        run_id = summary["mlflow_run_id"]
        assert Path(summary["checkpoint"], "model.safetensors").is_file()
        assert str(judgeflow_home / "artifacts" / "runs" / run_id) in summary["checkpoint"]
        assert (judgeflow_home / "jobs" / run_id / "train" / "result.json").is_file()
        assert summary["global_step"] == 2 and summary["stages"]["train"] == "ran"
        assert MlflowClient(mlflow_server).get_run(run_id).info.status == "FINISHED"

    # The stages both runs need were computed once; the other run waited and got the result.
    for stage in SHARED:
        assert sorted([first["stages"][stage], second["stages"][stage]]) == ["cached", "ran"], (
            stage, first["stages"], second["stages"],
        )  # fmt: skip
    tags = [MlflowClient(mlflow_server).get_run(s["mlflow_run_id"]).data.tags for s in (first, second)]  # fmt: skip
    runs = [{r.name: r for r in task_runs(t["prefect.flow_run_id"])} for t in tags]
    computed, reused = sorted((r["evaluate[before]"] for r in runs), key=lambda r: r.state.name != "Completed")  # fmt: skip
    assert (computed.state.name, reused.state.name) == ("Completed", "Cached")
    assert reused.start_time < computed.end_time  # it was asked for while being computed
    assert first["metrics"]["before/exact_match"] == second["metrics"]["before/exact_match"]
    keys = judgeflow_home / "prefect-cache-keys"
    for key in (p for p in keys.iterdir() if p.is_file()):
        json.loads(key.read_text())  # every cache record is whole

    # Both models are registered; the gate decided one at a time: one champion, and the other
    # was compared with it.
    decisions = sorted((s["registry"]["final"] for s in (first, second)), key=lambda d: d["version"])  # fmt: skip
    assert [d["version"] for d in decisions] == ["1", "2"]
    assert decisions[0]["promoted"] and decisions[0]["champion_version"] is None
    assert decisions[1]["champion_version"] == "1"
