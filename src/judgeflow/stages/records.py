"""What a pipeline run records in its MLflow run beside its steps: the data reports, the SFT and
training lineage, each evaluation, the run summary and the before → after comparison, and the
run's end.

Plain functions over the run's `Tracker`, each retried while MLflow fails transiently (`retrying`): they
run inside the flow, not as task runs of their own, so the run graph shows the pipeline's steps
alone. Those that feed the Prefect UI return the table it shows
(`flows/pipeline_run.py` publishes it as an artifact).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from judgeflow import caching
from judgeflow.config import RunConfig
from judgeflow.console import comparison_rows
from judgeflow.registry import sft_models
from judgeflow.retries import retrying
from judgeflow.stages.common import GrrmData, PreparedData, SftData, TrainedModel
from judgeflow.stages.evaluate import decontamination_of
from judgeflow.stages.jobs import metrics_spool
from judgeflow.storage import Manifest
from judgeflow.tracking import Tracker

Table = list[dict[str, Any]]

#: The run-summary's metric columns, in order: a stage's `<anything>/<name>` metric lands in
#: the column `<name>` (e.g. `after/reward_mean` and `train/reward_mean` both in reward_mean).
SUMMARY_COLUMNS = (
    "global_step", "reward_mean", "format_failure_rate", "exact_match", "mae", "accuracy",
    "consistent_accuracy", "position_bias", "ranking_accuracy", "loss", "overlap_rows",
)  # fmt: skip

#: Training curves drawn into `plots/training_curves.png`: (metric, panel title).
CURVES = (
    ("sft/loss", "SFT loss"),
    ("train/reward_mean", "GRPO reward (mean)"),
    ("train/format_failure_rate", "GRPO format-failure rate"),
    ("val/reward_mean", "validation reward (mean)"),
)


@retrying("record the data report")
def record_data(tracker: Tracker, cfg: RunConfig, manifest: Manifest, data: PreparedData) -> Table:
    """Manifest, data report and counts into MLflow; returns the data-report table."""
    _record_manifest(tracker, cfg, manifest)
    tracker.log_dict(data.report, f"data/{Path(data.report_file).name}")  # also when on S3
    counts = data.report["counts"]
    examples = counts["examples_written"]
    rows = counts.get("rows_written", examples)  # pairwise validation: two rows per example
    if val_source := data.report.get("val_source"):  # data.val_source: its rows are the split
        val_counts = val_source["counts"]
        val_rows = val_counts.get("rows_written", val_counts["examples_written"])
        examples = {**examples, "val": sum(val_counts["examples_written"].values())}
        rows = {**rows, "val": sum(val_rows.values())}
    dropped = data.report["dropped"]["by_reason"]
    duplicates = _duplicate_counts(data.report.get("duplicates") or {})
    mixed = _mixer_counts(data.report)
    tracker.log_metrics(
        {
            f"data/mixer_{i:02d}_{what}": n
            for i, (_, counts) in enumerate(mixed)
            for what, n in counts.items()
        }
        | {f"data/rows_{split}": n for split, n in rows.items()}
        | {f"data/examples_{split}": n for split, n in examples.items()}
        | {f"data/dropped_{why}": n for why, n in dropped.items()}
        | {f"data/duplicates_{where}": n for where, n in duplicates.items()}
        | {"data/rows_read": counts["rows_read"]}
    )
    return (
        [{"what": "rows read", "count": counts["rows_read"]}]
        + [{"what": f"examples written ({split})", "count": n} for split, n in examples.items()]
        + [{"what": f"rows written ({split})", "count": n} for split, n in rows.items()]
        + [{"what": f"dropped: {why}", "count": n} for why, n in dropped.items()]
        + [{"what": f"duplicate prompts: {w}", "count": n} for w, n in duplicates.items()]
        + [
            {"what": f"{name}: {what.replace('_', ' ')}", "count": n}
            for name, counts in mixed
            for what, n in counts.items()
        ]
    )


def _mixer_counts(report: dict[str, Any]) -> list[tuple[str, dict[str, int]]]:
    """Per mixer source (training, then validation rows): rows available, taken and kept."""
    out = []
    for where, section in (("", report), ("validation: ", report.get("val_source") or {})):
        for source in (section.get("mixer") or {}).get("sources", []):
            counts = {k: source[k] for k in ("rows_available", "rows_taken", "rows_kept")}
            out.append((where + source["source"], counts))
    return out


def _record_manifest(tracker: Tracker, cfg: RunConfig, manifest: Manifest) -> None:
    """What was downloaded: the manifest (files, hashes, rows) and its content hash."""
    tracker.log_dict(manifest.to_dict(), "data/manifest.json")
    tracker.set_tags(
        {
            "judgeflow.data.source": cfg.data.label,
            "judgeflow.data.manifest_hash": manifest.content_hash,
        }
    )


@retrying("record the data reports")
def record_grrm_data(tracker: Tracker, cfg: RunConfig, manifest: Manifest, data: GrrmData) -> Table:
    """Manifest and GRRM's data reports (SFT, RL train, RL test) into MLflow; returns the
    data-report table."""
    _record_manifest(tracker, cfg, manifest)
    rows = []
    for name, (report_file, report) in data.reports.items():
        tracker.log_dict(report, f"data/{Path(report_file).name}")  # the file may be elsewhere
        counts = report["counts"]
        tracker.log_metrics(
            {
                f"data/{name}_rows_written": counts["rows_written"],
                f"data/{name}_rows_dropped": counts["rows_dropped"],
            }
        )
        rows.append({"file": name, **counts})
    return rows


def _duplicate_counts(duplicates: dict[str, Any]) -> dict[str, int]:
    """`within_train`, `across_val`, …: units whose prompt repeats (the report lists them)."""
    return {
        f"{where}_{split}": int(entry.get("count", 0))
        for where in ("within", "across")
        for split, entry in (duplicates.get(where) or {}).items()
    }


@retrying("record the SFT model")
def record_sft(
    tracker: Tracker,
    cfg: RunConfig,
    outcome: Any,
    sft_file: str,
    data: SftData | None = None,
) -> None:
    """Lineage: which SFT model RL starts from, which job and run trained it, on what data (its
    preparation report too); and the SFT metrics its job could not deliver while MLflow was
    down."""
    tags = {
        sft_models.SFT_KEY_TAG: caching.sft_key(cfg, sft_file),
        sft_models.SFT_MODEL_TAG: outcome.model_dir,
        "judgeflow.sft.job_id": outcome.job_id,
        "judgeflow.sft.mlflow_run_id": outcome.mlflow_run_id,
        "judgeflow.sft.base_model": cfg.model.path,
        "judgeflow.rl.start_model": outcome.model_dir,
    }
    _replay_spool(tracker, cfg, outcome.mlflow_run_id, "sft")
    if data is not None:
        tags["judgeflow.sft.source"] = cfg.sft.source
        tags["judgeflow.sft.data_sha256"] = data.report["sha256"]
        counts = data.report["counts"]
        tracker.log_metrics({f"data/sft_{k}": v for k, v in counts.items()})
        tracker.log_dict(data.report, "data/sft.report.json")  # what was read, kept, dropped
    tracker.set_tags(tags)


@retrying("record the trained model")
def record_training(tracker: Tracker, cfg: RunConfig, outcome: Any) -> None:
    """Where the model is and which job/run trained it (a cached model: an earlier run), and
    the metrics its job could not deliver while MLflow was down (`metrics-spool.jsonl`)."""
    model: TrainedModel = outcome.model
    _replay_spool(tracker, cfg, outcome.mlflow_run_id, "train")
    tracker.set_tags(
        {
            "judgeflow.train.job_id": outcome.job_id,
            "judgeflow.train.mlflow_run_id": outcome.mlflow_run_id,
            "judgeflow.train.start_model": cfg.model.path,  # the SFT model when SFT ran
            "judgeflow.checkpoint": model.model_dir,
            "judgeflow.global_step": model.global_step,
            "judgeflow.resumed_from": model.resumed_from,
        }
    )


def _replay_spool(tracker: Tracker, cfg: RunConfig, trained_in: str | None, stage: str) -> None:
    """The metrics a stage's job spooled while MLflow was down, into the run that trained it:
    this run, or an earlier one when the step came from the cache."""
    run_id = trained_in or tracker.run_id
    spool = metrics_spool(cfg, run_id, stage)
    tracker.sibling(run_id).replay_spool(spool)


@retrying("record an evaluation")
def record_evaluation(
    tracker: Tracker, cfg: RunConfig, label: str, result: dict[str, Any]
) -> dict[str, float]:
    """Log `eval/<metric>` as `<label>/<metric>` (e.g. before/accuracy), what decontamination
    found (tag `judgeflow.decontamination.<label>`: checked, overlap-allowed or unchecked), the
    predictions table, the details (`eval/<label>_details.json`: confusion, breakdowns, overlap)
    and the pictures (`plots/<label>_*.png`)."""
    from judgeflow.evaluation import JudgeEvaluation, write_evaluation_artifacts

    metrics = {f"{label}/{k.removeprefix('eval/')}": v for k, v in result["metrics"].items()}
    with tempfile.TemporaryDirectory() as tmp:
        written = []  # the details and pictures, drawn before anything is logged
        if result.get("details"):
            evaluation = JudgeEvaluation(result["metrics"], result["rows"], result["details"])
            written = write_evaluation_artifacts(evaluation, cfg.mode, label, Path(tmp))
        tracker.log_metrics(metrics)
        if checked := decontamination_of(result):
            tracker.set_tags({f"judgeflow.decontamination.{label}": checked})
        tracker.log_table(result["rows"], f"eval/{label}_predictions.json")
        for path in written:
            tracker.log_artifact(path, "plots" if path.suffix == ".png" else "eval")
    return metrics


def summary_table(rows: Table, *, link: str, jobs: dict[str, list[str]]) -> Table:
    """One row per stage, one column per key metric (empty where a stage has none)."""
    table = []
    for row in rows:
        metrics = {
            key.rsplit("/", 1)[-1]: value
            for key, value in row.get("metrics", {}).items()
            if "/subset/" not in key  # the per-subset breakdown is in the evaluation's details
        }
        entry: dict[str, Any] = {
            "stage": row["stage"],
            "status": row["status"],
            "duration_s": row["duration_s"],
        }
        for column in SUMMARY_COLUMNS:
            value = metrics.get(column)
            entry[column] = round(float(value), 4) if isinstance(value, int | float) else ""
        entry["decontamination"] = row.get("decontamination", "")
        entry["slurm_job_ids"] = ", ".join(jobs.get(_job_stage(row["stage"]), []))
        entry["note"] = row.get("note", "")
        entry["error"] = row.get("error", "")
        entry["mlflow"] = link
        table.append(entry)
    optional = (*SUMMARY_COLUMNS, "decontamination", "note")
    used = {c for c in optional if any(e[c] != "" for e in table)}
    return [{k: v for k, v in e.items() if k not in optional or k in used} for e in table]


@retrying("record the run summary")
def record_summary(tracker: Tracker, rows: Table, jobs: dict[str, list[str]]) -> Table:
    """The run-summary table (stage, status, duration, key metrics, jobs, MLflow link), and
    `judgeflow.cached.<stage>` tags on the MLflow run."""
    table = summary_table(rows, link=tracker.url() or f"mlflow run {tracker.run_id}", jobs=jobs)
    tracker.set_tags({_tag(row["stage"]): str(row["status"] == "cached").lower() for row in rows})
    return table


@retrying("record the comparison")
def record_comparison(
    tracker: Tracker,
    cfg: RunConfig,
    metrics: dict[str, float],
    labels: list[str],
    trained_in: list[str] | None = None,
) -> Table:
    """The before → after comparison: in MLflow the table (`eval/comparison.json`), its bar
    chart and the training curves as PNGs; returns the table.

    A stage that came from the cache logged its curve in the run that trained it: `trained_in`
    lists those runs (SFT's, GRPO's), searched after this one.
    """
    from judgeflow.evaluation.plots import plot_comparison, plot_curves

    rows = comparison_rows(metrics, labels)
    sources = [tracker] + [
        tracker.sibling(other)
        for other in dict.fromkeys(trained_in or [])
        if other and other != tracker.run_id
    ]
    with tempfile.TemporaryDirectory() as tmp:
        curves = {
            title: next((h for t in sources if (h := t.metric_history(key))), [])
            for key, title in CURVES
        }
        if any(curves.values()):
            title = f"{cfg.recipe}: training"
            tracker.log_image_file(
                plot_curves(curves, Path(tmp) / "training_curves.png", title=title), "plots"
            )
        if rows:
            title = f"{cfg.recipe}: before → after"
            tracker.log_image_file(
                plot_comparison(rows, Path(tmp) / "before_after.png", title=title), "plots"
            )
    if rows:
        tracker.log_table(rows, "eval/comparison.json")
    return rows


@retrying("close the MLflow run")
def finish_run(tracker: Tracker, summary: dict[str, Any], status: str = "FINISHED") -> None:
    """Record what the run produced and close it."""
    tracker.set_tags(
        {"judgeflow.checkpoint": summary.get("checkpoint"), "judgeflow.status": status}
    )
    tracker.log_dict(summary, "summary.json")
    tracker.finish(status)


def _tag(stage: str) -> str:
    """MLflow tag for a stage row: `evaluate[before]` -> `judgeflow.cached.evaluate-before`."""
    return "judgeflow.cached." + re.sub(r"[^\w./ -]+", "-", stage).strip("-")


def _job_stage(stage: str) -> str:
    """Summary row `evaluate[before]` -> the jobs file's stage `evaluate-before`."""
    return stage.replace("[", "-").rstrip("]")


