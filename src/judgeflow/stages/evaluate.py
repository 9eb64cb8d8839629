"""The evaluation stage: a judge's metrics and predictions on the validation rows."""

from __future__ import annotations

from typing import Any

from judgeflow.config import RunConfig
from judgeflow.stages.common import PreparedData, fetch


def evaluate_stage(cfg: RunConfig, model_dir: str, data: PreparedData) -> dict[str, Any]:
    """Judge metrics of `model_dir` on the validation split (predictions for a table)."""
    from judgeflow.evaluation import evaluate_judge, params_from

    if not data.val_file:
        return {"metrics": {}, "rows": []}
    model = fetch(cfg, model_dir)  # a model in the store: its verified local copy
    result = evaluate_judge(model, fetch(cfg, data.val_file), **params_from(cfg))
    return {"metrics": dict(result.metrics), "rows": list(result.predictions)}
