"""`data.val_source`: a separate validation source, downloaded, manifested and prepared like the
training source (judge recipes and GRRM, whose reference validates on the dataset's test split)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from judgeflow import stages
from judgeflow.config import load_config
from judgeflow.samples import sample_path


def _rows(path: str | Path) -> int:
    return pq.read_metadata(str(path)).num_rows


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))


def test_judge_trains_on_all_of_source_and_validates_on_val_source(tmp_path: Path) -> None:
    val = tmp_path / "val.jsonl"
    lines = sample_path("openjudge_pointwise.jsonl").read_text().splitlines()
    val.write_text("\n".join(lines[:3]) + "\n")
    cfg = load_config(
        "grpo-pointwise",
        overrides=[
            "engine=trl",
            "data.source=sample://openjudge_pointwise.jsonl",
            f"data.val_source={val}",
            "data.filter_overlong_prompts=false",
        ],
    )
    manifest = stages.download_stage(cfg)
    val_manifest = stages.download_stage(stages.val_source_config(cfg))
    assert val_manifest.source == str(val) and val_manifest.files[0].rows == 3

    data = stages.prepare_stage(cfg, manifest, val_manifest)
    assert data.val_file is not None
    assert _rows(data.val_file) == 3
    assert _rows(data.train_file) == len(lines)  # val_fraction does not split the source
    report = json.loads(Path(data.report_file).read_text())
    assert report["val_source"]["source"] == str(val)
    assert data.report["val_source"]["source"] == str(val)

    split = stages.prepare_stage(cfg.model_copy(update={"data": cfg.data.model_copy(update={"val_source": None})}), manifest)  # fmt: skip
    assert split.train_file != data.train_file  # another content key, not overwritten
    assert _rows(split.train_file) + _rows(split.val_file or "") == len(lines)


def test_grrm_validates_on_the_val_sources_test_file(tmp_path: Path) -> None:
    source = sample_path("rewardbench2.jsonl").parent / "grrm_tiny"
    other = tmp_path / "held-out"
    other.mkdir()
    rows = (source / "test.jsonl").read_text().splitlines()
    (other / "test.jsonl").write_text("\n".join(rows[:2]) + "\n")
    cfg = load_config("grrm-full", profile="tiny", overrides=[f"data.val_source={other}"])
    data = stages.prepare_grrm_stage(
        cfg,
        stages.download_stage(cfg),
        val_manifest=stages.download_stage(stages.val_source_config(cfg)),
    )
    plain = stages.prepare_grrm_stage(cfg, stages.download_stage(cfg))
    assert data.rl.val_file != plain.rl.val_file
    assert _rows(data.rl.val_file or "") == 2
    assert _rows(plain.rl.val_file or "") == len(rows)
    assert data.sft_file == plain.sft_file  # the training side is the same preparation


def test_pairwise_val_source_is_written_in_both_orders_and_checked_against_train(
    tmp_path: Path,
) -> None:
    lines = sample_path("openjudge_pairwise.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    planted = json.loads(lines[0])  # the first training prompt, up to case and spacing
    planted["input"][0]["content"] = "  " + first["input"][0]["content"].upper()
    planted["output"].reverse()  # and shown B/A
    val = tmp_path / "val.jsonl"
    val.write_text("\n".join([lines[1], json.dumps(planted), lines[2]]) + "\n")
    for line in (lines[1], lines[2]):  # the val source's other rows are not in training
        lines.remove(line)
    train = tmp_path / "train.jsonl"
    train.write_text("\n".join(lines) + "\n")
    cfg = load_config(
        "grpo-pairwise",
        overrides=[
            "engine=trl",
            f"data.source={train}",
            f"data.val_source={val}",
            "data.filter_overlong_prompts=false",
        ],
    )
    assert cfg.data.balance_positions  # the recipe balances its training rows
    data = stages.prepare_stage(
        cfg, stages.download_stage(cfg), stages.download_stage(stages.val_source_config(cfg))
    )
    rows = pq.read_table(data.val_file or "").to_pylist()
    assert [r["extra_info"]["pair"] for r in rows] == [0, 0, 1, 1, 2, 2]
    assert [r["extra_info"]["swapped"] for r in rows] == [False, True] * 3
    for own, twin in zip(rows[::2], rows[1::2], strict=True):
        flipped = {"A": "B", "B": "A"}[own["reward_model"]["ground_truth"]["preference"]]
        assert twin["reward_model"]["ground_truth"]["preference"] == flipped
    val_report = data.report["val_source"]
    assert val_report["parameters"]["both_orders"] is True
    assert val_report["parameters"]["balance_positions"] is False
    assert val_report["splits"]["train"]["swapped"] == 3  # the twins, truthfully
    assert data.report["parameters"]["balance_positions"] is True  # training: balanced

    across = data.report["duplicates"]["across"]["val_source"]
    assert (across["reference"], across["unit"], across["units"]) == ("train", "pair", 3)
    assert (across["count"], across["prompts"]) == (1, 1)
    (item,) = across["listed"]
    (seen,), (trained,) = item["occurrences"], item["reference_occurrences"]
    assert (Path(seen["file"]).name, seen["row"], seen["index"]) == ("val.jsonl", 1, 2)
    assert (Path(trained["file"]).name, trained["row"], trained["index"]) == ("train.jsonl", 0, 0)
    on_disk = json.loads(Path(data.report_file).read_text())
    assert on_disk["duplicates"]["across"] == data.report["duplicates"]["across"]


def test_grrm_test_report_counts_test_groups_whose_source_is_in_train(tmp_path: Path) -> None:
    source = sample_path("rewardbench2.jsonl").parent / "grrm_tiny"
    other = tmp_path / "held-out"
    other.mkdir()
    test_rows = (source / "test.jsonl").read_text().splitlines()
    trained = json.loads((source / "train.jsonl").read_text().splitlines()[0])
    trained["src_text"] = trained["src_text"].lower() + "  "  # a training source, re-cased
    (other / "test.jsonl").write_text("\n".join([test_rows[0], json.dumps(trained)]) + "\n")
    cfg = load_config("grrm-full", profile="tiny", overrides=[f"data.val_source={other}"])
    data = stages.prepare_grrm_stage(
        cfg,
        stages.download_stage(cfg),
        val_manifest=stages.download_stage(stages.val_source_config(cfg)),
    )
    path, report = data.reports["rl_test"]
    across = report["duplicates"]["across"]["test"]
    assert (across["reference"], across["unit"], across["units"]) == ("train", "group", 2)
    assert (across["count"], across["prompts"]) == (1, 1)
    (item,) = across["listed"]
    (seen,) = item["occurrences"]  # the store's copy of the file
    assert (Path(seen["file"]).name, seen["row"]) == ("test.jsonl", 1)
    assert item["reference_n"] == 4  # grrm_tiny pairs each source with 4 candidate sets
    assert json.loads(Path(path).read_text()) == report
    assert data.reports["rl_train"][1]["duplicates"]["within"]["train"]["prompts"] == 20
