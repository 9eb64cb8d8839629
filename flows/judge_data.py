"""judge-data: a trained judge over a file of unlabeled rows, the deployment a schedule runs to
judge new data as it lands (`judge-data/judge-data`).

    resolve the judge → judge (in the flow's process, or a Slurm job) → record

The record is an MLflow run (experiment `judgeflow-judge`: model, data, settings, `judge/*`
metrics, the summary) and a `judging-summary` Prefect artifact; the verdicts are the output file.
"""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.artifacts import create_table_artifact

from judgeflow.registry import resolve_config
from judgeflow.stages.judge import record_judging, start_judging_run
from tasks.judge import judge


@flow(name="judge-data", log_prints=True)
def judge_data(
    model: str,
    data: str,
    output: str,
    mode: str | None = None,
    skip_invalid: bool = False,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """Judge every row of `data` with `model` (models:/NAME@alias, a model dir or store URI)
    into `output` (.parquet, else JSON lines); `overrides` are `--set` strings."""
    cfg, model_uri, version = resolve_config(
        model, mode=mode, recipe=None, profile=None, overrides=overrides or [], tracking_uri=None
    )
    tracker = start_judging_run(cfg, model, version, data)
    try:
        label = version or model_uri.rstrip("/").rsplit("/", 1)[-1]
        summary = judge(cfg, model_uri, data, output, tracker.run_id, version or model_uri, skip_invalid, label)  # fmt: skip
    except BaseException:
        tracker.finish("FAILED")
        raise
    record_judging(tracker, summary)
    tracker.finish()
    create_table_artifact(
        key="judging-summary",
        table=[{"verdict": v, "rows": n} for v, n in summary["verdicts"].items()]
        + [{"verdict": "format failure", "rows": summary["format_failures"]}],
        description=f"{version or model} on {data}: {summary['total']} rows → {output}",
    )
    print(f"judged {summary['total']} rows of {data} into {output}; MLflow run {tracker.run_id}")
    return {**summary, "mlflow_run_id": tracker.run_id}
