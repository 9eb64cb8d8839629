"""The judge-paid demo's data is what `judgeflow.dev.judged_demo_data` writes: the tiny judge
task's questions as open-instruct rows a judge pays, held out exactly where the judge's own
validation questions are, and a weak SFT teacher that mostly deflects."""

from __future__ import annotations

from pathlib import Path

from judgeflow.data.rlvr import read_rlvr
from judgeflow.dev import demo_data
from judgeflow.dev.judged_demo_data import DATASET, FILES, TEACHER_HELPS, demo_rows, write_demo_data

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "judgeflow" / "samples" / "rlvr_judged"


def test_shipped_samples_are_exactly_the_generators_output(tmp_path: Path) -> None:
    for path in write_demo_data(tmp_path):
        assert (SAMPLES / path.name).read_bytes() == path.read_bytes(), (
            f"samples/rlvr_judged/{path.name} differs from the generator's output: run "
            "`judgeflow dev demo-data src/judgeflow/samples/rlvr_judged --judged`"
        )


def test_held_out_questions_are_the_judges_validation_questions_and_nothing_else() -> None:
    rows = demo_rows()
    judge_rows = demo_data.demo_rows()

    def asked(rows_: list[dict]) -> set[str]:
        return {r["input"][0]["content"] for r in rows_}

    judge_val = asked(judge_rows["pointwise_val"])
    val = {r["messages"][0]["content"] for r in rows["tinyjudged_val.jsonl"]}
    train = {r["messages"][0]["content"] for r in rows["tinyjudged.jsonl"]}
    assert val == judge_val and not val & train
    assert asked(judge_rows["pointwise"]) <= train  # the judge's RL questions are trained on


def test_rows_are_paid_by_the_judge_and_the_teacher_mostly_deflects() -> None:
    rows = demo_rows()
    assert {r["dataset"] for name in FILES[:2] for r in rows[name]} == {DATASET}
    read = read_rlvr([str(SAMPLES / "tinyjudged.jsonl")], judge_datasets=[DATASET])
    assert len(read.examples) == len(rows["tinyjudged.jsonl"])
    assert all(ex.judge_input and ex.judge_input[0] == ex.messages[-1][1] for ex in read.examples)
    references = {r["ground_truth"] for r in rows["tinyjudged.jsonl"]}
    replies = [r["messages"][1]["content"] for r in rows["tinyjudged_sft.jsonl"]]
    helped = sum(reply in references for reply in replies) / len(replies)
    assert abs(helped - TEACHER_HELPS) < 0.1
    assert all(reply in references or reply in demo_data.SEEN_NON_ANSWERS for reply in replies)
