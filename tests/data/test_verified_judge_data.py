"""The judge taught by verifiers and the policy it pays (`judgeflow.dev.verified_judge_data`):
the shipped files are the generator's output, the judge's labels are the verifiers' verdicts,
and the policy's rows name no verifier."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from judgeflow.dev.rlvr_demo_data import demo_rows as rlvr_rows
from judgeflow.dev.verified_judge_data import ELSEWHERE, FILES, demo_rows, write_demo_data

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
    truth = {r["messages"][0]["content"]: r["ground_truth"] for r in rlvr_rows()["tinyrlvr.jsonl"]}
    for row in rows["verified_judge.jsonl"]:
        answer = row["output"][0]["answer"]
        expected = 4 if answer["content"] == truth[row["input"][0]["content"]] else 0
        assert answer["label"] == {"helpfulness": expected}, row
    labels = Counter(
        r["output"][0]["answer"]["label"]["helpfulness"] for r in rows["verified_judge.jsonl"]
    )
    # both options of every training question, and ELSEWHERE answers that are neither
    assert labels[4] == len(truth) and labels[0] == (1 + ELSEWHERE) * len(truth)
    verdicts = Counter(
        r["messages"][1]["content"].split("<score>")[1] for r in rows["verified_judge_sft.jsonl"]
    )
    each = (1 + ELSEWHERE) * len(truth)  # the right answer repeated: as many 4s as 0s
    assert verdicts == {"4</score>": each, "0</score>": each}
    for n, row in enumerate(rows["verified_judge.jsonl"]):  # after the two options: neither
        question, answer = row["input"][0]["content"], row["output"][0]["answer"]["content"]
        among = f" {answer} or " in question or f"or {answer}?" in question
        assert among == (n % (2 + ELSEWHERE) < 2), row


def test_the_policy_never_meets_a_verifier_and_the_held_out_questions_stay_out() -> None:
    rows, rlvr = demo_rows(), rlvr_rows()
    assert {r["dataset"] for r in rows["verified_policy.jsonl"]} == {"judge"}
    trained = {r["messages"][0]["content"] for r in rows["verified_policy.jsonl"]}
    judged = {r["input"][0]["content"] for r in rows["verified_judge.jsonl"]}
    held_out = {r["messages"][0]["content"] for r in rlvr["tinyrlvr_val.jsonl"]}
    assert trained == judged and not (trained & held_out)
    assert {r["input"][0]["content"] for r in rows["verified_judge_val.jsonl"]} == held_out
    # the policy's held-out rows are the RLVR demo's, verifiers and all
    shipped = SAMPLES.parent / "rlvr" / "tinyrlvr_val.jsonl"
    assert {json.loads(line)["dataset"] for line in shipped.read_text().splitlines()} == {
        "string_matcher",
        "gsm8k",
    }
