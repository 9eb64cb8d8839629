"""`data.source`, `data.revision` and `sft.source`: what the download stage fetches and keeps.

The stages the flows call, on shipped samples (no network): another source is other data, a
revision is recorded and kept apart, and the SFT stage prepares the rows of `sft.source`.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from judgeflow import stages
from judgeflow.config import load_config
from judgeflow.samples import sample_path
from judgeflow.storage import Manifest


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))


def _fetched(*overrides: str) -> Manifest:
    """What the download stage fetches for the pointwise judge recipe with `overrides`."""
    return stages.download_stage(load_config("grpo-pointwise", overrides=list(overrides)))


def test_data_source_is_what_download_fetches() -> None:
    openjudge = _fetched("data.source=sample://openjudge_pointwise.jsonl")
    tinyjudge = _fetched("data.source=sample://tinyjudge_pointwise.jsonl")
    assert openjudge.source == "sample://openjudge_pointwise.jsonl"
    assert openjudge.paths[0].read_bytes() == sample_path("openjudge_pointwise.jsonl").read_bytes()
    assert tinyjudge.paths[0].read_bytes() == sample_path("tinyjudge_pointwise.jsonl").read_bytes()
    assert openjudge.content_hash != tinyjudge.content_hash


def test_data_revision_is_recorded_and_kept_apart() -> None:
    """A revision pins an `hf://` source's URL (tests/core/test_storage.py); every download
    records it and gets its own folder, so two revisions never share files."""
    source = "data.source=sample://openjudge_pointwise.jsonl"
    unpinned, pinned = _fetched(source), _fetched(source, "data.revision=v2")
    assert (unpinned.revision, pinned.revision) == (None, "v2")
    assert pinned.local_dir != unpinned.local_dir


def test_sft_source_is_what_the_sft_stage_prepares() -> None:
    def sft_rows(source: str) -> list[object]:
        cfg = load_config("grpo-pairwise", overrides=["sft.enabled=true", f"sft.source={source}"])
        manifest = stages.download_stage(stages.sft_source_config(cfg))
        assert manifest.source == source
        sft = stages.prepare_sft_stage(cfg, manifest)
        return pq.read_table(sft.file).column("messages").to_pylist()

    pairwise = sft_rows("sample://tinyjudge_pairwise_sft.jsonl")
    pointwise = sft_rows("sample://tinyjudge_pointwise_sft.jsonl")
    shipped = sample_path("tinyjudge_pointwise_sft.jsonl").read_text(encoding="utf-8")
    assert len(pointwise) == len(shipped.splitlines())
    assert pointwise != pairwise
