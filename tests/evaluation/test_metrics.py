"""Evaluation metrics computed by hand: pointwise confusion and calibration, pairwise swap
consistency on judges whose verdicts follow a known rule, GRRM from the reward's parts, the
spread over samples, per-subset keys, and the files written for a run."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgeflow.data.templates import parse_pairwise, render_pairwise
from judgeflow.engines.generate import Messages
from judgeflow.evaluation import (
    PRIMARY_METRIC,
    JudgeEvaluation,
    evaluate_judge,
    evaluation_rows,
    judge_rows,
    score_judgements,
    write_evaluation_artifacts,
)
from judgeflow.evaluation.metrics import subset_key, summarise
from judgeflow.modes import Mode

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _pointwise_row(label: int, index: int, subset: str | None = None) -> dict[str, Any]:
    return {
        "data_source": "tinyjudge/legs",
        "prompt": [{"role": "user", "content": f"# Query\nq{index}\n"}],
        "reward_model": {"style": "rule", "ground_truth": {"helpfulness": label}},
        "extra_info": {"index": index, "subset": subset},
    }


# (label, completion, subset): what the calibration numbers below are computed from.
POINTWISE = [
    (3, "<think>.</think><score>3</score>", "Precise IF"),
    (0, "<think>.</think><score>1</score>", "Precise IF"),
    (4, "<think>.</think><score>2</score>", "Precise IF"),
    (2, "<think>.</think>no score", None),  # format failure
    (1, "<think>.</think><score>1</score>", None),
    (2, "<think>.</think><score>1</score>", None),
]


def _pointwise_judged() -> list[dict[str, Any]]:
    rows = [_pointwise_row(label, i, subset) for i, (label, _, subset) in enumerate(POINTWISE)]
    return judge_rows("pointwise", rows, [c for _, c, _ in POINTWISE])


def test_pointwise_confusion_calibration_and_subsets_by_hand() -> None:
    metrics, details = summarise("pointwise", _pointwise_judged())
    # Well-formed (label, pred): (3,3) (0,1) (4,2) (1,1) (2,1); one format failure.
    # Given 1: labels 0, 1, 2 (mean 1, gap 0); given 2: label 4 (gap 2); given 3: label 3 (gap 0).
    assert metrics == pytest.approx(
        {
            "eval/subset/Precise_IF/exact_match": 1 / 3,
            "eval/subset/Precise_IF/format_failure_rate": 0.0,
            "eval/subset/Precise_IF/n": 3,
            "eval/subset/tinyjudge_legs/exact_match": 1 / 3,
            "eval/subset/tinyjudge_legs/format_failure_rate": 1 / 3,
            "eval/subset/tinyjudge_legs/n": 3,
            "eval/n": 6,
            "eval/n_valid": 5,
            "eval/exact_match": 2 / 6,
            "eval/mae": (0 + 1 + 2 + 0 + 1) / 5,
            "eval/calibration_error": (3 * 0 + 1 * 2 + 1 * 0) / 5,
            "eval/format_failure_rate": 1 / 6,
            "eval/reward_mean": (1 + 0 + 0.5 + 0 + 1 + 0.75) / 6,
            "eval/samples": 1,
        }
    )
    assert details["confusion"]["pred"] == ["0", "1", "2", "3", "4", "format_failure"]
    assert details["confusion"]["counts"] == [
        [0, 1, 0, 0, 0, 0],  # true 0
        [0, 1, 0, 0, 0, 0],  # true 1
        [0, 1, 0, 0, 0, 1],  # true 2: once 1, once no verdict
        [0, 0, 0, 1, 0, 0],  # true 3
        [0, 0, 1, 0, 0, 0],  # true 4
    ]
    assert details["calibration"] == [
        {"pred": 0, "n": 0, "mean_label": None, "exact": None},
        {"pred": 1, "n": 3, "mean_label": 1.0, "exact": pytest.approx(1 / 3)},
        {"pred": 2, "n": 1, "mean_label": 4.0, "exact": 0.0},
        {"pred": 3, "n": 1, "mean_label": 3.0, "exact": 1.0},
        {"pred": 4, "n": 0, "mean_label": None, "exact": None},
    ]
    assert details["primary_metric"] == {"name": "exact_match", "value": 2 / 6, "std": None}
    assert [s["subset"] for s in details["subsets"]] == ["Precise IF", "tinyjudge/legs"]
    json.dumps(details, allow_nan=False)  # crosses a Slurm job as JSON


def test_subset_keys_are_one_metric_name_segment() -> None:
    assert subset_key("Precise IF") == "Precise_IF"
    assert subset_key("tinyjudge/legs") == "tinyjudge_legs"
    assert subset_key("Factuality") == "Factuality"
    assert PRIMARY_METRIC == {
        "pointwise": "exact_match",
        "pairwise": "consistent_accuracy",
        "grrm": "ranking_accuracy",
        "rlvr": "verifiable_correct_rate",
    }


# ------------------------------------------------------------------------------------ pairwise

# (query, better response, worse response, subset); the better one is longer in pairs 0 and 1.
PAIRS = [
    ("q0", "GOOD answer, long and careful", "BAD", "Precise IF"),
    ("q1", "GOOD answer, also the longer", "BAD one", "Precise IF"),
    ("q2", "GOOD", "BAD answer, long but wrong", "Math"),
    ("q3", "GOOD ok", "BAD answer that rambles on", "Math"),
]

Rule = Callable[[str, str], str]  # (response A, response B) -> reply


def _verdict(letter: str) -> str:
    return f"<think>compared</think><better>{letter}</better>"


RULES: dict[str, Rule] = {
    "always_a": lambda a, b: _verdict("A"),
    "always_right": lambda a, b: _verdict("A" if a.startswith("GOOD") else "B"),
    "longer_wins": lambda a, b: _verdict("A" if len(a) >= len(b) else "B"),
    "fails_when_better_second": lambda a, b: _verdict("A") if a.startswith("GOOD") else "hmm",
}

# Every pair in both orders: 4 pairs, 8 verdicts; numbers per rule computed by hand.
EXPECTED: dict[str, dict[str, float]] = {
    # A every time: right whenever the better one is shown first (half the verdicts), never
    # in both orders of a pair.
    "always_a": {"accuracy": 0.5, "consistency": 0.0, "consistent_accuracy": 0.0,
                 "position_bias": 1.0, "format_failure_rate": 0.0},
    "always_right": {"accuracy": 1.0, "consistency": 1.0, "consistent_accuracy": 1.0,
                     "position_bias": 0.5, "format_failure_rate": 0.0},
    # Follows content (consistent in every pair) but is right only in pairs 0 and 1.
    "longer_wins": {"accuracy": 0.5, "consistency": 1.0, "consistent_accuracy": 0.5,
                    "position_bias": 0.5, "format_failure_rate": 0.0},
    # Right in the better-first order, a format failure in the other: no pair counts.
    "fails_when_better_second": {"accuracy": 0.5, "consistency": 0.0,
                                 "consistent_accuracy": 0.0, "position_bias": 1.0,
                                 "format_failure_rate": 0.5},
}  # fmt: skip
EXPECTED_SWAPS = {
    "always_a": {"always_A": 4},
    "always_right": {"correct_both": 4},
    "longer_wins": {"correct_both": 2, "wrong_both": 2},
    "fails_when_better_second": {"format_failure": 4},
}
EXPECTED_SUBSET = {  # consistent_accuracy per subset
    "always_a": (0.0, 0.0),
    "always_right": (1.0, 1.0),
    "longer_wins": (0.0, 1.0),  # Math, Precise IF (sorted by name)
    "fails_when_better_second": (0.0, 0.0),
}


class RuleJudge:
    """A `Generator` whose verdict follows a known rule over the two responses it is shown;
    with one rule per seed, each sample follows its own rule."""

    def __init__(self, *rules: Rule) -> None:
        self.rules = rules
        self.seen: list[str] = []

    def generate(
        self,
        prompts: Sequence[Messages],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> list[str]:
        replies = []
        for prompt in prompts:
            content = prompt[-1]["content"]
            parts = parse_pairwise(content)
            assert parts is not None, "the judge was shown a prompt that is not the template"
            self.seen.append(content)
            replies.append(self.rules[seed](parts[1], parts[2]))
        return replies


def _pair_row(i: int, better_first: bool, **extra: Any) -> dict[str, Any]:
    query, good, bad, subset = PAIRS[i]
    a, b = (good, bad) if better_first else (bad, good)
    return {
        "data_source": "rewardbench2",
        "prompt": [{"role": "user", "content": render_pairwise(query, a, b)}],
        "ability": "judge/pairwise",
        "reward_model": {
            "style": "rule",
            "ground_truth": {"preference": "A" if better_first else "B"},
        },
        "extra_info": {"split": "val", "index": i, "subset": subset, **extra},
    }


def _both_orders() -> list[dict[str, Any]]:
    """What `prepare` writes for validation: each pair's own order, then swapped."""
    return [
        _pair_row(i, better_first, pair=i, swapped=not better_first)
        for i in range(len(PAIRS))
        for better_first in (True, False)
    ]


