"""grrm end to end on CPU: real LLaMA-Factory SFT of the tiny model, then TRL RLVR from that
checkpoint, with ranking accuracy before/after and metrics in a real MLflow server."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.slow(seconds=110)


def test_grrm_full_pipeline_sft_then_rlvr(
    prefect_server: str, mlflow_server: str, judgeflow_home: Path
) -> None:
    from flows.grrm import grrm

    summary = grrm(
        recipe="grrm-full", stage="full", profile="tiny",
        overrides=[f"tracking.tracking_uri={mlflow_server}"],
    )  # fmt: skip

    client = MlflowClient(mlflow_server)
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    sft_dir = Path(run.data.tags["judgeflow.sft.model_dir"])
    assert (sft_dir / "config.json").is_file()  # LLaMA-Factory saved the SFT model
    # RLVR started from the SFT checkpoint, not from the base model.
    assert run.data.params["model.path"].endswith("tiny-model")
    train_input = (judgeflow_home / "jobs" / run.info.run_id / "train" / "input.json").read_text()
    assert f'"path": "{sft_dir}"' in train_input
    # SFT loss curve and RLVR metrics in the same run.
    assert len(client.get_metric_history(run.info.run_id, "sft/loss")) >= 1
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "train/reward_mean")]
    assert steps == list(range(1, 9))
    # Ranking accuracy on the test split after SFT and after RLVR (16 items, greedy).
    m = run.data.metrics
    for label in ("sft", "after"):
        assert 0.0 <= m[f"{label}/ranking_accuracy"] <= 1.0
        assert m[f"{label}/samples"] == 1.0
        assert m[f"{label}/n"] == 16.0
    # SFT taught the analysis / ranking / scores layout; RLVR did not undo it.
    assert m["sft/format_failure_rate"] < 0.5
    assert m["after/format_failure_rate"] <= m["sft/format_failure_rate"]
    assert Path(summary["checkpoint"], "model.safetensors").is_file()
    assert "plots/training_curves.png" in {
        a.path for a in client.list_artifacts(run.info.run_id, "plots")
    }
    # What was downloaded, as for the judges: the manifest and its hash.
    assert "data/manifest.json" in {a.path for a in client.list_artifacts(run.info.run_id, "data")}
    assert len(run.data.tags["judgeflow.data.manifest_hash"]) == 64

    # RLVR alone starts from this lineage's SFT model (found in MLflow), and a retraining on
    # unchanged data is served from the cache: no job is submitted, the checkpoint is the same.
    rlvr = grrm(
        recipe="grrm-full", stage="rlvr", profile="tiny",
        overrides=[f"tracking.tracking_uri={mlflow_server}"],
    )  # fmt: skip
    tags = client.get_run(rlvr["mlflow_run_id"]).data.tags
    assert tags["judgeflow.train.start_model"] == str(sft_dir)
    assert rlvr["stages"] == dict.fromkeys(rlvr["stages"], "cached")
    assert set(rlvr["stages"]) == {"download", "prepare", "evaluate[before]", "train", "evaluate[after]", "register[final]"}  # fmt: skip
    assert rlvr["checkpoint"] == summary["checkpoint"]

    again = grrm(
        recipe="grrm-full", stage="full", profile="tiny",
        overrides=[f"tracking.tracking_uri={mlflow_server}"],
    )  # fmt: skip
    assert again["stages"] == dict.fromkeys(summary["stages"], "cached")
    assert again["checkpoint"] == summary["checkpoint"]
    again_tags = client.get_run(again["mlflow_run_id"]).data.tags  # the cached SFT model, reused
    assert again_tags["judgeflow.sft.model_dir"] == str(sft_dir)
    assert again_tags["judgeflow.train.start_model"] == str(sft_dir)


def test_rlvr_alone_without_an_sft_of_this_lineage_says_what_to_do(
    prefect_server: str, mlflow_server: str, judgeflow_home: Path
) -> None:
    from flows.grrm import grrm

    with pytest.raises(LookupError, match="--stage sft"):
        grrm(
            recipe="grrm-full", stage="rlvr", profile="tiny",
            overrides=[f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=empty",
                       "evaluation.enabled=false"],
        )  # fmt: skip
