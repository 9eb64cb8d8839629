"""Retraining costs nothing when nothing changed, and a change re-runs exactly what depends on it.

Real Prefect server and MLflow server, real TRL training of the tiny model (local backend);
the Slurm variant ("no job is submitted") is tests/cluster/test_retraining_on_slurm.py.
"""

from __future__ import annotations

import functools
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from flowtools import edit_row, stage_states
from mlflow.tracking import MlflowClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

STAGES = ("download", "prepare", "train")
#: What the run summary lists: the stages, then registering the model (an earlier version with
#: the same weights is reused: `cached`).
ROWS = (*STAGES, "register[final]")


def test_unchanged_data_reuses_every_stage_and_changes_rerun_only_what_depends_on_them(
    prefect_server: str, mlflow_server: str, judgeflow_home: Path, sample_source: Path
) -> None:
    from flows.judge_grpo import judge_grpo

    mlflow = MlflowClient(mlflow_server)

    def run(*extra: str) -> tuple[dict[str, Any], dict[str, str]]:
        start = time.monotonic()
        summary = judge_grpo(
            mode="pointwise",
            profile="tiny",
            overrides=[
                f"tracking.tracking_uri={mlflow_server}",
                f"data.source={sample_source.as_uri()}",
                "data.val_source=null",  # validate on a split of that source
                "data.val_fraction=0.25",
                "evaluation.enabled=false",
                "grpo.max_steps=1",
                *extra,
            ],
        )
        tags = mlflow.get_run(summary["mlflow_run_id"]).data.tags
        states = stage_states(tags["prefect.flow_run_id"])
        print(f"run {extra or ''}: {time.monotonic() - start:.1f}s {summary['stages']}")
        return summary, {**{s: states[s] for s in STAGES}, **tags}

    run = functools.partial(run, "sft.enabled=false")
    first, seen = run()
    assert first["stages"] == dict.fromkeys(ROWS, "ran")
    assert [seen[s] for s in STAGES] == ["Completed"] * 3

    # Same data, same config: every stage from the cache, same checkpoint, tagged as cached.
    second, seen = run()
    assert second["stages"] == dict.fromkeys(ROWS, "cached")
    assert [seen[s] for s in STAGES] == ["Cached"] * 3
    assert second["checkpoint"] == first["checkpoint"]
    assert second["registry"]["final"]["version"] == first["registry"]["final"]["version"]
    assert {seen[f"judgeflow.cached.{s}"] for s in STAGES} == {"true"}
    assert seen["judgeflow.train.mlflow_run_id"] == first["mlflow_run_id"]  # trained there

    # One row of the source changes: everything downstream of the data runs again.
    edit_row(sample_source, 0, lambda r: r["output"][0]["answer"].update(content="Changed."))
    third, seen = run()
    assert third["stages"] == dict.fromkeys(ROWS, "ran")
    assert third["checkpoint"] != first["checkpoint"]
    assert seen["judgeflow.cached.download"] == "false"

    # Only a training parameter changes: the data stages are reused, training runs.
    fourth, seen = run("grpo.learning_rate=2e-5")
    assert fourth["stages"] == {
        "download": "cached", "prepare": "cached", "train": "ran", "register[final]": "ran"
    }  # fmt: skip
    assert [seen[s] for s in STAGES] == ["Cached", "Cached", "Completed"]

    # A cached checkpoint that was deleted is not handed out: training runs again.
    shutil.rmtree(fourth["checkpoint"])
    fifth, _ = run("grpo.learning_rate=2e-5")
    assert fifth["stages"]["train"] == "ran"
    assert Path(fifth["checkpoint"], "model.safetensors").is_file()
