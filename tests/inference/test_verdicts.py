"""A judge's verdicts on unlabeled rows: the trained prompt, the reward's own parser, and both
orders of a pair. Replies are scripted through the `Generator` interface so each parsing rule is
pinned; the real model runs in test_pyfunc.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from judgeflow.data.templates import parse_pairwise, parse_pointwise
from judgeflow.inference import judge, judge_prompts, parse_reply


class Scripted:
    """A generator that answers with the given replies, in order, and keeps the prompts."""

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies, self.prompts = list(replies), []  # type: list[str], list[Any]

    def generate(self, prompts: Any, *, max_new_tokens: int, **_: Any) -> list[str]:
        self.prompts += list(prompts)
        assert len(prompts) == len(self.replies)
        return self.replies


def test_a_pointwise_verdict_is_the_score_the_reward_would_read() -> None:
    gen = Scripted(
        ["<think>clear and right</think><score>3</score>", "no tags", "<score>9</score>"]
    )
    rows = [{"query": "q", "response": f"r{i}"} for i in range(3)]
    verdicts = judge(gen, "pointwise", rows, max_new_tokens=8)
    assert verdicts[0] == {"score": 3, "reasoning": "clear and right", "valid": True}
    assert verdicts[1] == {"score": None, "reasoning": "", "valid": False}
    assert verdicts[2]["score"] is None and not verdicts[2]["valid"]  # 9 is not 0-4
    assert parse_pointwise(gen.prompts[1][0]["content"]) == ("q", "r1")  # the trained template


@pytest.mark.parametrize(
    ("given", "swapped", "better", "consistent", "valid"),
    [
        ("<better>A</better>", "<better>B</better>", "A", True, True),
        ("<better>A</better>", "<better>A</better>", "A", False, True),  # position bias
        ("<better>B</better>", "nothing", "B", False, False),
        ("nothing", "<better>B</better>", None, False, False),
    ],
)
def test_a_pair_is_judged_in_both_orders(
    given: str, swapped: str, better: str | None, consistent: bool, valid: bool
) -> None:
    gen = Scripted([given, swapped])
    [verdict] = judge(gen, "pairwise", [{"query": "q", "response_a": "a", "response_b": "b"}], max_new_tokens=8)  # fmt: skip
    assert (verdict["better"], verdict["consistent"], verdict["valid"]) == (
        better,
        consistent,
        valid,
    )
    orders = [parse_pairwise(p[0]["content"]) for p in gen.prompts]
    assert orders == [("q", "a", "b"), ("q", "b", "a")]


def test_a_row_without_a_field_is_named() -> None:
    with pytest.raises(ValueError, match=r"row 1: field 'response' must be a non-empty string"):
        judge_prompts("pointwise", [{"query": "q", "response": "r"}, {"query": "q"}])
    with pytest.raises(ValueError, match=r"row 0: field 'response_b'.*got int: '7'"):
        judge_prompts("pairwise", [{"query": "q", "response_a": "a", "response_b": 7}])


def test_a_reasoning_is_what_the_think_tags_hold() -> None:
    reply = "<think>\n A is precise. \n</think>\n<better>a</better>"
    assert parse_reply("pairwise", reply) == {
        "better": "A",
        "reasoning": "A is precise.",
        "valid": True,
    }


GROUP = {
    "source": "Das Haus ist klein.",
    "translations": ["The house is small.", "House small is.", "The home is little."],
    "source_lang": "de",
    "target_lang": "en",
}


def test_a_grrm_verdict_is_the_ranking_and_a_score_per_translation_in_order() -> None:
    from judgeflow.data.grrm_template import language_name, render_grrm_prompt

    good = "A is exact; C is close; B is broken.\n\n### Final Ranking:\n\nA > C > B\n\n### Scores:\n\nA: 9, B: 2, C: 7"
    disagrees = good.replace("A > C > B", "C > A > B")  # the ranking contradicts the scores
    missing = good.replace(", C: 7", "")  # a translation left unscored
    gen = Scripted([good, disagrees, missing])
    verdicts = judge(gen, "grrm", [GROUP] * 3, max_new_tokens=64)
    assert verdicts[0] == {"ranking": "A > C > B", "scores": [9, 2, 7],
                           "reasoning": "A is exact; C is close; B is broken.", "valid": True}  # fmt: skip
    assert [v["valid"] for v in verdicts] == [True, False, False]
    assert verdicts[1]["scores"] is None and verdicts[1]["ranking"] is None
    assert gen.prompts[0][0]["content"] == render_grrm_prompt(
        language_name("de"), language_name("en"), GROUP["source"], GROUP["translations"]
    )  # the prompt GRRM trained on, translations labelled A, B, C in the order given


@pytest.mark.parametrize(
    ("change", "field"),
    [({"translations": ["only one"]}, "translations"), ({"source_lang": "xx"}, "source_lang"),
     ({"source": ""}, "source")],
)  # fmt: skip
def test_a_grrm_row_that_cannot_be_a_prompt_names_its_field(change: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"row 0: field '{field}'"):
        judge_prompts("grrm", [{**GROUP, **change}])
