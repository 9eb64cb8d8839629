"""Sharded GRRM RL preparation writes the bytes of the single-process run, and the same report.

Shards are uneven (the batch count does not divide), parquet row groups do not line up with
batches, JSONL files have blank lines and CRLF endings, and invalid rows sit in the middle
shard, so every place where a shard could drift from the single run is crossed.
"""

from __future__ import annotations

import hashlib
import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgeflow.data import DataError, DataValidationError, prepare_grrm_rl
from judgeflow.data.shards import (
    merge_grrm_rl_shards,
    plan_grrm_rl_shards,
    prepare_grrm_rl_shard,
    prepare_grrm_rl_sharded,
)

LANGS = ["de", "en", "zh", "fr", "Japanese"]


def groups(n: int, seed: int = 0, bad: set[int] | None = None) -> list[dict[str, Any]]:
    """`n` GRRM groups of 2 to 5 candidates; the rows in `bad` fail validation."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        size = rng.randint(2, 5)
        row = {
            "src_text": f"Quelle {i} ✓",
            "src_lang": rng.choice(LANGS),
            "trg_lang": rng.choice(LANGS),
            "mt_texts": [f"candidate {i}.{j}" for j in range(size)],
            "scores": [rng.randint(0, 10) for _ in range(size)],
        }
        if bad and i in bad:
            row["scores"] = [*row["scores"][:-1], 11 + i % 3]  # out of range
        rows.append(row)
    return rows


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_jsonl(path: Path, rows: list[dict[str, Any]], newline: str = "\n") -> Path:
    """JSONL with blank lines sprinkled in (they count as lines, not as rows)."""
    lines: list[str] = []
    for i, row in enumerate(rows):
        if i % 7 == 3:
            lines.append("   ")
        lines.append(json.dumps(row, ensure_ascii=False))
    path.write_bytes((newline.join(lines) + newline).encode("utf-8"))
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]], row_group_size: int) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


def assert_same_run(tmp_path: Path, source: Path, shards: int, **options: Any) -> dict[str, Any]:
    """Run single and sharded; compare bytes and reports; return the sharded report."""
    single = prepare_grrm_rl(source, tmp_path / "single" / "rl.parquet", **options)
    sharded_out = tmp_path / "sharded" / "rl.parquet"
    plan = plan_grrm_rl_shards(source, sharded_out, shards, **options)
    assert len(plan.shards) == shards
    with ThreadPoolExecutor(max_workers=shards) as pool:
        results = list(pool.map(prepare_grrm_rl_shard, plan.shards))
    sharded = merge_grrm_rl_shards(plan, results)

    assert sha256(sharded.output_path) == sha256(single.output_path)
    assert sharded.report["output"]["sha256"] == single.report["output"]["sha256"]
    expected = json.loads(Path(single.report_path).read_text())
    expected["output"]["path"] = sharded.output_path  # the only field that may differ
    assert json.loads(Path(sharded.report_path).read_text()) == expected
    assert sorted(p.name for p in sharded_out.parent.iterdir()) == ["rl.parquet", "rl.report.json"]
    return sharded.report


AUGMENTED = {"subgroup_augment": 2, "shuffle_augment": 2, "seed": 7}


def test_parquet_shards_are_byte_identical(tmp_path: Path) -> None:
    # 230 rows, batches of 16: 15 batches over 4 shards (4+4+4+3); row groups of 37 rows.
    source = write_parquet(tmp_path / "in.parquet", groups(230), row_group_size=37)
    report = assert_same_run(tmp_path, source, 4, batch_size=16, **AUGMENTED)
    assert report["counts"]["rows_read"] == 230
    assert pq.ParquetFile(report["output"]["path"]).num_row_groups == 15


def test_jsonl_shards_with_invalid_rows_are_byte_identical(tmp_path: Path) -> None:
    rows = groups(170, seed=1, bad={70, 71, 90, 169})
    source = write_jsonl(tmp_path / "in.jsonl", rows, newline="\r\n")
    report = assert_same_run(tmp_path, source, 3, batch_size=20, skip_invalid=True, **AUGMENTED)
    assert report["dropped"]["total"] == 4
    rows_seen = [item["row"] for item in report["dropped"]["listed"]]
    assert rows_seen == sorted(rows_seen)  # line numbers: blank lines counted, in file order


def test_a_batch_with_only_invalid_rows_writes_no_row_group(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", groups(60, bad=set(range(20, 30))), 25)
    report = assert_same_run(tmp_path, source, 3, batch_size=10, skip_invalid=True)
    assert pq.ParquetFile(report["output"]["path"]).num_row_groups == 5


def test_more_shards_than_batches_and_the_convenience_runner(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", groups(30))
    plan = plan_grrm_rl_shards(source, tmp_path / "x.parquet", 10, batch_size=8)
    assert [(s.start, s.stop) for s in plan.shards] == [(0, 9), (9, 18), (18, 28), (28, None)]
    single = prepare_grrm_rl(source, tmp_path / "single.parquet", batch_size=8)
    sharded = prepare_grrm_rl_sharded(source, tmp_path / "sharded.parquet", 10, batch_size=8)
    assert sha256(sharded.output_path) == sha256(single.output_path)


def test_invalid_rows_fail_like_the_single_run_and_clean_up(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", groups(50, bad={3, 41}), 50)
    with pytest.raises(DataValidationError) as single:
        prepare_grrm_rl(source, tmp_path / "single.parquet", batch_size=10)
    with pytest.raises(DataValidationError) as sharded:
        prepare_grrm_rl_sharded(source, tmp_path / "sharded.parquet", 3, batch_size=10)
    assert str(sharded.value) == str(single.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_plan_checks_its_arguments(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", groups(5))
    with pytest.raises(DataError, match="shards"):
        plan_grrm_rl_shards(source, tmp_path / "x.parquet", 0)
    with pytest.raises(DataError, match="batch_size"):
        plan_grrm_rl_shards(source, tmp_path / "x.parquet", 2, batch_size=0)
    with pytest.raises(TypeError):
        plan_grrm_rl_shards(source, tmp_path / "x.parquet", 2, no_such_option=1)


def test_duplicates_spanning_shards_are_reported_as_by_a_single_run(tmp_path: Path) -> None:
    rows = groups(90, seed=2)
    rows[80]["src_text"] = "  QUELLE 3 ✓ "  # row 3's prompt, in the last shard
    rows[40]["src_text"] = rows[41]["src_text"]
    source = write_parquet(tmp_path / "in.parquet", rows, row_group_size=30)
    report = assert_same_run(tmp_path, source, 3, batch_size=10, **AUGMENTED)
    within = report["duplicates"]["within"]["train"]
    assert (within["units"], within["count"], within["prompts"]) == (90, 4, 2)
    assert [[o["row"] for o in item["occurrences"]] for item in within["listed"]] == [
        [3, 80],
        [40, 41],
    ]
