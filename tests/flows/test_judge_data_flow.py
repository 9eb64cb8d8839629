"""The judge-data flow on a real Prefect server and a real `mlflow server`, with the real tiny
model: every row judged into the output, the MLflow run and the Prefect artifacts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_judge_data_judges_every_row_and_records_it(
    prefect_server: str, mlflow_server: str, judgeflow_home: Path, tiny_model: Path, tmp_path: Path
) -> None:
    from flows.judge_data import judge_data

    data = tmp_path / "rows.jsonl"
    data.write_text(
        "".join(json.dumps({"query": f"q{i}", "response": "r"}) + "\n" for i in range(5))
    )
    out = tmp_path / "verdicts.jsonl"
    settings = ["evaluation.max_new_tokens=8", "evaluation.batch_size=2",
                f"tracking.tracking_uri={mlflow_server}"]  # fmt: skip
    summary = judge_data(str(tiny_model), str(data), str(out), mode="pointwise", overrides=settings)

    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert [v["id"] for v in verdicts] == [str(i) for i in range(5)]
    assert summary["total"] == 5 and summary["format_failures"] == sum(
        not v["valid"] for v in verdicts
    )
    run = MlflowClient(mlflow_server).get_run(summary["mlflow_run_id"])
    assert run.data.metrics["judge/n"] == 5 and run.info.status == "FINISHED"
    assert run.data.tags["judgeflow.judge_output"] == str(out)

    async def artifact_keys() -> set[str]:
        from prefect import get_client

        async with get_client() as client:
            return {a.key for a in await client.read_artifacts() if a.key}

    assert {"judging-summary", "judging-progress"} <= asyncio.run(artifact_keys())