def _one_order() -> list[dict[str, Any]]:
    """An older file: one row per pair, pairs 1 and 3 written swapped (position balancing)."""
    return [_pair_row(i, i % 2 == 0, swapped=i % 2 == 1) for i in range(len(PAIRS))]


def _parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("layout", ["both_orders", "one_order"])
@pytest.mark.parametrize("rule", list(RULES))
def test_swap_consistency_of_judges_with_known_verdicts(
    rule: str, layout: str, tmp_path: Path
) -> None:
    rows = _both_orders() if layout == "both_orders" else _one_order()
    judge = RuleJudge(RULES[rule])
    result = evaluate_judge(
        "unused", _parquet(rows, tmp_path / "val.parquet"), mode="pairwise",
        max_new_tokens=8, generator=judge,
    )  # fmt: skip
    m = result.metrics
    assert {k: m[f"eval/{k}"] for k in EXPECTED[rule]} == pytest.approx(EXPECTED[rule])
    assert (m["eval/n"], m["eval/pairs"], m["eval/samples"]) == (8, 4, 1)
    swaps = {"pairs": 4, "correct_both": 0, "wrong_both": 0, "always_A": 0, "always_B": 0,
             "format_failure": 0, "incomplete": 0} | EXPECTED_SWAPS[rule]  # fmt: skip
    assert result.details["swaps"] == swaps
    assert result.details["primary_metric"]["value"] == EXPECTED[rule]["consistent_accuracy"]
    math_, precise = EXPECTED_SUBSET[rule]
    assert m["eval/subset/Math/consistent_accuracy"] == math_
    assert m["eval/subset/Precise_IF/consistent_accuracy"] == precise
    assert m["eval/subset/Precise_IF/n"] == 4  # 2 pairs x 2 orders
    # Every pair was shown both ways; each prediction says which pair and which order it is.
    shown = {(p[0], p[1]) for p in map(parse_pairwise, judge.seen) if p is not None}
    assert shown == {(q, x) for q, good, bad, _ in PAIRS for x in (good, bad)}
    table = result.predictions
    assert sorted((r["pair"], r["swapped"]) for r in table) == [
        (i, s) for i in range(4) for s in (False, True)
    ]
    assert {r["subset"] for r in table} == {"Precise IF", "Math"}
    assert {r["source"] for r in table} == {"rewardbench2"}
    by_pair = {r["pair"]: set() for r in table}
    for r in table:
        by_pair[r["pair"]].add(r["prompt_hash"])
    assert all(len(hashes) == 1 for hashes in by_pair.values())  # one prompt in either order


