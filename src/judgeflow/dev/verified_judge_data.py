"""The sample data behind the judge-paid loop that works (`judgeflow run rlvr-judged --profile
tiny`): a pointwise judge taught by verifiers, then a policy paid by that judge alone.

The shipped `samples/rlvr_judged/verified_*.jsonl` files are this module's output (`judgeflow
dev demo-data DIR --verified` writes them again; a test checks they are identical). The
questions are the tiny RLVR task's (`judgeflow.dev.rlvr_demo_data`: "Which is an animal: X or
Y?", "Which number is larger: x or y?"), split as it splits them:

- **Judge rows** (OpenJudge format, `verified_judge.jsonl`): each *training* question, shown
  with its reference answer (`judge_query`: a reference-guided judge, as open-instruct's
  `general-quality_ref`), with candidate answers as the paying judge will see a policy's answer
  (the bare word: `judge_reward` strips the thinking and the answer tags): its two options,
  `SAME_KIND` words of its kind that are not among them (other animals, other digits) and one
  of another kind, labelled by the task's own verifiers (`string_matcher`, `gsm8k`, run through
  `judgeflow.rewards.rlvr`): 4 where they pay the answer, 0 where they do not. The judge learns
  from the verifiers what a right answer is.
- **Judge SFT rows** (`verified_judge_sft.jsonl`): the verifiers' verdicts on the same rows in
  the judge's output format, its thinking the reference and the answer side by side
  (`<think>reference cat, answer horse: wrong</think><score>0</score>`), the right answer's
  row repeated so that 4s are as many as 0s (else a tiny judge learns "always 0"): SFT teaches
  the format and the verifiers' judgement at once; GRPO then sharpens it.
- **Judge validation rows** (`verified_judge_val.jsonl`): the held-out questions' candidates,
  made and labelled the same way; the judge never trains on them.
- **Policy rows** (`verified_policy.jsonl`): the training questions with `dataset: judge`, the
  right option as `ground_truth` and `query` what the judge is shown (the question with that
  reference; the policy is shown the question alone): the judge alone pays them, the policy
  never meets a verifier. The policy's SFT rows and held-out rows are the RLVR
  demo's own (`samples/rlvr/tinyrlvr_sft.jsonl`, `tinyrlvr_val.jsonl`): the held-out rows keep
  their verifiers, which measure the policy and never pay it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from judgeflow.data.templates import render_pointwise
from judgeflow.dev.demo_data import write_jsonl_files
from judgeflow.dev.rlvr_demo_data import ANIMALS, OBJECTS
from judgeflow.dev.rlvr_demo_data import demo_rows as rlvr_rows

__all__ = ["FILES", "SAME_KIND", "demo_rows", "judge_query", "write_demo_data"]

FILES = (
    "verified_judge.jsonl",
    "verified_judge_sft.jsonl",
    "verified_judge_val.jsonl",
    "verified_policy.jsonl",
)
#: The row `dataset` a trained judge pays (one of `reward.judge_datasets`' defaults).
DATASET = "judge"
_SEED = 20261128
#: Answers of the question's own kind that are not among its options, per question (other
#: animals, other digits), by the row's verifier; and one word of another kind besides (and,
#: for an animal question, an animal's first letter: a policy paid by a judge that never saw one
#: answered "f" and "g").
SAME_KIND = {"string_matcher": 2, "gsm8k": 3}


def _options(question: str) -> tuple[str, str]:
    body = question.split(": ", 1)[1].split("?", 1)[0]
    first, second = body.split(" or ")
    return first, second


def _verified(row: dict[str, Any], answer: str) -> int:
    """4 where the row's verifiers pay `answer` (given in the task's R1 format), else 0."""
    from judgeflow.rewards.rlvr.score import compute_score

    response = f"<think>{answer}</think><answer>{answer}</answer>"
    paid = compute_score(row["dataset"], response, row["ground_truth"], r1_style_format="gated")
    return 4 if paid["verifiable_reward"] > 0 else 0


def _candidates(row: dict[str, Any], rng: random.Random) -> list[tuple[str, str, int]]:
    """(question, answer, verifiers' label) for both options of an RLVR row, `SAME_KIND`
    answers of its kind that are not among them (animals, digits), one of another kind and, for
    an animal question, a letter: a judge that saw too few pays any animal to every animal
    question, and a policy learns to say one (measured: "wolf", docs/how-to/judge-paid.md)."""
    question = row["messages"][0]["content"]
    options = _options(question)
    digits = [str(d) for d in range(10)]
    same, other = (ANIMALS, digits) if row["dataset"] == "string_matcher" else (digits, ANIMALS)
    elsewhere = [
        *rng.sample([w for w in same if w not in options], SAME_KIND[row["dataset"]]),
        rng.choice([w for w in [*other, *OBJECTS] if w not in options]),  # another kind of word
    ]
    if row["dataset"] == "string_matcher":  # a fragment: an animal's first letter ("f", "g")
        elsewhere.append(rng.choice(ANIMALS)[0])
    return [(question, answer, _verified(row, answer)) for answer in (*options, *elsewhere)]


def judge_query(row: dict[str, Any]) -> str:
    """What the judge is shown as the question (the row's `query`): the question with its
    reference answer, as a reference-guided judge reads it (open-instruct's
    `general-quality_ref`). The policy is shown the question alone."""
    return f"{row['messages'][0]['content']}\nReference answer: {row['ground_truth']}"


def _analysis(reference: str, answer: str, score: int) -> str:
    """The judge's thinking before its score: the reference and the answer copied side by
    side, then the verifiers' verdict. Copying first puts the two words beside each other, so
    that even a tiny judge can compare them (one that scores from the answer alone pays any
    animal to every animal question, and a policy learns to say one)."""
    return f"reference {reference}, answer {answer}: {'right' if score else 'wrong'}"


def _openjudge(question: str, answer: str, score: int, dataset: str) -> dict[str, Any]:
    return {
        "input": [{"role": "user", "content": question}],
        "output": [
            {"answer": {"role": "assistant", "content": answer, "label": {"helpfulness": score}}}
        ],
        "source": f"verified/{dataset}",
    }


def demo_rows() -> dict[str, list[dict[str, Any]]]:
    """The four files' rows, by file name."""
    rlvr = rlvr_rows()
    train, val = rlvr["tinyrlvr.jsonl"], rlvr["tinyrlvr_val.jsonl"]
    rng = random.Random(_SEED)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in FILES}
    for row in train:
        candidates = _candidates(row, rng)
        zeros = sum(score == 0 for _, _, score in candidates)
        query = judge_query(row)
        for _, answer, score in candidates:
            out["verified_judge.jsonl"].append(_openjudge(query, answer, score, row["dataset"]))
            thinking = _analysis(row["ground_truth"], answer, score)
            verdict = f"<think>{thinking}</think><score>{score}</score>"
            sft_row = {
                "messages": [
                    {"role": "user", "content": render_pointwise(query, answer)},
                    {"role": "assistant", "content": verdict},
                ]
            }
            # the right answer's row repeated: about as many 4s as 0s, or a tiny judge learns
            # "always 0"
            out["verified_judge_sft.jsonl"] += [sft_row] * (zeros if score == 4 else 1)
        out["verified_policy.jsonl"].append(
            {
                "messages": row["messages"],
                "ground_truth": row["ground_truth"],
                "dataset": DATASET,
                "query": query,
            }
        )
    for row in val:
        for _, answer, score in _candidates(row, rng):
            out["verified_judge_val.jsonl"].append(
                _openjudge(judge_query(row), answer, score, row["dataset"])
            )
    return out


def write_demo_data(out_dir: str | Path) -> list[Path]:
    """Write the four files into `out_dir` (the shipped ones live in `samples/rlvr_judged/`)."""
    return write_jsonl_files(out_dir, demo_rows())
