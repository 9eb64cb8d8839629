"""Judge quality from scored verdicts: the headline metrics, their breakdowns and the tables
behind them.

`judgeflow.evaluation.judge_rows` scores every completion through the reward function; this
module only counts, so a metric can never disagree with the reward about what a well-formed
verdict is. Everything here is plain Python over the judged rows (dicts with `label`, `pred`,
`valid`, `reward`, the reward's `*_reward` parts, `subset`, `pair`, `sample`).

Metrics (`eval/<name>`; per sample, then averaged, see `summarise`):

- every mode: `n` (rows judged per sample), `reward_mean`, `format_failure_rate`, `samples`;
- pointwise: `exact_match` (a format failure is a miss), `mae` (well-formed verdicts only),
  `n_valid`, `calibration_error` (see `calibration_error`);
- pairwise: `accuracy` (per verdict, both orders), `pairs` (pairs judged in both orders),
  `consistency` (share of pairs whose two verdicts are well-formed and name the same underlying
  response), `consistent_accuracy` (share of pairs judged correctly in both orders),
  `position_bias` (share of `A` among well-formed verdicts; 0.5 is unbiased);
- rlvr (a policy): `verifiable_correct_rate` (share of responses some verifier paid, the
  format aside, as open-instruct reports it), `verifiable_reward_mean`, `verifier_cut_short`
  (checks past the sandbox's bounds, paid 0); `format_failure_rate` is the share without the R1
  format (`</think>` then `<answer>…</answer>`), 0 when `rlvr.r1_style_format=off`; its subsets
  are the rows' verifiers (`gsm8k`, `string_matcher`, a row with two: `gsm8k+ifeval_old`);
  where a trained judge pays rows (`reward.judge`), over those rows: `judged_n`,
  `judge_reward_mean` (what the judge paid), `judge_format_failure_rate` (its replies that did
  not parse, paid 0), `judge_inconsistent_rate` (pairwise: its verdicts that changed with the
  order, paid 0; 0 for other judges) and `reference_f1` (open-instruct's F1 of the answer
  against the row's reference answer: the independent measure the champion gate of a judge-paid
  policy uses);
- grrm: `ranking_accuracy` (mean of the reward's `ranking_reward`: pairwise ranking agreement
  within a group, as the GRRM paper reports it), `score_agreement` (mean `score_reward`),
  `validity` (share of well-formed answers); an invalid answer counts 0 in both means;
- per subset: `subset/<key>/<primary metric>`, `subset/<key>/format_failure_rate`,
  `subset/<key>/n` (see `subset_key`).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from judgeflow.modes import Mode

__all__ = [
    "FORMAT_FAILURE",
    "PRIMARY_METRIC",
    "calibration",
    "calibration_error",
    "confusion_matrix",
    "subset_key",
    "summarise",
    "swap_counts",
]


#: The one number models are ranked by (the registry's champion gate compares it).
PRIMARY_METRIC: dict[str, str] = {
    "pointwise": "exact_match",
    "pairwise": "consistent_accuracy",
    "grrm": "ranking_accuracy",
    "rlvr": "verifiable_correct_rate",
}
#: The confusion matrix's last column: verdicts that were not well-formed.
FORMAT_FAILURE = "format_failure"
SCORES = tuple(range(5))  # the pointwise labels and well-formed predictions
#: Sizes of the evaluation set: the same in every sample, so they get no `_std`.
_SIZES = frozenset({"n", "pairs", "judged_n"})
_LETTER_INDEX = {"A": 0, "B": 1}
#: Per-subset numbers logged as metrics, besides the mode's primary metric.
_SUBSET_LOGGED = ("format_failure_rate", "n")
_NOT_IN_A_NAME = re.compile(r"[^\w\-.]")


def subset_key(subset: str) -> str:
    """`subset` as one segment of an MLflow metric name: every character other than a letter,
    digit, `_`, `-` or `.` becomes `_` (`Precise IF` -> `Precise_IF`, `tinyjudge/legs` ->
    `tinyjudge_legs`), so `eval/subset/<key>/<metric>` always has the metric as its last part."""
    return _NOT_IN_A_NAME.sub("_", subset) or "_"


def summarise(
    mode: Mode, judged: Sequence[Mapping[str, Any]], samples: int | None = None
) -> tuple[dict[str, float], dict[str, Any]]:
    """`(metrics, details)` of judged rows, from one or more samples (their `sample` key).

    Each metric is computed per sample; with more than one sample the metric is the mean over
    samples and `<name>_std` the sample standard deviation across them (n - 1 in the
    denominator: how far one evaluation's number moves when it is sampled again). A metric a
    sample cannot define (`mae` with no well-formed verdict) is averaged over the samples that
    have it. Set sizes (`n`, `pairs`) are per sample and carry no std. The per-subset numbers,
    the confusion matrix, the calibration table and the swap counts pool every sample.

    The subset metrics come first in `metrics`, so code that keys metrics by their last name
    part sees the overall value last.
    """
    by_sample: dict[int, list[Mapping[str, Any]]] = {}
    for row in judged:
        by_sample.setdefault(int(row.get("sample", 0)), []).append(row)
    count = samples or max(1, len(by_sample))
    per_sample = [{"sample": s, **_metrics(mode, by_sample[s])} for s in sorted(by_sample)]
    overall = _aggregate([{k: v for k, v in m.items() if k != "sample"} for m in per_sample])
    if not judged:
        overall = {"n": 0.0}
    subsets = _subset_table(mode, judged, count)
    primary = PRIMARY_METRIC[mode]

    metrics: dict[str, float] = {}
    for row in subsets:
        for name in (primary, *_SUBSET_LOGGED):
            if row.get(name) is not None:
                metrics[f"eval/subset/{row['key']}/{name}"] = float(row[name])
    metrics.update({f"eval/{name}": value for name, value in overall.items()})
    metrics["eval/samples"] = float(count)

    details: dict[str, Any] = {
        "mode": mode,
        "samples": count,
        "primary_metric": {
            "name": primary,
            "value": overall.get(primary),
            "std": overall.get(f"{primary}_std"),
        },
        "metrics": dict(overall),
        "per_sample": per_sample,
        "subsets": subsets,
    }
    if mode == "pointwise":
        details["confusion"] = confusion_matrix(judged)
        details["calibration"] = calibration(judged)
    elif mode == "pairwise":
        details["swaps"] = swap_counts(judged)
    return metrics, details


# ------------------------------------------------------------------------------- per sample


def _metrics(mode: Mode, rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The mode's metrics over `rows` (one sample, or several pooled: pairs are per sample)."""
    n = len(rows)
    metrics: dict[str, float] = {"n": float(n)}
    if n == 0:
        return metrics
    valid = [r for r in rows if r["valid"]]
    metrics["reward_mean"] = sum(float(r["reward"]) for r in rows) / n
    metrics["format_failure_rate"] = 1.0 - len(valid) / n
    if mode == "pointwise":
        metrics["exact_match"] = sum(_correct(mode, r) for r in rows) / n
        metrics["n_valid"] = float(len(valid))
        if valid:
            metrics["mae"] = sum(abs(r["pred"] - r["label"]) for r in valid) / len(valid)
            metrics["calibration_error"] = calibration_error(valid)
    elif mode == "pairwise":
        metrics["accuracy"] = sum(_correct(mode, r) for r in rows) / n
        swaps = swap_counts(rows)
        metrics["pairs"] = float(swaps["pairs"])
        if swaps["pairs"]:
            both = swaps["correct_both"]
            metrics["consistency"] = (both + swaps["wrong_both"]) / swaps["pairs"]
            metrics["consistent_accuracy"] = both / swaps["pairs"]
        if valid:
            metrics["position_bias"] = sum(r["pred"] == 0 for r in valid) / len(valid)
    elif mode == "rlvr":
        metrics["verifiable_correct_rate"] = sum(_correct(mode, r) for r in rows) / n
        verifiable = [float(r.get("verifiable_reward", 0.0)) for r in rows]
        metrics["verifiable_reward_mean"] = sum(verifiable) / n
        metrics["verifier_cut_short"] = sum(float(r.get("verifier_cut_short", 0.0)) for r in rows)
        paid = [r for r in rows if r.get("judged")]
        if paid:  # a trained judge paid these rows: what it paid, and the independent measure
            metrics["judged_n"] = float(len(paid))
            metrics["judge_reward_mean"] = sum(float(r["judge_reward"]) for r in paid) / len(paid)
            metrics["judge_format_failure_rate"] = sum(
                float(r.get("judge_format_failure", 0.0)) for r in paid
            ) / len(paid)
            metrics["judge_inconsistent_rate"] = sum(
                float(r.get("judge_inconsistent", 0.0)) for r in paid
            ) / len(paid)
            metrics["reference_f1"] = sum(float(r["reference_f1"]) for r in paid) / len(paid)
    else:
        metrics["ranking_accuracy"] = sum(float(r.get("ranking_reward", 0.0)) for r in rows) / n
        metrics["score_agreement"] = sum(float(r.get("score_reward", 0.0)) for r in rows) / n
        metrics["validity"] = len(valid) / n
    return metrics


def _correct(mode: Mode, row: Mapping[str, Any]) -> bool:
    """A well-formed verdict equal to the label (pointwise score or pairwise letter); a policy's
    response that its verifiers paid (open-instruct's `verifiable_correct_rate`: format aside)."""
    if mode == "rlvr":
        return float(row.get("verifiable_reward", 0.0)) > 0
    if not row["valid"]:
        return False
    label = row["label"]
    if mode == "pairwise":
        return isinstance(label, str) and row["pred"] == _LETTER_INDEX.get(label)
    return bool(row["pred"] == label)


def _aggregate(per_sample: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """One sample: its metrics. Several: mean per metric, plus `<name>_std` (see `summarise`)."""
    if len(per_sample) == 1:
        return dict(per_sample[0])
    names = list(dict.fromkeys(name for m in per_sample for name in m))
    out: dict[str, float] = {}
    for name in names:
        values = [float(m[name]) for m in per_sample if name in m]
        out[name] = statistics.fmean(values)
        if name not in _SIZES and len(values) > 1:
            out[f"{name}_std"] = statistics.stdev(values)
    return out


# ------------------------------------------------------------------------------- breakdowns


def _subset_table(
    mode: Mode, judged: Sequence[Mapping[str, Any]], samples: int
) -> list[dict[str, Any]]:
    """One row per subset (sorted by name), all samples pooled: `subset` (as in the data),
    `key` (its metric-name form), `n` (rows per sample) and the mode's metrics."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in judged:
        groups.setdefault(str(row.get("subset") or ""), []).append(row)
    table = []
    for name in sorted(groups):
        metrics = _metrics(mode, groups[name])
        for size in _SIZES & metrics.keys():  # pooled counts -> per sample, like eval/n
            metrics[size] /= samples
        table.append({"subset": name, "key": subset_key(name), **metrics})
    return table


def confusion_matrix(judged: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Pointwise counts: `counts[true][pred]`, true label 0-4 by predicted score 0-4, then one
    column for format failures; rows without a usable label are counted in `unlabelled`."""
    counts = [[0] * (len(SCORES) + 1) for _ in SCORES]
    unlabelled = 0
    for row in judged:
        label = row["label"]
        if label not in SCORES:
            unlabelled += 1
            continue
        counts[label][row["pred"] if row["valid"] else len(SCORES)] += 1
    return {
        "true": list(SCORES),
        "pred": [*(str(s) for s in SCORES), FORMAT_FAILURE],
        "counts": counts,
        "unlabelled": unlabelled,
    }


def calibration(judged: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per predicted score 0-4 (well-formed verdicts): how many were given (`n`), the mean true
    label of those rows and the share that was exact (None where a score was never given)."""
    table = []
    for score in SCORES:
        given = [r for r in judged if r["valid"] and r["pred"] == score]
        n = len(given)
        table.append(
            {
                "pred": score,
                "n": n,
                "mean_label": sum(r["label"] for r in given) / n if n else None,
                "exact": sum(r["label"] == score for r in given) / n if n else None,
            }
        )
    return table


def calibration_error(valid: Sequence[Mapping[str, Any]]) -> float:
    """How far a given score is from what it means, in label points: over the well-formed
    verdicts, the count-weighted mean over predicted scores p of |p - mean true label of the rows
    given p|. 0 when every score is right on average; an over-rating judge has it > 0 even when
    its MAE is small. (Expected calibration error with the score itself as the bin.)"""
    by_score: dict[int, list[float]] = {}
    for row in valid:
        by_score.setdefault(int(row["pred"]), []).append(float(row["label"]))
    total = sum(len(labels) for labels in by_score.values())
    gap = sum(abs(sum(p - label for label in labels)) for p, labels in by_score.items())
    return gap / total if total else 0.0


def swap_counts(judged: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Pairwise outcomes per pair judged in both orders (per sample: a pair judged in s samples
    counts s times): `correct_both`, `wrong_both` (consistent but wrong), `always_A` /
    `always_B` (the same letter in both orders: position, not content), `format_failure` (at
    least one verdict not well-formed); they sum to `pairs`. `incomplete`: pair ids without
    exactly two verdicts, left out of the pair metrics."""
    groups: dict[tuple[int, Any], list[Mapping[str, Any]]] = {}
    for row in judged:
        if row.get("pair") is not None:
            groups.setdefault((int(row.get("sample", 0)), row["pair"]), []).append(row)
    counts = dict.fromkeys(
        ("pairs", "correct_both", "wrong_both", "always_A", "always_B", "format_failure"), 0
    )
    counts["incomplete"] = 0
    for members in groups.values():
        if len(members) != 2:
            counts["incomplete"] += 1
            continue
        counts["pairs"] += 1
        first, second = members
        if not (first["valid"] and second["valid"]):
            counts["format_failure"] += 1
        elif first["pred"] == second["pred"]:  # the two orders show the responses swapped
            counts["always_A" if first["pred"] == 0 else "always_B"] += 1
        elif _correct("pairwise", first) and _correct("pairwise", second):
            counts["correct_both"] += 1
        else:
            counts["wrong_both"] += 1
    return counts