def test_twins_flip_the_prompt_the_preference_and_the_bookkeeping() -> None:
    row = _pair_row(0, True)
    row["reward_model"]["ground_truth"] = '{"preference": "A", "margin": 2}'  # JSON stays JSON
    row["extra_info"]["label"] = "A"
    bare = _pair_row(1, False)
    bare["reward_model"]["ground_truth"] = "b"
    original, twin, _, bare_twin = evaluation_rows("pairwise", [row, bare])
    assert original["prompt"] == row["prompt"] and original["extra_info"]["pair"] == 0
    assert twin["prompt"][0]["content"] == render_pairwise("q0", "BAD", PAIRS[0][1])
    assert json.loads(twin["reward_model"]["ground_truth"]) == {"preference": "B", "margin": 2}
    assert (twin["extra_info"]["pair"], twin["extra_info"]["swapped"]) == (0, True)
    assert twin["extra_info"]["label"] == "B" and row["extra_info"]["label"] == "A"
    assert bare_twin["reward_model"]["ground_truth"] == "A"
    assert bare_twin["extra_info"]["pair"] == 1
    assert evaluation_rows("pointwise", [row]) == [row]  # other modes: as they are


def test_a_row_alone_in_its_pair_gets_its_twin() -> None:
    """A train split from `prepare`: one order per pair, each with its pair id."""
    rows = [_pair_row(2, True, pair=7, swapped=False), *_both_orders()[:2]]
    out = evaluation_rows("pairwise", rows)
    assert [(r["extra_info"]["pair"], r["extra_info"]["swapped"]) for r in out] == [
        (7, False), (7, True), (0, False), (0, True),
    ]  # fmt: skip