@retrying("check the judge's training questions")
def record_judge_overlap(
    tracker: Tracker, cfg: RunConfig, judge_weights: str, data: PreparedData
) -> dict[str, Any]:
    """Whether the policy's evaluation questions are among those its paying judge trained on
    (`decontamination.judge_overlap`): tag `judgeflow.reward.judge_overlap` (checked, overlap or
    unchecked), metric `judge_overlap_rows`, the details as `eval/judge_overlap.json`."""
    import pyarrow.parquet as pq

    from judgeflow.evaluation.decontamination import judge_overlap
    from judgeflow.stages.common import fetch
    from judgeflow.storage import local_weights

    if not data.val_file:
        return {"status": "unchecked", "rows": 0, "overlapping_rows": None, "examples": []}
    rows = pq.read_table(fetch(cfg, data.val_file)).to_pylist()
    found = judge_overlap(local_weights(judge_weights, cfg.storage.root), rows)
    tracker.set_tags({"judgeflow.reward.judge_overlap": found["status"]})
    if found["overlapping_rows"] is not None:
        tracker.log_metrics({"judge_overlap_rows": float(found["overlapping_rows"])})
    tracker.log_dict(found, "eval/judge_overlap.json")
    return found


@retrying("record the hacking gate")
def record_hacking(tracker: Tracker, verdict: dict[str, Any]) -> None:
    """The hacking gate's verdict (`judgeflow.evaluation.hacking`): tag
    `judgeflow.reward.hacking` (`clear`, `suspected: …` or `unchecked: …`; the registered
    version inherits it),
    each detector's figures as `hacking/…` metrics with `hacking/suspected` (1 or 0), the whole
    verdict as `eval/hacking.json`."""
    from judgeflow.evaluation.hacking import TAG_HACKING, tag_value

    tracker.set_tags({TAG_HACKING: tag_value(verdict)})
    figures = {f"hacking/{k}": float(v) for k, v in verdict["figures"].items()}
    tracker.log_metrics({**figures, "hacking/suspected": float(verdict["status"] == "suspected")})
    tracker.log_dict(verdict, "eval/hacking.json")
