"""The sample data behind the hackable judge-paid demo (`judgeflow run rlvr-judged --profile
tiny-hackable`): the tiny pointwise judge of `make demo` pays a tiny policy for its answers.

The shipped `samples/rlvr_judged/tinyjudged*.jsonl` files are this module's output
(`judgeflow dev demo-data DIR --judged` writes them again; a test checks they are identical).
The questions are the tiny judge task's (`judgeflow.dev.demo_data`), in open-instruct's row
format: `messages` (the question), `dataset: judge` (a trained judge pays the row) and
`ground_truth` (the helpful answer, the reference that `reference_f1` compares with and a
pairwise judge judges against).

- **Held-out prompts** (`tinyjudged_val.jsonl`, the tiny profile's `data.val_source`): the
  questions of the judge's own validation split, so the policy is evaluated on prompts the
  judge never trained on (and where it was measured).
- **Training prompts** (`tinyjudged.jsonl`): every other question.
- **SFT rows** (`tinyjudged_sft.jsonl`): a weak teacher's answers to the training prompts, a
  helpful answer only `TEACHER_HELPS` of the time and a non-answer (an apology, a refusal, a
  deflection: `SEEN_NON_ANSWERS`) otherwise.

What the tiny judge rewards is what it learnt: a response that answers (4) against one that does
not (0). SFT teaches the policy the teacher's mix; GRPO, paid by the judge alone, moves it
toward answering, and `reference_f1` — the answer against the reference, which the judge never
sees — says whether the answers got better too, or only the judge's opinion of them.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from judgeflow.dev.demo_data import (
    N_SFT_QUESTIONS,
    N_VAL_QUESTIONS,
    SEEN_NON_ANSWERS,
    _questions,
    write_jsonl_files,
)

__all__ = ["DATASET", "FILES", "TEACHER_HELPS", "demo_rows", "write_demo_data"]

#: The row `dataset` a trained judge pays (one of `reward.judge_datasets`' defaults).
DATASET = "judge"
#: How often the weak SFT teacher answers instead of deflecting.
TEACHER_HELPS = 0.3
FILES = ("tinyjudged.jsonl", "tinyjudged_val.jsonl", "tinyjudged_sft.jsonl")


def _row(query: str, reference: str, family: str) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": query}],
        "ground_truth": reference,
        "dataset": DATASET,
        "source": f"tinyjudged/{family}",
    }


def demo_rows(seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    """The three sample sets, keyed by file name. The split of the questions is the judge
    demo's (`demo_data.demo_rows` with the same seed): its validation questions are held out."""
    rng = random.Random(seed)
    questions = list(_questions())
    rng.shuffle(questions)  # the same shuffle as demo_data.demo_rows(seed)
    val = questions[:N_VAL_QUESTIONS]
    train = questions[N_VAL_QUESTIONS:]
    teacher = random.Random(seed + 1)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in FILES}
    for family, query, helpful in train:
        out["tinyjudged.jsonl"].append(_row(query, helpful, family))
        reply = helpful if teacher.random() < TEACHER_HELPS else teacher.choice(SEEN_NON_ANSWERS)
        out["tinyjudged_sft.jsonl"].append(
            {
                "messages": [
                    {"role": "user", "content": query},
                    {"role": "assistant", "content": reply},
                ]
            }
        )
    for family, query, helpful in val:
        out["tinyjudged_val.jsonl"].append(_row(query, helpful, family))
    assert len(train) > N_SFT_QUESTIONS  # the judge's SFT questions are among the training ones
    return out


def write_demo_data(out_dir: str | Path) -> list[Path]:
    """Write the three files into `out_dir` (the shipped ones live in `samples/rlvr_judged/`)."""
    return write_jsonl_files(out_dir, demo_rows())
