"""The two GRRM validators agree: `_check_row` (JSONL records, row by row) and `_valid_mask` +
`_clean_analyses` (a parquet batch, column-wise in Arrow) accept exactly the same generated rows.

Rows are generated with a fixed seed from valid and invalid variants of every field (blank and
unusual-whitespace texts, unknown codes and language names, 0 to 10 candidates with null or
empty texts, scores as ints, integral and fractional floats, NaN, bools and out-of-range values,
length mismatches, analyses that are blank once their verdict line is dropped), with several
Arrow types per column, so each batch is one parquet schema."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from judgeflow.data.grrm.common import _Columns, _Group
from judgeflow.data.grrm.validate import _check_values, _clean_analyses, _valid_mask
from judgeflow.data.grrm_template import UNUSUAL_WHITESPACE, VERDICT_WORDS

COLS = {
    "rl": _Columns("src", "sl", "tl", "mt", "scores", None),
    "sft": _Columns("src", "sl", "tl", "mt", "scores", "analysis"),
}
# (valid-looking, anything) pairs: a field is drawn from the first list 85% of the time.
TEXTS = (["Hello world.", "Ünïcødé ✓", "x" + UNUSUAL_WHITESPACE[3] + "y", "\t tab \n"],
         ["  ", "", None, UNUSUAL_WHITESPACE[:3]])  # fmt: skip
LANGS = (["en", "de", "zh", "German"], ["xx", "", " ", None, "EN", "pt-BR"])
ANALYSES = (["Good grammar.", f"Fine.\nThe {VERDICT_WORDS[0]} is A.", "ok\r\n"],
            ["   ", None, f"{VERDICT_WORDS[0]}: A", "\u00a0\u2003"])  # fmt: skip


def _pick(rng: random.Random, options: tuple[list, list]) -> object:
    return rng.choice(options[0] if rng.random() < 0.85 else options[1])


def _mt(rng: random.Random) -> list[str | None] | None:
    if rng.random() < 0.05:
        return None
    n = rng.choice([2, 2, 3, 4, 8]) if rng.random() < 0.85 else rng.choice([0, 1, 9, 10])
    return [rng.choice(["Hallo Welt.", "", "  ", None, "Bonjour."]) if rng.random() < 0.05
            else f"Kandidat {i}" for i in range(n)]  # fmt: skip


def _scores(rng: random.Random, n: int, kind: str) -> list | None:
    if rng.random() < 0.05:
        return None
    k = n if rng.random() < 0.9 else n + rng.choice([1, -1])
    good, bad = {
        "int": ([0, 3, 7, 10], [-1, 11, None]),
        "float": ([0.0, 7.0, 10.0, -0.0], [7.5, float("nan"), 11.0, None]),
        "bool": ([True, False], [None]),
        "str": (["7", "x"], [None]),
    }[kind]
    return [rng.choice(good if rng.random() < 0.97 else bad) for _ in range(max(k, 0))]


SCORE_TYPES = {
    "int": [pa.list_(pa.int64()), pa.list_(pa.int32()), pa.large_list(pa.int64())],
    "float": [pa.list_(pa.float64()), pa.list_(pa.float32())],
    "bool": [pa.list_(pa.bool_())],
    "str": [pa.list_(pa.string())],
}


def _batch(rng: random.Random, cols: _Columns, rows: int) -> pa.RecordBatch:
    kind = rng.choice(["int", "int", "int", "float", "float", "bool", "str"])
    score_type = rng.choice(SCORE_TYPES[kind])
    mts = [_mt(rng) for _ in range(rows)]
    data = {
        "src": pa.array([_pick(rng, TEXTS) for _ in range(rows)], pa.string()),
        "sl": pa.array([_pick(rng, LANGS) for _ in range(rows)], pa.string()),
        "tl": pa.array([_pick(rng, LANGS) for _ in range(rows)], pa.string()),
        "mt": pa.array(mts, pa.list_(pa.string())),
        "scores": pa.array([_scores(rng, len(m or []), kind) for m in mts], score_type),
    }
    if cols.analysis is not None:
        data["analysis"] = pa.array([_pick(rng, ANALYSES) for _ in range(rows)], pa.string())
    return pa.RecordBatch.from_pydict(data)


@pytest.mark.parametrize("which", ["rl", "sft"])
@pytest.mark.parametrize("score_range", [(0, 10), None])
def test_row_and_column_validators_accept_the_same_rows(
    which: str, score_range: tuple[int, int] | None
) -> None:
    cols = COLS[which]
    rng = random.Random(f"{which}-{score_range}")
    checked = accepted = 0
    for _ in range(30):
        batch = _batch(rng, cols, 120)
        ok, _ = _valid_mask(batch, cols, score_range)
        if cols.analysis is not None:
            _, analysis_ok = _clean_analyses(batch.column(cols.analysis))
            ok = ok & analysis_ok
        for i in range(batch.num_rows):
            values = [batch.column(name)[i].as_py() for name in cols.required()]
            by_row = isinstance(_check_values(cols, values, score_range), _Group)
            assert bool(ok[i]) == by_row, (
                f"columnar says {bool(ok[i])}, row-wise says {by_row} for {values!r} "
                f"(scores type {batch.column('scores').type})"
            )
            checked += 1
            accepted += by_row
    # The generator exercises both outcomes, not just rejections.
    assert checked == 3600 and 0.1 < accepted / checked < 0.9, accepted
