"""The evaluation stage: a judge's metrics and predictions on the validation rows.

It refuses to score a model on rows whose prompt the model trained on (its lineage file, see
`judgeflow.evaluation.decontamination`) unless `evaluation.allow_overlap`, says what the check found
(`details["decontamination"]`: checked, overlap-allowed or unchecked), and names the evaluation
set it measured on (`evaluation_set`), so the registry compares models only on the same one.
Numbers measured with overlap allowed, or on a model without lineage, get a set of their own
(`eval_set_for`: `<set>-overlap`, `<set>-unchecked`), so they are never compared with checked
ones; a model without lineage gets no `eval/overlap_rows` at all: nothing was counted.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from judgeflow.config import RunConfig
from judgeflow.data.io import sha256_file
from judgeflow.stages.common import PreparedData, fetch


def evaluation_set(cfg: RunConfig, eval_file: str | Path) -> str:
    """What makes two evaluations comparable: the evaluation data's content and the settings
    that change what is generated (not the batch size or the engine: both give the same)."""
    from judgeflow.evaluation import params_from

    settings = {k: v for k, v in params_from(cfg).items() if k != "batch_size"}
    blob = json.dumps([sha256_file(eval_file), settings], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def overlap_params(cfg: RunConfig) -> dict[str, Any]:
    """What the contamination check is given for `cfg`."""
    return {"mode": cfg.mode, "allow_overlap": cfg.evaluation.allow_overlap}


def decontamination_of(result: Mapping[str, Any] | None) -> str | None:
    """What the contamination check found for an evaluate-stage result (None: no evaluation)."""
    return ((result or {}).get("details") or {}).get("decontamination")


def evaluate_stage(
    cfg: RunConfig,
    model_dir: str,
    data: PreparedData,
    *,
    workdir: str | Path | None = None,
    data_name: str | None = None,
) -> dict[str, Any]:
    """Judge metrics of `model_dir` on the validation split: `metrics` (`eval/…`), `rows`
    (predictions) and `details` (confusion, breakdowns, overlap, decontamination, evaluation
    set). `data_name` is how errors name the data (default: the validation file)."""
    from judgeflow.evaluation import evaluate_judge, evaluation_rows, params_from, read_rows
    from judgeflow.evaluation.decontamination import check_overlap, eval_set_for

    if not data.val_file:
        return {"metrics": {}, "rows": [], "details": {}}
    model = fetch(cfg, model_dir)  # a model in the store: its verified local copy
    eval_file = fetch(cfg, data.val_file)
    params = params_from(cfg)
    rows = evaluation_rows(cfg.mode, read_rows(eval_file, params["limit"]))
    overlap = check_overlap(
        model, rows, what=data_name or f"the validation data {data.val_file}", **overlap_params(cfg)
    )
    generator = None
    if cfg.resolved_engine == "verl":
        from judgeflow.engines.verl_eval import verl_generator_for

        scratch = workdir or os.environ.get("JUDGEFLOW_STAGE_DIR") or tempfile.mkdtemp()
        train_file = fetch(cfg, data.train_file)
        generator = verl_generator_for(cfg, model, eval_file, train_file, scratch)
    result = evaluate_judge(model, eval_file, generator=generator, **params)
    metrics = dict(result.metrics)
    if overlap.checked:  # unchecked: nothing was counted, so no count (0 would read as clean)
        metrics["eval/overlap_rows"] = float(len(overlap.overlapping))
    eval_set = evaluation_set(cfg, eval_file)
    details = {
        **result.details,
        "overlap": overlap.to_dict(),
        "decontamination": overlap.status,
        "eval_set": eval_set_for(eval_set, overlap.status),  # checked numbers only on `eval_set`
        "model": model_dir,
        "data": data.val_file,
    }
    return {"metrics": metrics, "rows": list(result.predictions), "details": details}
