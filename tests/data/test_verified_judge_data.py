"""The judge taught by verifiers and the policy it pays (`judgeflow.dev.verified_judge_data`):
the shipped files are the generator's output, the judge's labels are the verifiers' verdicts,
and the policy's rows name no verifier."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from judgeflow.dev.rlvr_demo_data import ANIMALS
from judgeflow.dev.rlvr_demo_data import demo_rows as rlvr_rows
from judgeflow.dev.verified_judge_data import (
    FILES,
    OTHER_KIND,
    OWN_PIECES,
    PIECES,
    SAME_KIND,
    demo_rows,
    judge_query,
    write_demo_data,
)

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "judgeflow" / "samples" / "rlvr_judged"


def test_shipped_samples_are_exactly_the_generators_output(tmp_path: Path) -> None:
    for path in write_demo_data(tmp_path):
        assert path.read_bytes() == (SAMPLES / path.name).read_bytes(), (
            f"samples/rlvr_judged/{path.name} differs from the generator's output: run "
            "`judgeflow dev demo-data src/judgeflow/samples/rlvr_judged --verified`"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES)


def test_the_judges_labels_are_the_verifiers_and_the_right_option_scores_4() -> None:
    rows = demo_rows()
    train = rlvr_rows()["tinyrlvr.jsonl"]
    truth = {judge_query(r): r["ground_truth"] for r in train}
    for row in rows["verified_judge.jsonl"]:
        answer = row["output"][0]["answer"]
        expected = 4 if answer["content"] == truth[row["input"][0]["content"]] else 0
        assert answer["label"] == {"helpfulness": expected}, row
    labels = Counter(
        r["output"][0]["answer"]["label"]["helpfulness"] for r in rows["verified_judge.jsonl"]
    )
    # both options of every training question, SAME_KIND answers of its kind that are neither
    # option, OTHER_KIND of another kind, pieces of words and pieces of its own right answer
    zeros = sum(
        1 + SAME_KIND[r["dataset"]] + OTHER_KIND[r["dataset"]] + PIECES + OWN_PIECES[r["dataset"]]
        for r in train
    )
    assert labels[4] == len(train) and labels[0] == zeros
    # the SFT rows: every answer word the verifiers pay somewhere is paid about as often as it
    # is refused, so the word alone tells the judge nothing (it must compare with the reference)
    paid: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    for row in rows["verified_judge_sft.jsonl"]:
        answer = row["messages"][0]["content"].split("# Response\n")[1].split("\n")[0]
        (paid if row["messages"][1]["content"].endswith("4</score>") else refused)[answer] += 1
    assert set(paid) == {t for t in truth.values()}
    for word in paid:
        assert abs(paid[word] - refused[word]) <= 0.2 * paid[word], (
            word,
            paid[word],
            refused[word],
        )
    for row in rows["verified_judge_sft.jsonl"]:  # the thinking: reference, answer, verdict
        prompt, verdict = (m["content"] for m in row["messages"])
        reference = prompt.split("Reference answer: ")[1].split("\n")[0]
        answer = prompt.split("# Response\n")[1].split("\n")[0]
        right = "right</think><score>4" if answer == reference else "wrong</think><score>0"
        assert verdict == f"<think>reference {reference}, answer {answer}: {right}</score>", row


def test_every_wrong_animal_is_shown_against_every_reference_about_as_often() -> None:
    """The same-kind wrong answers are dealt from a cycle per reference, not sampled: no
    (reference, wrong animal) pair is a blind spot."""
    pairs: Counter[tuple[str, str]] = Counter()
    for row in demo_rows()["verified_judge.jsonl"]:
        reference = row["input"][0]["content"].split("Reference answer: ")[1]
        answer = row["output"][0]["answer"]
        if answer["label"]["helpfulness"] == 0 and answer["content"] in ANIMALS:
            pairs[reference, answer["content"]] += 1
    counts = [pairs[r, a] for r in ANIMALS for a in ANIMALS if r != a]
    assert min(counts) >= 4 and max(counts) - min(counts) <= 4, Counter(counts)


def test_a_piece_of_the_right_answer_is_refused_for_every_animal() -> None:
    """A piece of the right answer ("she" of "sheep") is wrong, and the judge is shown so for
    every animal, in pieces from both ends (a judge that never met them paid "she" as "sheep")."""
    own: dict[str, set[str]] = {}
    for row in demo_rows()["verified_judge.jsonl"]:
        reference = row["input"][0]["content"].split("Reference answer: ")[1]
        answer = row["output"][0]["answer"]
        word = answer["content"]
        piece = word != reference and (reference.startswith(word) or reference.endswith(word))
        if reference in ANIMALS and piece:
            assert answer["label"] == {"helpfulness": 0}, row
            own.setdefault(reference, set()).add(word)
    assert set(own) == set(ANIMALS)
    assert {"she", "shee", "wol"} <= own["sheep"] | own["wolf"]
    assert all(
        any(reference.startswith(p) for p in pieces) and any(reference.endswith(p) for p in pieces)
        for reference, pieces in own.items()
    ), own


def test_the_policy_never_meets_a_verifier_and_the_held_out_questions_stay_out() -> None:
    rows, rlvr = demo_rows(), rlvr_rows()
    assert {r["dataset"] for r in rows["verified_policy.jsonl"]} == {"judge"}
    trained = {r["messages"][0]["content"] for r in rows["verified_policy.jsonl"]}
    # the judge is shown the question with its reference; the policy, the question alone
    shown = {r["query"] for r in rows["verified_policy.jsonl"]}
    judged = {r["input"][0]["content"] for r in rows["verified_judge.jsonl"]}
    held_out = {r["messages"][0]["content"] for r in rlvr["tinyrlvr_val.jsonl"]}
    assert shown == judged and not (trained & held_out)
    assert all("Reference answer" not in question for question in trained)
    assert {r["input"][0]["content"] for r in rows["verified_judge_val.jsonl"]} == {
        judge_query(r) for r in rlvr["tinyrlvr_val.jsonl"]
    }
    # the policy's held-out rows are the RLVR demo's, verifiers and all
    shipped = SAMPLES.parent / "rlvr" / "tinyrlvr_val.jsonl"
    assert {json.loads(line)["dataset"] for line in shipped.read_text().splitlines()} == {
        "string_matcher",
        "gsm8k",
    }
