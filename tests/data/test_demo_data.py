"""The tiny demo's sample data is what `judgeflow.dev.demo_data` writes, and has the shape the
demo relies on: disjoint SFT and RL questions, a weak teacher, balanced labels."""

from __future__ import annotations

import json
from pathlib import Path

from judgeflow.dev.demo_data import TEACHER_PICKS_B, demo_rows, write_demo_data

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "judgeflow" / "samples"


def test_shipped_samples_are_exactly_the_generators_output(tmp_path: Path) -> None:
    for path in write_demo_data(tmp_path):
        shipped = SAMPLES / path.relative_to(tmp_path)
        assert shipped.read_bytes() == path.read_bytes(), (
            f"{shipped}: run `judgeflow dev demo-data`"
        )


def _query(row: dict) -> str:
    if "input" in row:
        return row["input"][0]["content"]
    return row["messages"][0]["content"].split("# Query\n", 1)[1].split("\n# Response", 1)[0]


def test_sft_and_rl_questions_are_disjoint_and_the_teacher_is_weak() -> None:
    rows = demo_rows()
    for mode in ("pointwise", "pairwise"):
        rl = {_query(r) for r in rows[mode]}
        sft = {_query(r) for r in rows[f"{mode}_sft"]}
        assert rl and sft and not rl & sft
    rl_labels = [r["output"][0]["answer"]["label"]["helpfulness"] for r in rows["pointwise"]]
    assert sorted(set(rl_labels)) == [0, 4] and rl_labels.count(4) == rl_labels.count(0)
    prefs = [r["output"][0]["answer"]["label"]["preference"] for r in rows["pairwise"]]
    assert prefs.count("A") == prefs.count("B")  # balanced even without --balance-positions
    # The teacher mostly hedges (3 / 1) and favours A: there is something left for GRPO.
    said = [r["messages"][-1]["content"] for r in rows["pointwise_sft"]]
    hedged = sum("<score>3</score>" in s or "<score>1</score>" in s for s in said)
    assert hedged / len(said) > 0.5
    picks_a = sum(
        "<better>A</better>" in r["messages"][-1]["content"] for r in rows["pairwise_sft"]
    )
    assert picks_a / len(rows["pairwise_sft"]) > 0.5 + (0.5 - TEACHER_PICKS_B) / 2


def test_grrm_tiny_rows_are_valid_grrm_groups() -> None:
    for split in ("train", "test"):
        for line in (SAMPLES / "grrm_tiny" / f"{split}.jsonl").read_text().splitlines():
            row = json.loads(line)
            assert len(row["mt_texts"]) == len(row["scores"]) == 2
            assert row["analysis"].startswith(("A ", "B "))
