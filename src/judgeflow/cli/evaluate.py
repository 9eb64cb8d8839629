"""`judgeflow evaluate MODEL --data URI`: any judge or policy on any data, outside a pipeline.

MODEL is a registered version (`models:/NAME@champion`, `models:/NAME/3`), a model directory,
an artifact-store URI or a hub id. URI is prepared verl RL parquet, or raw data prepared here
exactly as the pipeline prepares its validation split (pairwise: both orders). The model's
lineage decides what it may be scored on (`judgeflow.evaluation.decontamination`); what the check found
(checked, overlap-allowed, unchecked) is printed and tagged. The result goes to an MLflow run of
its own, and onto the registered version, so a later gate can compare with it: numbers measured
with `--allow-overlap` on rows the version trained on, or on weights without lineage
(unchecked), go under evaluation sets of their own, where no gate compares them with checked ones.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judgeflow.config import RunConfig, judgeflow_home
from judgeflow.registry.configs import resolve_config
from judgeflow.stages.common import fetch
from judgeflow.storage import download

EXPERIMENT = "judgeflow-evaluate"
#: The columns that make a parquet file verl RL rows (already prepared).
VERL_COLUMNS = {"prompt", "reward_model"}


@dataclass(frozen=True)
class ModelEvaluation:
    """What `evaluate_model` measured, and where it left it."""

    model: str  # as the user named it
    model_dir: str  # the weights evaluated
    version: str | None  # `NAME/3` when a registered version
    mode: str
    eval_file: str
    metrics: dict[str, float]
    details: dict[str, Any]
    predictions: list[dict[str, Any]] = field(default_factory=list)
    mlflow_run_id: str | None = None
    artifacts: list[str] = field(default_factory=list)


def evaluation_file(cfg: RunConfig, data: str, work: Path) -> str:
    """Prepared verl rows for `data`: the file itself when it is already, else prepared here
    like the pipeline's validation split (pairwise in both orders; GRRM's test split)."""
    local = Path(data)
    if local.suffix == ".parquet" and local.is_file() and _is_verl(local):
        return str(local)
    manifest = download(data, work / "source")
    only = manifest.paths[0] if len(manifest.paths) == 1 else None
    if only is not None and only.suffix == ".parquet" and _is_verl(only):
        return str(only)
    out = work / "prepared"
    if cfg.mode == "grrm":
        from judgeflow.data import prepare_grrm_rl
        from judgeflow.stages.data import grrm_val_file

        g = cfg.data.grrm
        grrm = prepare_grrm_rl(
            str(grrm_val_file(manifest)), str(out / "eval.parquet"), split="test",
            src_key=g.src_key, src_lang_key=g.src_lang_key, trg_lang_key=g.trg_lang_key,
            mt_key=g.mt_key, score_key=g.score_key, skip_invalid=cfg.data.skip_invalid,
        )  # fmt: skip
        return str(grrm.output_path)
    from judgeflow.data import prepare_judge

    d = cfg.data
    tokenizer = fetch(cfg, cfg.model.path) if d.filter_overlong_prompts else None
    if cfg.mode == "rlvr":  # a policy: open-instruct's RLVR rows
        from judgeflow.data.rlvr import prepare_rlvr

        rows = prepare_rlvr(
            [str(p) for p in manifest.paths], str(out / "eval.parquet"),
            remap_verifier=cfg.rlvr.remap_verifier, skip_invalid=d.skip_invalid,
            tokenizer=tokenizer, max_prompt_length=d.max_prompt_length if tokenizer else None,
            judge_datasets=cfg.reward.judge_datasets if cfg.reward.paid_by_judge else (),
            system_prompt=d.system_prompt,  # asked as in training
            chat_template=d.chat_template_jinja,  # its prompts measured as in training
        )  # fmt: skip
        return str(rows.train_path)
    result = prepare_judge(
        cfg.mode,
        [str(p) for p in manifest.paths],
        str(out / "eval.parquet"),
        both_orders=cfg.mode == "pairwise",
        input_format=d.format,
        skip_invalid=d.skip_invalid,
        chosen_label=d.chosen_label,
        rejected_label=d.rejected_label,
        tokenizer=tokenizer,
        max_prompt_length=d.max_prompt_length if tokenizer else None,
    )
    return str(result.train_path)


def _is_verl(path: Path) -> bool:
    import pyarrow.parquet as pq

    return set(pq.read_schema(str(path)).names) >= VERL_COLUMNS


def evaluate_model(
    model: str,
    data: str,
    *,
    mode: str | None = None,
    recipe: str | None = None,
    profile: str | None = None,
    overrides: list[str] | None = None,
    tracking_uri: str | None = None,
    output_dir: str | Path | None = None,
    log_to_mlflow: bool = True,
) -> ModelEvaluation:
    """Evaluate `model` on `data` (see the module docstring); raises ContaminationError when
    the data holds prompts the model trained on and `evaluation.allow_overlap` is off."""
    from judgeflow.evaluation import JudgeEvaluation, write_evaluation_artifacts
    from judgeflow.stages.common import PreparedData
    from judgeflow.stages.evaluate import evaluate_stage

    cfg, model_uri, version = resolve_config(
        model, mode=mode, recipe=recipe, profile=profile, overrides=overrides or [],
        tracking_uri=tracking_uri,
    )  # fmt: skip
    out = Path(output_dir) if output_dir else Path(tempfile.mkdtemp(prefix="judgeflow-eval-"))
    out.mkdir(parents=True, exist_ok=True)
    eval_file = evaluation_file(cfg, data, out)
    prepared = PreparedData(train_file=eval_file, val_file=eval_file, report_file="", report={})
    local = cfg.model_copy(update={"engine": "trl"})  # generated here, with the HF generator
    result = evaluate_stage(local, model_uri, prepared, data_name=data)
    details = {**result["details"], "data": data, "model": model}
    evaluation = JudgeEvaluation(result["metrics"], result["rows"], details)
    title = f"{version or model} on {data}"
    paths = write_evaluation_artifacts(evaluation, cfg.mode, "eval", out, title=title)
    predictions = out / "predictions.json"
    predictions.write_text(json.dumps(result["rows"], indent=1, default=str) + "\n")
    paths.append(predictions)
    run_id = _log(cfg, model, version, data, evaluation, paths) if log_to_mlflow else None
    return ModelEvaluation(
        model=model, model_dir=model_uri, version=version, mode=cfg.mode, eval_file=eval_file,
        metrics=dict(result["metrics"]), details=details, predictions=list(result["rows"]),
        mlflow_run_id=run_id, artifacts=[str(p) for p in paths],
    )  # fmt: skip


def _log(
    cfg: RunConfig,
    model: str,
    version: str | None,
    data: str,
    evaluation: Any,
    paths: list[Path],
) -> str:
    """An MLflow run for this evaluation; a registered version also keeps the numbers."""
    from judgeflow.registry import ModelRegistry, judge_tags
    from judgeflow.tracking import Tracker

    eval_set = evaluation.details.get("eval_set")
    tracker = Tracker.start(
        EXPERIMENT,
        run_name=f"evaluate {model}",
        tracking_uri=cfg.tracking.tracking_uri,
        tags={
            **judge_tags(cfg, model, version),
            "judgeflow.eval_data": data,
            "judgeflow.eval_set": eval_set or "",
            "judgeflow.decontamination": evaluation.details.get("decontamination") or "",
        },
    )
    tracker.log_params({f"evaluation.{k}": v for k, v in cfg.evaluation.model_dump().items()})
    tracker.log_metrics(evaluation.metrics)
    for path in paths:
        tracker.log_artifact(path, "plots" if path.suffix == ".png" else "eval")
    if version and eval_set:  # overlap-allowed, unchecked: sets of their own (`eval_set_for`)
        name, number = version.rsplit("/", 1)
        bare = {k.removeprefix("eval/"): v for k, v in evaluation.metrics.items()}
        ModelRegistry(cfg.tracking.tracking_uri).record_evaluation(name, number, eval_set, bare)
    tracker.finish()
    return tracker.run_id


def default_output_dir() -> Path:
    """Where `judgeflow evaluate` leaves its files when not told: under $JUDGEFLOW_HOME."""
    import time

    return judgeflow_home() / "evaluations" / time.strftime("%Y%m%d-%H%M%S")