def test_rows_that_cannot_be_paired_are_errors_naming_them() -> None:
    broken = _pair_row(1, True)
    broken["prompt"] = [{"role": "user", "content": "which is better, A or B?"}]
    with pytest.raises(ValueError, match="row 1: its prompt is not the pairwise judge template"):
        evaluation_rows("pairwise", [_pair_row(0, True), broken])
    no_label = _pair_row(0, True)
    no_label["reward_model"]["ground_truth"] = {"preference": "tie"}
    with pytest.raises(ValueError, match="row 0: reward_model.ground_truth has no A/B"):
        evaluation_rows("pairwise", [no_label])
    same = [_pair_row(0, True, pair=0), _pair_row(0, True, pair=0)]
    with pytest.raises(ValueError, match="pair 0: expected its two orders"):
        evaluation_rows("pairwise", same)
    with pytest.raises(ValueError, match="row 1 has no extra_info.pair but row 0 has one"):
        evaluation_rows("pairwise", [_pair_row(0, True, pair=0), _pair_row(1, True)])


# ------------------------------------------------------------------------------------ samples


def test_samples_report_the_mean_and_the_spread(tmp_path: Path) -> None:
    judge = RuleJudge(RULES["always_right"], RULES["always_a"])  # seed 0, seed 1
    result = evaluate_judge(
        "unused", _parquet(_both_orders(), tmp_path / "val.parquet"), mode="pairwise",
        max_new_tokens=8, samples=2, temperature=1.0, generator=judge,
    )  # fmt: skip
    m = result.metrics
    sd = 0.5**0.5  # sample std (n - 1) of two values 1 apart: |1 - 0| / sqrt(2)
    assert m["eval/consistent_accuracy"] == 0.5 and m["eval/consistent_accuracy_std"] == pytest.approx(sd)  # fmt: skip
    assert m["eval/accuracy"] == 0.75 and m["eval/accuracy_std"] == pytest.approx(0.5 * sd)
    assert m["eval/position_bias"] == 0.75 and m["eval/position_bias_std"] == pytest.approx(0.5 * sd)  # fmt: skip
    assert m["eval/format_failure_rate_std"] == 0.0
    assert (m["eval/n"], m["eval/pairs"], m["eval/samples"]) == (8, 4, 2)  # per sample
    assert "eval/n_std" not in m and "eval/pairs_std" not in m
    # Breakdowns pool the samples: 4 of 8 pair judgements right in both orders.
    assert m["eval/subset/Precise_IF/consistent_accuracy"] == 0.5
    assert m["eval/subset/Precise_IF/n"] == 4
    assert result.details["swaps"]["pairs"] == 8
    assert [s["consistent_accuracy"] for s in result.details["per_sample"]] == [1.0, 0.0]
    assert result.details["primary_metric"] == {
        "name": "consistent_accuracy", "value": 0.5, "std": pytest.approx(sd)
    }  # fmt: skip
    assert len(result.predictions) == 16


