"""The sample data behind the judge-paid loop that works (`judgeflow run rlvr-judged --profile
tiny`): a pointwise judge taught by verifiers, then a policy paid by that judge alone.

The shipped `samples/rlvr_judged/verified_*.jsonl` files are this module's output (`judgeflow
dev demo-data DIR --verified` writes them again; a test checks they are identical). The
questions are the tiny RLVR task's (`judgeflow.dev.rlvr_demo_data`: "Which is an animal: X or
Y?", "Which is a number: x or Y?"), split as it splits them:

- **Judge rows** (OpenJudge format, `verified_judge.jsonl`): each *training* question, shown
  with its reference answer (`judge_query`: a reference-guided judge, as open-instruct's
  `general-quality_ref`), with candidate answers as the paying judge will see a policy's answer
  (the bare word: `judge_reward` strips the thinking and the answer tags): its two options,
  `SAME_KIND` words of its kind that are not among them (other animals, other digits; dealt so
  that every wrong word meets every reference about as often), `OTHER_KIND` words of another
  kind, `PIECES` pieces of words ("ear", "f") and `OWN_PIECES` of its own right answer
  ("she" of "sheep"), labelled by the task's own verifiers
  (`string_matcher`, `gsm8k`, run through `judgeflow.rewards.rlvr`): 4 where they pay the
  answer, 0 where they do not. The judge learns from the verifiers what a right answer is.
- **Judge SFT rows** (`verified_judge_sft.jsonl`): the verifiers' verdicts on the same rows in
  the judge's output format, its thinking the reference and the answer side by side
  (`<think>reference cat, answer horse: wrong</think><score>0</score>`), repeated so that each
  word is paid in as many rows as it is refused (`_balanced`: else the word alone predicts the
  verdict, and a tiny judge learns that instead of comparing): SFT teaches the format and the
  verifiers' judgement at once; GRPO then sharpens it.
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
from collections import Counter
from pathlib import Path
from typing import Any

from judgeflow.data.templates import render_pointwise
from judgeflow.dev.demo_data import write_jsonl_files
from judgeflow.dev.rlvr_demo_data import ANIMALS, OBJECTS
from judgeflow.dev.rlvr_demo_data import demo_rows as rlvr_rows

__all__ = [
    "FILES",
    "OTHER_KIND",
    "OWN_PIECES",
    "PIECES",
    "SAME_KIND",
    "demo_rows",
    "judge_query",
    "write_demo_data",
]

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
#: animals, eight of the nine other digits), by the row's verifier.
SAME_KIND = {"string_matcher": 4, "gsm8k": 8}
#: Words of another kind per question (digits or objects for an animal question, animals or
#: objects for a number question).
OTHER_KIND = {"string_matcher": 1, "gsm8k": 3}
#: Pieces of words per question: every start and end of an animal's or an object's name that is
#: not a word itself ("ear" of "bear", "f" of "wolf"), dealt from one cycle. A tiny judge whose
#: thinking never met one derails on it ("reference cat, answer, answer bear: right"), and a
#: policy paid by it learnt to answer "ear" to every question.
PIECES = 2
#: Pieces of the question's own right answer per question ("she" of "sheep", "wol" of "wolf";
#: digits have none): a truncated right answer is wrong. A judge that never met one pays it as
#: the word it begins, and a policy paid by it learnt to answer "she" and "wol".
OWN_PIECES = {"string_matcher": 2, "gsm8k": 0}


def _pieces(word: str) -> list[str]:
    """Every start and end of `word` that is not a word of the task ("she", "eep" of "sheep")."""
    cut = {word[:i] for i in range(1, len(word))} | {word[i:] for i in range(1, len(word))}
    return sorted(cut - {*ANIMALS, *OBJECTS})


#: The pieces of words `PIECES` are dealt from (115).
FRAGMENTS = sorted({piece for word in (*ANIMALS, *OBJECTS) for piece in _pieces(word)})


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


class _Cycle:
    """Wrong answers dealt per reference (or per any key: the pieces of words share one) from
    a shuffled cycle of the other words: every (reference, wrong answer) pair is shown about
    equally often, so no pair is a blind spot a policy can find (sampled at random, some pairs
    came up once in 230 questions, and every policy paid by that judge learned to say "dog")."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.decks: dict[str, list[str]] = {}

    def deal(
        self, reference: str, words: list[str], count: int, options: tuple[str, ...]
    ) -> list[str]:
        dealt: list[str] = []
        while len(dealt) < count:
            deck = self.decks.get(reference)
            if not deck:
                deck = [w for w in words if w != reference]
                self.rng.shuffle(deck)
                self.decks[reference] = deck
            word = deck.pop()
            if word not in options and word not in dealt:
                dealt.append(word)
        return dealt


