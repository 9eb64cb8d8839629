"""A model's lineage file, and the refusal to score it on prompts it trained on."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgeflow.data.prompt_hashes import judge_prompt_hash
from judgeflow.data.templates import render_pairwise, render_pointwise
from judgeflow.decontamination import (
    LINEAGE_FILE,
    ContaminationError,
    check_overlap,
    file_prompt_hashes,
    read_lineage,
    write_lineage,
)


def _row(query: str, response: str, *, stored: bool = True) -> dict:
    extra = {"source_file": "data.jsonl", "source_row": 3}
    if stored:
        extra["prompt_hash"] = judge_prompt_hash(query, [response])
    return {
        "prompt": [{"role": "user", "content": render_pointwise(query, response)}],
        "reward_model": {"ground_truth": {"helpfulness": 4}},
        "extra_info": extra,
    }


def _write(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_lineage_joins_the_start_models_and_travels_in_the_model_dir(tmp_path: Path) -> None:
    sft_data = _write(
        tmp_path / "sft.parquet",
        [{"messages": [{"role": "user", "content": render_pairwise("Q1", "a", "b")},
                       {"role": "assistant", "content": "<better>A</better>"}]}],
    )  # fmt: skip
    rl_data = _write(tmp_path / "rl.parquet", [_row("Q2", "r"), _row("Q3", "r", stored=False)])
    sft_model, final = tmp_path / "sft-model", tmp_path / "final"
    sft_model.mkdir(), final.mkdir()

    write_lineage(
        sft_model, stage="sft", mode="pairwise", data_file=sft_data, data_uri="s3://b/sft"
    )
    lineage = write_lineage(
        final, stage="grpo", mode="pointwise", data_file=rl_data, start_model=sft_model
    )
    assert [s["stage"] for s in lineage.stages] == ["sft", "grpo"]
    assert lineage.stages[0]["data"] == "s3://b/sft"
    assert lineage.prompt_hashes == {
        judge_prompt_hash("Q1", ["b", "a"]),
        judge_prompt_hash("q2", ["R"]),
        judge_prompt_hash("Q3", ["r"]),  # computed from the text when a row has no hash
    }
    assert read_lineage(final) == lineage
    assert json.loads((final / LINEAGE_FILE).read_text())["schema_version"] == 1
    assert read_lineage(tmp_path) is None


def test_evaluation_on_training_prompts_is_refused_unless_allowed(tmp_path: Path) -> None:
    data = _write(tmp_path / "train.parquet", [_row("What is 2+2?", "Four.")])
    model = tmp_path / "model"
    model.mkdir()
    write_lineage(model, stage="grpo", mode="pointwise", data_file=data)
    held_out = [_row("What is 3+3?", "Six.")]
    seen = [_row("what is  2+2?", "four."), *held_out]  # same prompt up to case and spacing

    clean = check_overlap(model, held_out, "pointwise")
    assert clean.checked and clean.overlapping == []
    with pytest.raises(ContaminationError) as refused:
        check_overlap(model, seen, "pointwise", what="val.parquet")
    text = str(refused.value)
    assert "1 of 2 rows of val.parquet" in text and "--allow-overlap" in text
    assert "data.jsonl row 3" in text and "what is 2+2?" in text
    allowed = check_overlap(model, seen, "pointwise", allow_overlap=True)
    assert allowed.overlapping == [0] and allowed.to_dict()["overlapping_rows"] == 1


def test_a_model_without_lineage_is_not_checked(tmp_path: Path) -> None:
    overlap = check_overlap(tmp_path, [_row("q", "r")], "pointwise")
    assert not overlap.checked and overlap.rows == 1


def test_a_file_of_neither_kind_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "odd.parquet", [{"text": "hello"}])
    with pytest.raises(ValueError, match="odd.parquet: neither verl RL rows"):
        file_prompt_hashes(path, "pointwise")