def test_a_metric_a_sample_cannot_define_is_averaged_over_the_others() -> None:
    rows = [_pointwise_row(2, 0), _pointwise_row(4, 1)]
    exact = judge_rows("pointwise", rows, ["<score>2</score>", "<score>3</score>"])
    broken = judge_rows("pointwise", rows, ["none", "none"])
    judged = [{**r, "sample": 0} for r in exact] + [{**r, "sample": 1} for r in broken]
    metrics, _ = summarise("pointwise", judged, samples=2)
    assert metrics["eval/exact_match"] == 0.25  # (1/2 + 0) / 2
    assert metrics["eval/mae"] == 0.5 and "eval/mae_std" not in metrics  # sample 0 only


# ------------------------------------------------------------------------------------ grrm


GRRM_TRUTH = json.dumps({"A": 9, "B": 5, "C": 1})
GRRM_ROWS = [
    {"data_source": "grrm", "prompt": [{"role": "user", "content": "rank"}],
     "reward_model": {"style": "rule", "ground_truth": GRRM_TRUTH}, "extra_info": {"index": i}}
    for i in range(3)
]  # fmt: skip
GRRM_COMPLETIONS = [
    "A is best.\n### Final Ranking:\nA > B > C\n### Scores:\nA: 9, B: 5, C: 1",
    # B vs C reversed: 2 of 3 pairs ordered right; margins off by 2, 5 and 7 -> 0.2, 0, 0
    "A is best.\n### Final Ranking:\nA > C > B\n### Scores:\nA: 8, C: 5, B: 2",
    "no ranking at all",
]


def test_grrm_metrics_are_the_reward_parts() -> None:
    rows, completions = GRRM_ROWS, GRRM_COMPLETIONS
    judged = judge_rows("grrm", rows, completions)
    assert [r["ranking_reward"] for r in judged] == pytest.approx([1.0, 2 / 3, 0.0])
    assert [r["score_reward"] for r in judged] == pytest.approx([1.0, 0.2 / 3, 0.0])
    metrics = score_judgements("grrm", rows, completions)
    assert {k: v for k, v in metrics.items() if "/subset/" not in k} == pytest.approx(
        {
            "eval/n": 3,
            "eval/reward_mean": (2 + 2 / 3 + 0.2 / 3 + 0) / 3,
            "eval/format_failure_rate": 1 / 3,
            "eval/ranking_accuracy": (1 + 2 / 3 + 0) / 3,
            "eval/score_agreement": (1 + 0.2 / 3 + 0) / 3,
            "eval/validity": 2 / 3,
            "eval/samples": 1,
        }
    )
    assert metrics["eval/subset/grrm/ranking_accuracy"] == metrics["eval/ranking_accuracy"]


def _policy_row(question: str, truth: list[str], datasets: list[str]) -> dict[str, Any]:
    return {
        "data_source": datasets[0],
        "prompt": [{"role": "user", "content": question}],
        "reward_model": {"style": "rule", "ground_truth": truth},
        "extra_info": {"dataset": datasets, "index": 0},
    }


