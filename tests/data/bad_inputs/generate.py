"""Writes the binary cases of the bad-input corpus (parquet files), next to the committed JSONL
ones: `python tests/data/bad_inputs/generate.py DIR`. The tests call `generate(tmp_dir)`, so
nothing binary is committed; `expected.yaml` lists these files like the others.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def _openjudge(query: str, label: Any = 4) -> dict[str, Any]:
    answer = {
        "role": "assistant",
        "content": f"An answer to {query}",
        "label": {"helpfulness": label},
    }
    return {"input": [{"role": "user", "content": query}], "output": [{"answer": answer}]}


def _grrm(i: int, scores: list[Any] | None = None) -> dict[str, Any]:
    return {
        "src_text": f"Source sentence {i}.",
        "src_lang": "en",
        "trg_lang": "de",
        "mt_texts": [f"Satz {i}-0.", f"Satz {i}-1."],
        "scores": scores if scores is not None else [9.0, 5.0],
        "analysis": f"Candidate A is best for sentence {i}.",
    }


def _sft(query: str) -> dict[str, Any]:
    turns = [
        {"role": "user", "content": query},
        {"role": "assistant", "content": "<score>3</score>"},
    ]
    return {"messages": turns}


def _write(path: Path, rows: list[dict[str, Any]], schema: pa.Schema | None = None) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def _cut_in_half(path: Path) -> Path:
    """The first half of the file's bytes: what an interrupted copy or download leaves."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def generate(directory: Path) -> list[Path]:
    """Write every generated case into `directory`; returns their paths."""
    d = Path(directory)
    many = [_openjudge(f"Question {i}?", i % 5) for i in range(40)]
    grrm_rows = [_grrm(i) for i in range(40)]
    sft_rows = [_sft(f"Rate answer {i}.") for i in range(40)]
    return [
        _cut_in_half(_write(d / "oj_truncated.parquet", many)),
        _write(d / "oj_wrong_schema.parquet", grrm_rows[:3]),  # GRRM columns, read as a judge set
        _write(
            d / "oj_label_out_of_range.parquet",
            [_openjudge(f"Q{i}?", [4, 9, 2][i]) for i in range(3)],
        ),
        _write(  # `output` as plain text instead of a list of answers
            d / "oj_wrong_column_types.parquet",
            [{"input": r["input"], "output": "An answer."} for r in many[:3]],
        ),
        _cut_in_half(_write(d / "sft_truncated.parquet", sft_rows)),
        _write(d / "sft_wrong_schema.parquet", many[:3]),  # OpenJudge columns, no `messages`
        _cut_in_half(_write(d / "grrm_truncated.parquet", grrm_rows)),
        _write(d / "grrm_wrong_schema.parquet", many[:3]),  # OpenJudge columns
        _write(  # a double column (as pandas writes one) with a fraction in row 1
            d / "grrm_float_scores.parquet", [_grrm(0), _grrm(1, [7.5, 3.0]), _grrm(2)]
        ),
        _write(  # `mt_texts` as one string instead of a list of candidates
            d / "grrm_mt_not_a_list.parquet",
            [{**row, "mt_texts": " / ".join(row["mt_texts"])} for row in grrm_rows[:3]],
        ),
    ]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python generate.py DIR")
    for written in generate(Path(sys.argv[1])):
        print(written)
