"""The sample data behind the tiny RLVR demo: a verifiable task a ~0.56M-parameter policy can
learn on CPU, in open-instruct's row format (`messages`, `ground_truth`, `dataset`).

The shipped `samples/rlvr/tinyrlvr*.jsonl` files are this module's output (`judgeflow dev
demo-data DIR --rlvr` writes them again; a test checks they are identical). Two questions, two
verifiers, one answer format (open-instruct's R1 style: `<think>…</think><answer>…</answer>`):

- "Which is an animal: {x} or {y}?" — `string_matcher` (what is inside `<answer>` must be the
  animal), every animal against every object, in both orders;
- "Which is a number: {x} or {y}?" — `gsm8k` (the last number in the reply must be the
  digit), every digit against every object, in both orders.

The pairs of options of each kind are split once, with a fixed seed, into training (`tinyrlvr.jsonl`) and
held-out (`tinyrlvr_val.jsonl`, the tiny profile's `data.val_source`) ones, each pair in both
orders; no held-out question is in any training or SFT row, in either order. The SFT rows (`tinyrlvr_sft.jsonl`, `messages` with the assistant's
reply) are a weak teacher's answers to the training prompts: it always names the first option,
in the right format, so it is right exactly half the time. SFT teaches the format and the
teacher's habit; what GRPO adds — naming the animal, the number — only the verifiers'
reward can teach. `RULES` are the one-line rules a trained policy must beat; the benchmark
scores them on the held-out rows beside the trained policies.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judgeflow.dev.demo_data import write_jsonl_files

__all__ = ["FILES", "RULES", "VAL_SHARE", "demo_rows", "write_demo_data"]

ANIMALS = [
    "cat",
    "dog",
    "horse",
    "cow",
    "sheep",
    "goat",
    "lion",
    "tiger",
    "bear",
    "wolf",
    "fox",
    "mouse",
]
OBJECTS = [
    "chair",
    "table",
    "lamp",
    "spoon",
    "cup",
    "door",
    "bottle",
    "pencil",
    "shoe",
    "clock",
    "bag",
    "box",
]
#: Share of the prompts held out (chosen once, with `_SPLIT_SEED`).
VAL_SHARE = 0.2
_SPLIT_SEED = 20261127
FILES = ("tinyrlvr.jsonl", "tinyrlvr_val.jsonl", "tinyrlvr_sft.jsonl")
_FORMAT = "Think, then answer inside <answer></answer>."


def _reply(pick: str) -> str:
    return f"<think>{pick}</think><answer>{pick}</answer>"


#: The two kinds of question: what is asked, the right options, and the verifier that pays.
_KINDS = (
    ("Which is an animal", ANIMALS, "string_matcher"),
    ("Which is a number", [str(digit) for digit in range(10)], "gsm8k"),
)


def _questions() -> list[dict[str, Any]]:
    """Every right option of each kind against every object, in both orders."""
    rows: list[dict[str, Any]] = []
    for ask, rights, dataset in _KINDS:
        for right in rights:
            for thing in OBJECTS:
                for first, second in ((right, thing), (thing, right)):
                    question = f"{ask}: {first} or {second}? {_FORMAT}"
                    rows.append(_row(question, right, dataset, first, second))
    return rows


def _row(question: str, truth: str, dataset: str, first: str, second: str) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": question}],
        "ground_truth": truth,
        "dataset": dataset,
        "options": [first, second],
    }


def demo_rows() -> dict[str, list[dict[str, Any]]]:
    """The three files' rows, by file name. A pair of options is held out in both orders, so no
    held-out question is asked in training even the other way round, and the first option is
    right in exactly half the held-out rows."""
    rows = _questions()
    rng, held_out = random.Random(_SPLIT_SEED), set()
    for _, _, dataset in _KINDS:  # each kind's share, not the mix's
        pairs = sorted(
            {frozenset(r["options"]) for r in rows if r["dataset"] == dataset}, key=sorted
        )
        rng.shuffle(pairs)
        held_out |= set(pairs[: round(VAL_SHARE * len(pairs))])
    train = [r for r in rows if frozenset(r["options"]) not in held_out]
    val = [r for r in rows if frozenset(r["options"]) in held_out]

    def rlvr(row: dict[str, Any]) -> dict[str, Any]:
        return {k: row[k] for k in ("messages", "ground_truth", "dataset")}

    sft = [
        {"messages": [*r["messages"], {"role": "assistant", "content": _reply(r["options"][0])}]}
        for r in train
    ]
    return {
        "tinyrlvr.jsonl": [rlvr(r) for r in train],
        "tinyrlvr_val.jsonl": [rlvr(r) for r in val],
        "tinyrlvr_sft.jsonl": sft,
    }


def write_demo_data(out_dir: str | Path) -> list[Path]:
    """Write the three files into `out_dir` (the shipped ones live in `samples/rlvr/`)."""
    return write_jsonl_files(out_dir, demo_rows())


def _options(question: str) -> tuple[str, str]:
    body = question.split(": ", 1)[1].split("?", 1)[0]
    first, second = body.split(" or ")
    return first, second


def _teacher(question: str) -> str:
    return _reply(_options(question)[0])


def _the_longer_word(question: str) -> str:
    first, second = _options(question)
    return _reply(first if len(first) >= len(second) else second)


#: Rules that read the held-out prompts from the surface: what a trained policy must beat.
RULES: dict[str, Callable[[str], str]] = {
    "first option (the SFT teacher)": _teacher,
    "second option": lambda q: _reply(_options(q)[1]),
    "the longer option": _the_longer_word,
}