RLVR_ROWS = [
    _policy_row("Which is an animal: cat or cup?", ["cat"], ["string_matcher"]),
    _policy_row("Which is larger: 3 or 7?", ["7"], ["gsm8k"]),
    _policy_row("Which is larger: 2 or 5?", ["5"], ["gsm8k"]),
    _policy_row("How many legs has a cat?", ["4", "4"], ["gsm8k", "string_matcher"]),
]
RLVR_COMPLETIONS = [
    "<think>an animal</think><answer>cat</answer>",  # right, in the R1 format
    "<answer>7</answer>",  # right, without </think>: a format failure
    "<think>hm</think><answer>2</answer>",  # wrong
    "<think>count</think><answer>4</answer>",  # both verifiers pay
]


@pytest.mark.parametrize(
    ("r1_style_format", "rewards", "format_failures"),
    [("gated", [1.0, 0.0, 0.0, 2.0], 1 / 4), ("additive", [1.5, 1.0, 0.5, 2.5], 1 / 4),
     ("off", [1.0, 1.0, 0.0, 2.0], 0.0)],
)  # fmt: skip
def test_a_policys_metrics_are_its_verifiers_verdicts(
    r1_style_format: str, rewards: list[float], format_failures: float
) -> None:
    """verifiable_correct_rate counts what some verifier paid, the format aside (open-instruct's
    metric); the format only moves reward_mean and format_failure_rate."""
    rules = {"verification_reward": 1.0, "r1_style_format": r1_style_format,
             "r1_style_format_reward": 0.5}  # fmt: skip
    judged = judge_rows("rlvr", RLVR_ROWS, RLVR_COMPLETIONS, rules)
    assert [r["reward"] for r in judged] == rewards
    assert [r["subset"] for r in judged] == [
        "string_matcher", "gsm8k", "gsm8k", "gsm8k+string_matcher",
    ]  # fmt: skip
    metrics, details = summarise("rlvr", judged)
    assert metrics["eval/verifiable_correct_rate"] == 3 / 4
    assert metrics["eval/format_failure_rate"] == format_failures
    assert metrics["eval/reward_mean"] == pytest.approx(sum(rewards) / 4)
    assert metrics["eval/verifiable_reward_mean"] == pytest.approx((1 + 1 + 0 + 2) / 4)
    assert metrics["eval/verifier_cut_short"] == 0.0
    assert metrics["eval/subset/gsm8k/verifiable_correct_rate"] == 1 / 2
    assert metrics["eval/subset/string_matcher/verifiable_correct_rate"] == 1.0
    assert metrics["eval/subset/gsm8k_string_matcher/verifiable_correct_rate"] == 1.0
    assert details["primary_metric"]["name"] == PRIMARY_METRIC["rlvr"] == "verifiable_correct_rate"