def _candidates(
    row: dict[str, Any], rng: random.Random, cycle: _Cycle, fragments: _Cycle, own: _Cycle
) -> list[tuple[str, int]]:
    """(answer, verifiers' label) for both options of an RLVR row, `SAME_KIND`
    answers of its kind that are not among them (animals, digits; dealt by `cycle`),
    `OTHER_KIND` of another kind, `PIECES` pieces of words (dealt by `fragments`) and
    `OWN_PIECES` pieces of its right answer (dealt by `own`, per reference)."""
    options = _options(row["messages"][0]["content"])
    digits = [str(d) for d in range(10)]
    same, other = (ANIMALS, digits) if row["dataset"] == "string_matcher" else (digits, ANIMALS)
    elsewhere = [
        *cycle.deal(row["ground_truth"], same, SAME_KIND[row["dataset"]], options),
        *rng.sample(
            [w for w in [*other, *OBJECTS] if w not in options], OTHER_KIND[row["dataset"]]
        ),
    ]
    elsewhere += fragments.deal("", FRAGMENTS, PIECES, options)
    reference = row["ground_truth"]
    taken = (*options, *elsewhere)
    elsewhere += own.deal(reference, _pieces(reference), OWN_PIECES[row["dataset"]], taken)
    return [(answer, _verified(row, answer)) for answer in (*options, *elsewhere)]


def _balanced(rows: list[tuple[str, str, str, int]]) -> list[tuple[str, str, str, int]]:
    """(query, reference, answer, score) rows, repeated so that every answer word the
    verifiers pay somewhere is paid in as many rows as it is refused: a judge then cannot score
    an answer by the word alone and must compare it with the reference. (With only the right
    rows repeated, "dog" was right in three of four rows it appeared in, and the judge paid
    "dog" to every question.) Words never right (objects, letters, "0") stay refused."""
    right = Counter(answer for _, _, answer, score in rows if score)
    wrong = Counter(answer for _, _, answer, score in rows if not score)
    out: list[tuple[str, str, str, int]] = []
    for row in rows:
        answer, score = row[2], row[3]
        if answer in right and answer in wrong:
            target = max(right[answer], wrong[answer])
            share = target / (right[answer] if score else wrong[answer])
            out += [row] * max(1, round(share))
        else:
            out.append(row)
    return out


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
    cycle, fragments, own = _Cycle(rng), _Cycle(rng), _Cycle(rng)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in FILES}
    sft: list[tuple[str, str, str, int]] = []
    for row in train:
        query = judge_query(row)
        for answer, score in _candidates(row, rng, cycle, fragments, own):
            out["verified_judge.jsonl"].append(_openjudge(query, answer, score, row["dataset"]))
            sft.append((query, row["ground_truth"], answer, score))
        out["verified_policy.jsonl"].append(
            {
                "messages": row["messages"],
                "ground_truth": row["ground_truth"],
                "dataset": DATASET,
                "query": query,
            }
        )
    for query, reference, answer, score in _balanced(sft):
        thinking = _analysis(reference, answer, score)
        out["verified_judge_sft.jsonl"].append(
            {
                "messages": [
                    {"role": "user", "content": render_pointwise(query, answer)},
                    {
                        "role": "assistant",
                        "content": f"<think>{thinking}</think><score>{score}</score>",
                    },
                ]
            }
        )
    val_cycle, val_fragments, val_own = _Cycle(rng), _Cycle(rng), _Cycle(rng)
    for row in val:
        for answer, score in _candidates(row, rng, val_cycle, val_fragments, val_own):
            out["verified_judge_val.jsonl"].append(
                _openjudge(judge_query(row), answer, score, row["dataset"])
            )
    return out


def write_demo_data(out_dir: str | Path) -> list[Path]:
    """Write the four files into `out_dir` (the shipped ones live in `samples/rlvr_judged/`)."""
    return write_jsonl_files(out_dir, demo_rows())
