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