def test_a_judge_paid_evaluation_reports_the_judges_failures_over_its_rows_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three rows the judge pays and one gsm8k row: one reply did not parse, one pairwise
    verdict changed with the order; each rate is a third (a mean over all rows: a quarter)."""
    from judgeflow.inference import judge_reward

    class Scripted:
        mode = "pairwise"

        def verdicts(self, rows: Sequence[Any]) -> list[dict[str, Any]]:
            flipped = {"valid": True, "consistent": False, "better": "A"}
            script = [{"valid": False}, flipped, {"valid": True, "consistent": True, "better": "A"}]
            return [dict(v) for v in script[: len(rows)]]

    monkeypatch.setattr(judge_reward, "client_for", lambda settings: Scripted())
    rows = [_policy_row(f"Question {i}?", [f"Reference {i}."], ["judge"]) for i in range(3)]
    settings = {"r1_style_format": "off", "judge_weights": "/unused", "judge_mode": "pairwise",
                "judge_datasets": ["judge"], "judge_max_new_tokens": 8}  # fmt: skip
    judged = judge_rows("rlvr", [*rows, RLVR_ROWS[1]], ["A.", "B.", "C.", "7"], settings)
    assert [r["judge_inconsistent"] for r in judged] == [0.0, 1.0, 0.0, 0.0]
    metrics, _ = summarise("rlvr", judged)
    assert metrics["eval/judged_n"] == 3
    assert metrics["eval/judge_format_failure_rate"] == pytest.approx(1 / 3)
    assert metrics["eval/judge_inconsistent_rate"] == pytest.approx(1 / 3)


def test_each_judge_paid_evaluation_checks_the_failure_limit_over_its_own_rollouts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Evaluations in one process (before, after, the champion's, another run's) do not add
    up: two of 40 rollouts, all failed, each stay under the limit's minimum (64); one of 70
    does not."""
    from judgeflow.inference import judge_reward
    from judgeflow.inference.judge_failures import JUDGE_FAILURE_MIN, JudgeFailing

    class Failing:
        mode = "pairwise"

        def verdicts(self, rows: Sequence[Any]) -> list[dict[str, Any]]:
            return [{"valid": False} for _ in rows]

    judge = Failing()  # one client for every evaluation, as `client_for` keeps one per judge
    monkeypatch.setattr(judge_reward, "client_for", lambda settings: judge)
    settings = {"r1_style_format": "off", "judge_weights": "/unused", "judge_mode": "pairwise",
                "judge_datasets": ["judge"], "judge_max_new_tokens": 8,
                "judge_max_failure_rate": 0.5}  # fmt: skip

    def evaluate(n: int) -> list[dict[str, Any]]:
        rows = [_policy_row(f"Question {i}?", [f"Reference {i}."], ["judge"]) for i in range(n)]
        return judge_rows("rlvr", rows, ["An answer."] * n, settings)

    assert 40 < JUDGE_FAILURE_MIN <= 2 * 40
    for _ in range(2):
        assert [r["judge_format_failure"] for r in evaluate(40)] == [1.0] * 40
    with pytest.raises(JudgeFailing, match="70 of the last 70 rollouts"):
        evaluate(JUDGE_FAILURE_MIN + 6)


def test_a_policys_runaway_answer_is_cut_short_counted_and_paid_nothing() -> None:
    rules = {"verification_reward": 1.0, "r1_style_format": "off", "verifier_max_chars": 50}
    long_answer = "7 " * 100
    judged = judge_rows("rlvr", RLVR_ROWS[1:2], [long_answer], rules)
    assert judged[0]["reward"] == 0.0
    metrics, _ = summarise("rlvr", judged)
    assert metrics["eval/verifier_cut_short"] == 1.0
    assert metrics["eval/verifiable_correct_rate"] == 0.0


# ------------------------------------------------------------------------------------ files


def _evaluation(mode: Mode) -> JudgeEvaluation:
    if mode == "pointwise":
        judged = _pointwise_judged()
    elif mode == "grrm":
        judged = judge_rows("grrm", GRRM_ROWS, GRRM_COMPLETIONS)
    elif mode == "rlvr":
        judged = judge_rows("rlvr", RLVR_ROWS, RLVR_COMPLETIONS)
    else:
        rows = evaluation_rows("pairwise", _one_order())
        judged = judge_rows("pairwise", rows, RuleJudge(RULES["longer_wins"]).generate(
            [r["prompt"] for r in rows], max_new_tokens=8))  # fmt: skip
    metrics, details = summarise(mode, judged)
    return JudgeEvaluation(metrics, judged, details)


@pytest.mark.parametrize(
    ("mode", "pictures"),
    [("pointwise", ["after_confusion.png", "after_subsets.png"]),
     ("pairwise", ["after_subsets.png"]), ("grrm", ["after_subsets.png"]),
     ("rlvr", ["after_subsets.png"])],
)  # fmt: skip
def test_evaluation_artifacts_are_real_pngs_and_the_details(
    mode: Mode, pictures: list[str], tmp_path: Path
) -> None:
    evaluation = _evaluation(mode)
    paths = write_evaluation_artifacts(evaluation, mode, "after", tmp_path / "out", title="m1")
    assert sorted(p.name for p in paths) == sorted(["after_details.json", *pictures])
    assert json.loads((tmp_path / "out" / "after_details.json").read_text()) == evaluation.details
    for name in pictures:
        data = (tmp_path / "out" / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000
