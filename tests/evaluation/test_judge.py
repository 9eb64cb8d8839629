"""Judge metrics: hand-computed cases through the real reward functions, and the tiny model end to end."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgeflow.engines.generate import Messages
from judgeflow.evaluation import evaluate_judge, judge_rows, score_judgements


def _row(ground_truth: Any, index: int, prompt: str = "judge this") -> dict[str, Any]:
    return {
        "data_source": "test",
        "prompt": [{"role": "user", "content": prompt}],
        "ability": "judge",
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {"split": "test", "index": index},
    }


def _overall(metrics: dict[str, float]) -> dict[str, float]:
    """The metrics without the per-subset breakdown (tests/evaluation/test_metrics.py)."""
    return {k: v for k, v in metrics.items() if not k.startswith("eval/subset/")}


def test_pointwise_metrics_by_hand() -> None:
    rows = [
        _row({"helpfulness": 3}, 10),
        _row(0, 11),
        _row("4", 12),
        _row({"helpfulness": 2}, 13),
        _row({"helpfulness": 1}, 14),
    ]
    completions = [
        "<think>good</think><score>3</score>",  # exact: reward 1
        "<think>meh</think><score>1</score>",  # label 0 pays exact only: reward 0, error 1
        "<score>2</score>",  # label 4: reward 1 - 2/4, error 2
        "no verdict here",  # format failure
        "<think>cut off <score>1</score>",  # open <think>: no verdict, even with the right digit
    ]
    assert _overall(score_judgements("pointwise", rows, completions)) == pytest.approx(
        {
            "eval/n": 5,
            "eval/n_valid": 3,
            "eval/exact_match": 1 / 5,
            "eval/mae": (0 + 1 + 2) / 3,
            # each score given once: |3 - 3|, |1 - 0|, |2 - 4|
            "eval/calibration_error": (0 + 1 + 2) / 3,
            "eval/format_failure_rate": 2 / 5,
            "eval/reward_mean": (1 + 0 + 0.5 + 0 + 0) / 5,
            "eval/samples": 1,
        }
    )


def test_pairwise_metrics_by_hand() -> None:
    rows = [_row({"preference": "A"}, 0), _row("B", 1), _row({"preference": "A"}, 2), _row("B", 3)]
    completions = [
        "<think>A is right</think><better>A</better>",
        "<think>.</think><better> b </better>",  # case and spaces are allowed
        "<think>.</think><better>B</better>",  # wrong
        "<think>.</think><better>C</better>",  # not A or B: format failure
    ]
    # Rows without pair ids: per-verdict numbers only (evaluation_rows adds the other order).
    assert _overall(score_judgements("pairwise", rows, completions)) == pytest.approx(
        {
            "eval/n": 4,
            "eval/accuracy": 0.5,
            "eval/reward_mean": 0.5,
            "eval/format_failure_rate": 0.25,
            "eval/position_bias": 1 / 3,  # A, B, B well-formed
            "eval/pairs": 0,
            "eval/samples": 1,
        }
    )


def test_no_well_formed_verdict_means_no_mae() -> None:
    metrics = score_judgements("pointwise", [_row(2, 0)], ["<score>five</score>"])
    assert "eval/mae" not in metrics
    assert metrics["eval/exact_match"] == 0.0 and metrics["eval/format_failure_rate"] == 1.0


def test_prediction_table_rows() -> None:
    rows = [_row({"helpfulness": 4}, 7), _row({"helpfulness": 1}, 8)]
    long_reply = "<think>" + "x" * 900 + "</think><score>4</score>"
    table = judge_rows("pointwise", rows, [long_reply, "nothing"])
    assert [r["index"] for r in table] == [7, 8]
    assert [r["label"] for r in table] == [4, 1]
    assert [(r["pred"], r["valid"], r["reward"]) for r in table] == [(4, 1, 1.0), (-1, 0, 0.0)]
    assert len(table[0]["completion"]) == 500
    assert (table[0]["subset"], table[0]["source"], table[0]["pair"]) == ("test", "test", None)
    assert len(table[0]["prompt_hash"]) == 16
    pairwise = judge_rows("pairwise", [_row({"preference": "B"}, 0)], ["<better>B</better>"])
    assert (pairwise[0]["label"], pairwise[0]["pred"]) == ("B", 1)


def test_rows_and_completions_must_line_up() -> None:
    with pytest.raises(ValueError, match="2 rows but 1 completions"):
        score_judgements("pointwise", [_row(1, 0), _row(2, 1)], ["<score>1</score>"])


@pytest.fixture(scope="module")
def eval_setup(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> tuple[Path, Path]:
    root, model = tmp_path_factory.mktemp("eval"), tiny_model
    rows = [_row({"helpfulness": i % 5}, i, f"# Query\nq{i}\n# Response\nr{i}\n") for i in range(5)]
    path = root / "test.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return model, path


def test_evaluate_tiny_model_end_to_end(eval_setup: tuple[Path, Path]) -> None:
    model, path = eval_setup
    result = evaluate_judge(model, path, mode="pointwise", max_new_tokens=8, limit=3, batch_size=2)
    assert result.metrics["eval/n"] == 3
    assert {
        "eval/exact_match",
        "eval/format_failure_rate",
        "eval/reward_mean",
    } <= result.metrics.keys()
    assert 0.0 <= result.metrics["eval/format_failure_rate"] <= 1.0
    assert [r["index"] for r in result.predictions] == [0, 1, 2]
    assert [r["label"] for r in result.predictions] == [0, 1, 2]
    assert result.details["primary_metric"]["name"] == "exact_match"
    assert sum(map(sum, result.details["confusion"]["counts"])) == 3


class _FixedReplies:
    """A `Generator` that answers from a list: how another backend (vLLM) plugs in."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.seen: list[Messages] = []

    def generate(
        self,
        prompts: Sequence[Messages],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> list[str]:
        self.seen.extend(prompts)
        return self.replies[: len(prompts)]


def test_evaluate_uses_an_injected_generator(eval_setup: tuple[Path, Path]) -> None:
    _, path = eval_setup
    replies = ["<score>0</score>", "<score>1</score>", "<score>0</score>", "bad"]
    generator = _FixedReplies(replies)
    result = evaluate_judge(
        "unused", path, mode="pointwise", max_new_tokens=8, limit=4, generator=generator
    )
    assert [m[0]["content"] for m in generator.seen][1] == "# Query\nq1\n# Response\nr1\n"
    assert result.metrics["eval/exact_match"] == pytest.approx(2 / 4)
    assert result.metrics["eval/format_failure_rate"] == pytest.approx(1 / 4)


def test_a_policys_evaluation_counts_the_length_verifiers_in_the_models_tokens(
    tmp_path: Path, tiny_model: Path
) -> None:
    """The evaluation sees text only: the evaluated model's tokenizer counts it for the length
    verifiers, as verl's reward function does (judgeflow.rewards.rlvr.compose)."""
    from judgeflow.data.rlvr import prepare_rlvr
    from judgeflow.rewards.rlvr.score import token_counter

    source = tmp_path / "lengths.jsonl"
    row = {"messages": [{"role": "user", "content": "Say two words."}],
           "dataset": "up_to_max_length", "ground_truth": "2"}  # fmt: skip
    source.write_text(json.dumps(row) + "\n")
    path = tmp_path / "lengths.parquet"
    prepare_rlvr([str(source)], path)
    reply = "one two three four"
    over = token_counter(str(tiny_model))(reply) - 2
    assert over > 0
    result = evaluate_judge(
        tiny_model, path, mode="rlvr", max_new_tokens=8, generator=_FixedReplies([reply]),
        reward_kwargs={"r1_style_format": "off", "verification_reward": 1.0,
                       "max_length_verifier_max_length": 100},
    )  # fmt: skip
    assert result.predictions[0]["reward"] == pytest.approx(1 - over / 100)
