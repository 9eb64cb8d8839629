"""The tiny RLVR demo's data is what `judgeflow.dev.rlvr_demo_data` writes, in open-instruct's
format, with the shape the demo page (docs/how-to/rlvr.md) describes: held-out pairs of options
in neither order in training or SFT, a teacher right exactly half the time, two verifiers."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from judgeflow.data.rlvr import read_rlvr
from judgeflow.dev.rlvr_demo_data import FILES, RULES, demo_rows, write_demo_data
from judgeflow.rewards.rlvr import verify
from judgeflow.rewards.rlvr.compose import r1_format_holds

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "judgeflow" / "samples" / "rlvr"


def test_shipped_samples_are_exactly_the_generators_output(tmp_path: Path) -> None:
    written = write_demo_data(tmp_path)
    assert sorted(p.name for p in written) == sorted(FILES)
    for path in written:
        assert (SAMPLES / path.name).read_bytes() == path.read_bytes(), (
            f"samples/rlvr/{path.name} differs from the generator's output: run "
            "`judgeflow dev demo-data src/judgeflow/samples/rlvr --rlvr`"
        )


def _question(row: dict) -> str:
    return str(row["messages"][0]["content"])


def _options(row: dict) -> frozenset[str]:
    body = _question(row).split(": ", 1)[1].split("?", 1)[0]
    return frozenset(body.split(" or "))


def test_held_out_pairs_are_trained_on_in_neither_order() -> None:
    rows = demo_rows()
    train, val, sft = rows["tinyrlvr.jsonl"], rows["tinyrlvr_val.jsonl"], rows["tinyrlvr_sft.jsonl"]
    held_out = {_options(r) for r in val}
    assert not held_out & {_options(r) for r in train}
    assert not held_out & {_options(r) for r in sft}
    assert {_question(r) for r in sft} == {_question(r) for r in train}
    assert len(val) == 106 and len(train) == 422


def test_both_verifiers_and_a_teacher_right_half_the_time_in_the_r1_format() -> None:
    rows = demo_rows()
    val = rows["tinyrlvr_val.jsonl"]
    assert Counter(r["dataset"] for r in val) == {"string_matcher": 58, "gsm8k": 48}
    teacher = RULES["first option (the SFT teacher)"]
    right = [verify(r["dataset"], teacher(_question(r)), r["ground_truth"]) for r in val]
    assert sum(right) / len(val) == 0.5
    sft = rows["tinyrlvr_sft.jsonl"]
    assert all(r1_format_holds(r["messages"][-1]["content"]) for r in sft)
    train = {_question(r): r for r in rows["tinyrlvr.jsonl"]}
    paid = [verify(train[_question(s)]["dataset"], s["messages"][-1]["content"],
                   train[_question(s)]["ground_truth"]) for s in sft]  # fmt: skip
    assert 0.4 < sum(paid) / len(paid) < 0.6  # the teacher's habit, not the task


def test_the_files_read_as_open_instruct_rows(tmp_path: Path) -> None:
    read = read_rlvr([SAMPLES / "tinyrlvr.jsonl", SAMPLES / "tinyrlvr_val.jsonl"])
    assert read.rows_read == 528 and not read.dropped
    assert {ex.verifiers for ex in read.examples} == {("string_matcher",), ("gsm8k",)}
    first = json.loads((SAMPLES / "tinyrlvr.jsonl").read_text().splitlines()[0])
    assert set(first) == {"messages", "ground_truth", "dataset"}
