"""Judge evaluation: generate verdicts on a held-out verl parquet and score them.

Scoring goes through the same `compute_score` the training reward uses (`judge_rows`, the one
place completions are scored), so "accuracy" at evaluation and "reward" in training can never
disagree about what a well-formed verdict is. The metrics, breakdowns and tables are computed
from those scored rows in `judgeflow.evaluation.metrics`; `judgeflow.evaluation.plots` draws them and
`judgeflow.console` prints them.

Pairwise judges are evaluated on every pair in both orders: a judge that prefers whatever is
shown first scores 0.5 accuracy but 0 consistency, and only `consistent_accuracy` (its primary
metric) tells the two apart.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgeflow.evaluation.metrics import PRIMARY_METRIC, summarise
from judgeflow.modes import Mode
from judgeflow.rewards import reward_function

if TYPE_CHECKING:
    from judgeflow.config import RunConfig
    from judgeflow.engines.generate import Generator

__all__ = [
    "PRIMARY_METRIC",
    "JudgeEvaluation",
    "evaluate_judge",
    "evaluation_rows",
    "judge_rows",
    "params_from",
    "read_rows",
    "score_judgements",
]

_COMPLETION_CHARS = 500  # enough to see the verdict and the start of the reasoning in a table
_FLIPPED = {"A": "B", "B": "A"}
#: The reward's parts each judged row keeps (policy RLVR adds its verifier_cut_short count).
_REPORTED_PARTS = (
    "_reward", "_cut_short", "_f1", "_inconsistent", "judged", "judge_format_failure"
)  # fmt: skip


@dataclass(frozen=True)
class JudgeEvaluation:
    """Metrics for tracking, one row per verdict for a table artifact, and the details behind
    the metrics (JSON-serialisable: it crosses a Slurm job; layout in `evaluation_metrics`).

    `details`: `mode`, `samples`, `primary_metric` (`name`, `value`, `std`), `metrics` (the
    overall metrics without the `eval/` prefix), `per_sample` (one dict of metrics per sample),
    `subsets` (one row per subset); pointwise adds `confusion` and `calibration`, pairwise
    `swaps`.
    """

    metrics: dict[str, float]
    predictions: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


def params_from(cfg: RunConfig) -> dict[str, Any]:
    """The run config as `evaluate_judge`'s keyword arguments (the HF generator's knobs)."""
    e = cfg.evaluation
    rules = {"reward_kwargs": cfg.policy_reward_kwargs()} if cfg.mode == "rlvr" else {}
    stop = cfg.grpo.stop_strings if cfg.resolved_engine == "trl" else []  # verl cannot stop
    stops = {"stop_strings": list(stop)} if stop else {}
    template = cfg.data.chat_template_jinja if cfg.mode == "rlvr" else None
    templates = {"chat_template": template} if template is not None else {}
    return {
        **rules,
        **stops,
        **templates,
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
    mode: Mode,
    max_new_tokens: int,
    limit: int | None = None,
    batch_size: int = 8,
    temperature: float = 0.0,
    top_p: float = 1.0,
    samples: int = 1,
    generator: Generator | None = None,
    reward_kwargs: Mapping[str, Any] | None = None,
    stop_strings: Sequence[str] = (),
    chat_template: str | None = None,
) -> JudgeEvaluation:
    """Verdicts of the model at `model_dir` on the first `limit` rows of `eval_file`.

    Pairwise: every pair is judged in both orders, the file's two rows or a row and the twin
    `evaluation_rows` builds for it (a row alone in its pair, or an older file). Greedy by default; with `samples` > 1 each row is judged that many times (seeds 0..n-1) and
    each metric is reported as the mean over samples with its spread (`summarise`).
    `stop_strings` end a reply where one appears (`grpo.stop_strings`, as the policy trained);
    `chat_template` (Jinja, `data.chat_template`) renders the prompts, as the policy trained.
    """
    if samples > 1 and temperature == 0:
        raise ValueError("samples > 1 needs temperature > 0: greedy decoding repeats itself")
    rows = evaluation_rows(mode, read_rows(eval_file, limit))
    if mode == "rlvr":  # the length verifiers count the text in the evaluated model's tokens
        reward_kwargs = {"length_tokenizer": str(model_dir), **(reward_kwargs or {})}
    if generator is None:
        from judgeflow.engines.generate import HFGenerator

        generator = HFGenerator(
            model_dir,
            batch_size=batch_size,
            stop_strings=tuple(stop_strings),
            chat_template=chat_template,
        )
    judged: list[dict[str, Any]] = []
    for sample in range(samples):
        completions = generator.generate(
            [row["prompt"] for row in rows],
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            seed=sample,
        )
        scored = judge_rows(mode, rows, completions, reward_kwargs)
        judged += [{**j, "sample": sample} for j in scored]
    metrics, details = summarise(mode, judged, samples)
    return JudgeEvaluation(metrics=metrics, predictions=judged, details=details)


def score_judgements(
    mode: Mode, rows: Sequence[Mapping[str, Any]], completions: Sequence[str]
) -> dict[str, float]:
    """Metrics (`eval/…`, see `judgeflow.evaluation.metrics`) of completions against verl rows
    (`reward_model.ground_truth` holds the label); one sample. The pair metrics need rows that
    carry `extra_info.pair` (see `evaluation_rows`)."""
    return summarise(mode, judge_rows(mode, rows, completions))[0]


def judge_rows(
    mode: Mode,
    rows: Sequence[Mapping[str, Any]],
    completions: Sequence[str],
    reward_kwargs: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Per-row verdicts: index, pair, swapped, subset, source, prompt_hash, label, pred, valid,
    reward, the reward's `*_reward` parts and the completion (truncated); a policy's rows also
    its question (`extra_info.query`, truncated: the hacking gate looks for answers copying
    it). `reward_kwargs` go to the reward (`rlvr`: `RlvrConfig.reward_kwargs`, the run's reward
    rules).

    An `rlvr` policy's row has `valid` (its R1 format holds; 1 with the format off),
    `verifiable_reward` (what its verifiers paid) and its verifier(s) as `subset`.

    `subset` is `extra_info.subset` when set (RewardBench2's Factuality, Precise IF, …), else
    `data_source`; `prompt_hash` is what decontamination compares (`row_prompt_hash`).

    A paying judge's `judge_max_failure_rate` is checked over this call's rollouts only (a
    window of its own): whether an evaluation stops must not depend on which evaluations, of
    this run or another, this process ran before it.
    """
    from judgeflow.data.prompt_hashes import row_prompt_hash
    from judgeflow.inference.judge_failures import FailureWindow
    from judgeflow.inference.judge_reward import compute_score as judged_score
    from judgeflow.inference.judge_reward import is_judge_paid

    if len(rows) != len(completions):
        raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
    compute_score = reward_function(mode)
    results: list[Mapping[str, Any]] | None = None
    if mode == "rlvr" and is_judge_paid(reward_kwargs or {}):  # one batch for the judge
        results = list[Mapping[str, Any]]()
        results += judged_score(
            [row.get("data_source", "") for row in rows],
            list(completions),
            [(row.get("reward_model") or {}).get("ground_truth") for row in rows],
            [row.get("extra_info") for row in rows],
            failures=FailureWindow(),
            **(reward_kwargs or {}),
        )
    judged = []
    for position, (row, completion) in enumerate(zip(rows, completions, strict=True)):
        truth = (row.get("reward_model") or {}).get("ground_truth")
        args = (row.get("data_source", ""), completion, truth, row.get("extra_info"))
        result = results[position] if results else compute_score(*args, **(reward_kwargs or {}))
        extra = _extra(row)
        source = str(row.get("data_source") or "")
        if mode == "rlvr":  # a policy: its rows' subset is their verifier(s)
            source = "+".join(extra.get("dataset") or [source])
        judged.append(
            {
                "index": position if extra.get("index") is None else extra["index"],
                "pair": extra.get("pair"),
                "swapped": extra.get("swapped"),
                "subset": str(extra.get("subset") or source),
                "source": source,
                "prompt_hash": row_prompt_hash(mode, row),
                "label": _label(mode, truth),
                "pred": result.get("pred"),
                "valid": int(result["valid_answer"]),
                "reward": float(result["score"]),
                "completion": completion[:_COMPLETION_CHARS],
                **(
                    {"query": str(extra.get("query") or "")[:_COMPLETION_CHARS]}
                    if mode == "rlvr"
                    else {}
                ),
                **{k: float(v) for k, v in result.items() if k.endswith(_REPORTED_PARTS)},
            }
        )
    return judged


