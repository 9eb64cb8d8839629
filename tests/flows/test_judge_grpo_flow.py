"""judge-grpo end to end on CPU: real Prefect server, real MLflow server, real TRL training."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.slow


def _artifact_paths(client: MlflowClient, run_id: str, path: str | None = None) -> set[str]:
    out: set[str] = set()
    for item in client.list_artifacts(run_id, path):
        out |= _artifact_paths(client, run_id, item.path) if item.is_dir else {item.path}
    return out


@pytest.mark.parametrize("mode", ["pointwise", "pairwise"])
def test_judge_grpo_flow_trains_and_tracks(
    mode: str, prefect_server: str, mlflow_server: str, judgeflow_home: Path
) -> None:
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.judge_grpo import judge_grpo

    summary = judge_grpo(
        mode=mode, profile="tiny", overrides=[f"tracking.tracking_uri={mlflow_server}"]
    )

    # The checkpoint exists and is a loadable model directory.
    final = Path(summary["checkpoint"])
    assert (final / "config.json").is_file() and (final / "model.safetensors").is_file()
    assert summary["global_step"] == 4

    client = MlflowClient(mlflow_server)
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    # Config as params, secrets-free; lineage tags.
    assert run.data.params["grpo.max_steps"] == "4"
    assert run.data.params["mode"] == mode
    assert run.data.tags["judgeflow.checkpoint"] == str(final)
    assert len(run.data.tags["judgeflow.data.manifest_hash"]) == 64
    assert run.data.tags["judgeflow.config_hash"]
    # Per-step training metrics, one point per step.
    for key in (
        "train/reward_mean",
        "train/reward_std",
        "train/zero_std_frac",
        "train/kl",
        "train/loss",
        "train/completion_length",
        "train/format_failure_rate",
    ):
        history = client.get_metric_history(run.info.run_id, key)
        assert [m.step for m in history] == [1, 2, 3, 4], key
    # Judge accuracy before and after training, and the data counts.
    metric = "exact_match" if mode == "pointwise" else "accuracy"
    for label in ("before", "after"):
        assert 0.0 <= run.data.metrics[f"{label}/{metric}"] <= 1.0
        assert 0.0 <= run.data.metrics[f"{label}/format_failure_rate"] <= 1.0
    assert run.data.metrics["data/rows_train"] > 0
    # The data report, the manifest and the summary are artifacts of the same run.
    artifacts = _artifact_paths(client, run.info.run_id)
    assert {"data/manifest.json", "summary.json", f"data/{mode}.report.json"} <= artifacts

    # Prefect saw a completed flow run with the progress and data-report artifacts.
    import asyncio

    async def prefect_view() -> tuple[str, dict[str, object]]:
        async with get_client() as pc:
            runs = await pc.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    id=FlowRunFilterId(any_=[run.data.tags["prefect.flow_run_id"]])
                )
            )
            arts = await pc.read_latest_artifacts()
            return runs[0].state.type.value, {a.key: a.data for a in arts}

    state, artifacts_by_key = asyncio.run(prefect_view())
    assert state == "COMPLETED"
    assert artifacts_by_key["training-progress"] == 100.0
    assert "data-report" in artifacts_by_key
