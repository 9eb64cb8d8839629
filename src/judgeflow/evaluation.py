"""Judge evaluation: generate verdicts on a held-out verl parquet and score them.

Scoring goes through the same `compute_score` the training reward uses, so "accuracy" at
evaluation and "reward" in training can never disagree about what a well-formed verdict is.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from judgeflow.config import RunConfig
    from judgeflow.engines.generate import Generator

__all__ = ["JudgeEvaluation", "JudgeMode", "evaluate_judge", "judge_rows", "score_judgements"]

JudgeMode = Literal["pointwise", "pairwise", "grrm"]
_COMPLETION_CHARS = 500  # enough to see the verdict and the start of the reasoning in a table
_PREFERENCE_INDEX = {"A": 0, "B": 1}


@dataclass(frozen=True)
class JudgeEvaluation:
    """Metrics for tracking, and one row per example for a table artifact."""

    metrics: dict[str, float]
    predictions: list[dict[str, Any]] = field(default_factory=list)


def params_from(cfg: RunConfig) -> dict[str, Any]:
    """The run config as `evaluate_judge`'s keyword arguments (the HF generator's knobs)."""
    e = cfg.evaluation
    return {
        "mode": cfg.mode,
        "max_new_tokens": e.max_new_tokens,
        "limit": e.limit,
        "batch_size": e.batch_size,
        "temperature": e.temperature,
        "top_p": e.top_p,
        "samples": e.samples,
    }


def evaluate_judge(
    model_dir: str | Path,
    eval_file: str | Path,
    *,
    mode: JudgeMode,
    max_new_tokens: int,
    limit: int | None = None,
    batch_size: int = 8,
    temperature: float = 0.0,
    top_p: float = 1.0,
    samples: int = 1,
    generator: Generator | None = None,
) -> JudgeEvaluation:
    """Verdicts of the model at `model_dir` on the first `limit` rows of `eval_file`.

    Greedy by default; with `samples` > 1 each row is judged that many times (seeds 0..n-1) and
    the metrics average over rows and samples alike, as the GRRM reference reports accuracy.
    """
    import pyarrow.parquet as pq

    if samples > 1 and temperature == 0:
        raise ValueError("samples > 1 needs temperature > 0: greedy decoding repeats itself")
    rows = pq.read_table(str(eval_file)).to_pylist()
    if limit is not None:
        rows = rows[:limit]
    if generator is None:
        from judgeflow.engines.generate import HFGenerator

        generator = HFGenerator(model_dir, batch_size=batch_size)
    judged: list[dict[str, Any]] = []
    for sample in range(samples):
        completions = generator.generate(
            [row["prompt"] for row in rows],
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            seed=sample,
        )
        judged += [{**j, "sample": sample} for j in judge_rows(mode, rows, completions)]
    metrics = _metrics(mode, judged)
    metrics["eval/samples"] = float(samples)
    return JudgeEvaluation(metrics=metrics, predictions=judged)


def score_judgements(
    mode: JudgeMode, rows: Sequence[Mapping[str, Any]], completions: Sequence[str]
) -> dict[str, float]:
    """Metrics for completions against verl rows (`reward_model.ground_truth` holds the label).

    pointwise: `eval/exact_match` (format failures count as misses), `eval/mae` (well-formed
    verdicts only; absent when there are none), `eval/n_valid`; pairwise: `eval/accuracy`;
    grrm: `eval/ranking_reward`, `eval/score_reward`; every mode: `eval/reward_mean`,
    `eval/format_failure_rate`, `eval/n`.
    """
    return _metrics(mode, judge_rows(mode, rows, completions))


def judge_rows(
    mode: JudgeMode, rows: Sequence[Mapping[str, Any]], completions: Sequence[str]
) -> list[dict[str, Any]]:
    """Per-row verdicts: index, label, pred, valid, reward, completion (truncated)."""
    if len(rows) != len(completions):
        raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
    compute_score = importlib.import_module(f"judgeflow.rewards.{mode}").compute_score
    judged = []
    for position, (row, completion) in enumerate(zip(rows, completions, strict=True)):
        truth = (row.get("reward_model") or {}).get("ground_truth")
        result = compute_score(row.get("data_source", ""), completion, truth, row.get("extra_info"))
        extra = row.get("extra_info") or {}
        judged.append(
            {
                "index": extra.get("index", position) if isinstance(extra, Mapping) else position,
                "label": _label(mode, truth),
                "pred": result.get("pred"),
                "valid": int(result["valid_answer"]),
                "reward": float(result["score"]),
                "completion": completion[:_COMPLETION_CHARS],
                **{k: float(v) for k, v in result.items() if k.endswith("_reward")},
            }
        )
    return judged


def _metrics(mode: JudgeMode, judged: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    n = len(judged)
    metrics: dict[str, float] = {"eval/n": float(n)}
    if n == 0:
        return metrics
    valid = [r for r in judged if r["valid"]]
    metrics["eval/reward_mean"] = sum(r["reward"] for r in judged) / n
    metrics["eval/format_failure_rate"] = 1.0 - len(valid) / n
    if mode == "pointwise":
        metrics["eval/exact_match"] = (
            sum(r["valid"] and r["pred"] == r["label"] for r in judged) / n
        )
        metrics["eval/n_valid"] = float(len(valid))
        errors = [abs(r["pred"] - r["label"]) for r in valid if r["label"] is not None]
        if errors:
            metrics["eval/mae"] = sum(errors) / len(errors)
    elif mode == "pairwise":
        hits = sum(r["valid"] and _PREFERENCE_INDEX.get(r["label"]) == r["pred"] for r in judged)
        metrics["eval/accuracy"] = hits / n
    else:
        for part in ("ranking_reward", "score_reward"):
            metrics[f"eval/{part}"] = sum(r.get(part, 0.0) for r in judged) / n
    return metrics


def _label(mode: JudgeMode, truth: Any) -> Any:
    """The label in a readable form for the table: 0-4, "A"/"B", or the GRRM score dict."""
    if isinstance(truth, str) and truth.strip().startswith("{"):
        try:
            truth = json.loads(truth)
        except ValueError:
            return truth
    if mode == "grrm":
        return truth
    if isinstance(truth, Mapping):
        truth = truth.get("helpfulness" if mode == "pointwise" else "preference")
    if mode == "pairwise":
        return truth.strip().upper() if isinstance(truth, str) else None
    if isinstance(truth, str) and truth.strip().isdigit():
        return int(truth.strip())
    if isinstance(truth, int | float) and not isinstance(truth, bool) and math.isfinite(truth):
        return int(truth)
    return None