def read_rows(eval_file: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The first `limit` rows of a verl parquet (all without a limit), as verl's validation
    reads them, so the HF and verl generators see the same rows."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = pq.read_table(str(eval_file)).to_pylist()
    return rows if limit is None else rows[:limit]


def evaluation_rows(mode: Mode, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows to judge: for pairwise, every pair in both orders; other modes as they are.

    Rows are grouped by `extra_info.pair`. A pair with two rows (what `prepare` writes for
    validation) must hold opposite preferences. A row alone in its pair (a train split, a
    limit that cut a pair) or without a pair id at all (an older judgeflow, another tool) gets
    its twin right after it: the prompt parsed back with `parse_pairwise` and rendered with
    the responses swapped, the preference flipped (also `extra_info.label`), `swapped` negated,
    the same pair id (the row's position when it had none). A row whose prompt is not the
    pairwise template, or whose preference is not A or B, is an error naming its position.
    """
    out = [dict(row) for row in rows]
    if mode != "pairwise":
        return out
    pairs = [_extra(row).get("pair") for row in out]
    missing = [p is None for p in pairs]
    if any(missing) and not all(missing):
        raise ValueError(
            f"row {missing.index(True)} has no extra_info.pair but row {missing.index(False)} "
            "has one: pass rows that all carry a pair id, or none (their twins are then built)"
        )
    if all(missing):
        pairs = list(range(len(out)))
    members: dict[Any, list[int]] = {}
    for position, pair in enumerate(pairs):
        members.setdefault(pair, []).append(position)
    for pair, positions in members.items():
        if len(positions) > 2:
            raise ValueError(f"pair {pair!r}: {len(positions)} rows (rows {positions}), expected 2")
        if len(positions) == 2:
            _check_pair(pair, [out[i] for i in positions])
    judged: list[dict[str, Any]] = []
    for position, (row, pair) in enumerate(zip(out, pairs, strict=True)):
        if len(members[pair]) == 2:
            judged.append(row)
            continue
        extra = _extra(row)
        swapped = bool(extra.get("swapped"))
        judged.append({**row, "extra_info": {**extra, "pair": pair, "swapped": swapped}})
        judged.append(_twin(row, position, pair))
    return judged


def _twin(row: Mapping[str, Any], position: int, pair: Any) -> dict[str, Any]:
    """`row` with A and B exchanged: the prompt, the preference and the bookkeeping."""
    from judgeflow.data.templates import parse_pairwise, render_pairwise

    messages = [dict(m) for m in row.get("prompt") or []]
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    parts = parse_pairwise(str(messages[users[-1]].get("content") or "")) if users else None
    if parts is None:
        raise ValueError(
            f"row {position}: its prompt is not the pairwise judge template, so the swapped "
            "order cannot be built (write both orders with extra_info.pair instead)"
        )
    query, response_a, response_b = parts
    messages[users[-1]]["content"] = render_pairwise(query, response_b, response_a)
    reward = dict(row.get("reward_model") or {})
    truth = _flip_preference(reward.get("ground_truth"))
    if truth is None:
        raise ValueError(
            f"row {position}: reward_model.ground_truth has no A/B preference to flip "
            f"({reward.get('ground_truth')!r})"
        )
    reward["ground_truth"] = truth
    extra = _extra(row)
    extra.update(pair=pair, swapped=not extra.get("swapped"))
    if isinstance(extra.get("label"), str):
        extra["label"] = _flip_preference(extra["label"]) or extra["label"]
    return {**row, "prompt": messages, "reward_model": reward, "extra_info": extra}


def _flip_preference(truth: Any) -> Any:
    """The ground truth with A and B exchanged, in the form it came in; None if it has none."""
    if isinstance(truth, str) and truth.strip().startswith("{"):
        try:
            flipped = _flip_preference(json.loads(truth))
        except ValueError:
            return None
        return None if flipped is None else json.dumps(flipped)
    if isinstance(truth, Mapping):
        letter = _flip_preference(truth.get("preference"))
        return None if letter is None else {**truth, "preference": letter}
    if isinstance(truth, str):
        return _FLIPPED.get(truth.strip().upper())
    return None


def _check_pair(pair: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """The two rows of a pair are its two orders: their preferences are A and B."""
    found = [_label("pairwise", (r.get("reward_model") or {}).get("ground_truth")) for r in rows]
    if sorted(map(str, found)) != ["A", "B"]:
        raise ValueError(
            f"pair {pair!r}: expected its two orders (preferences A and B), got {found}"
        )


def _extra(row: Mapping[str, Any]) -> dict[str, Any]:
    extra = row.get("extra_info")
    return dict(extra) if isinstance(extra, Mapping) else {}


def _label(mode: Mode, truth: Any) -> Any:
    """The label in a readable form for the table: 0-4, "A"/"B", or the GRRM score dict."""
    if isinstance(truth, str) and truth.strip().startswith("{"):
        try:
            truth = json.loads(truth)
        except ValueError:
            return truth
    if mode in ("grrm", "rlvr"):
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
