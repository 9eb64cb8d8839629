"""Validation and cleaning: a JSONL record row by row (`_check_row`), a parquet batch
column-wise in Arrow (`_valid_mask`). Both apply the same rules (see the package docstring);
`tests/data/test_grrm_validators.py` checks on generated rows that they accept and reject exactly
the same rows, for the same reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from judgeflow.data.grrm.common import _Clean, _Columns, _Group, _offsets, _Problem
from judgeflow.data.grrm_template import (
    ASCII_WHITESPACE,
    LANG_NAMES,
    MAX_CANDIDATES,
    MIN_CANDIDATES,
    UNUSUAL_WHITESPACE,
    VERDICT_WORDS,
    clean_analysis,
    language_name,
)
from judgeflow.data.jsonl import BadLine, not_an_object


def _as_score(value: Any) -> int | None:
    """An int, or an integral float as that int; None for anything else (bool included).

    Floats beyond 2**53 are refused: past that a float no longer names one integer.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_EXACT_FLOAT:
        return int(value)
    return None


_MAX_EXACT_FLOAT = 2.0**53


def _language(value: Any, key: str) -> tuple[str, _Problem | None]:
    if value is None:
        return "", _Problem("missing", key, "value is missing")
    if not isinstance(value, str):
        return "", _Problem("language", key, f"must be a string, got {type(value).__name__}")
    try:
        return language_name(value), None
    except ValueError as err:
        return "", _Problem("language", key, str(err))


def _check_row(
    cols: _Columns,
    src: Any,
    src_lang: Any,
    trg_lang: Any,
    mts: Any,
    scores: Any,
    analysis: Any,
    score_range: tuple[int, int] | None,
) -> _Group | _Problem:
    """Validate one row; the first problem found is returned (one per row, in column order).

    This is the definition of a valid row. The columnar check (`_valid_mask`) must agree with
    it; it only exists to avoid calling this on every row of a large parquet file.
    """
    if src is None:
        return _Problem("missing", cols.src, "value is missing")
    if not isinstance(src, str) or not src.strip(ASCII_WHITESPACE):
        return _Problem("text", cols.src, "must be a non-blank string")
    src_name, problem = _language(src_lang, cols.src_lang)
    if problem:
        return problem
    trg_name, problem = _language(trg_lang, cols.trg_lang)
    if problem:
        return problem
    if mts is None:
        return _Problem("missing", cols.mt, "value is missing")
    if not isinstance(mts, list):
        return _Problem("text", cols.mt, f"must be a list of strings, got {type(mts).__name__}")
    if not MIN_CANDIDATES <= len(mts) <= MAX_CANDIDATES:
        return _Problem(
            "candidate_count",
            cols.mt,
            f"has {len(mts)} candidates; GRRM needs {MIN_CANDIDATES} to {MAX_CANDIDATES}",
        )
    for i, text in enumerate(mts):
        if not isinstance(text, str):
            kind = "missing" if text is None else "text"
            return _Problem(kind, f"{cols.mt}[{i}]", "must be a string")
    if scores is None:
        return _Problem("missing", cols.score, "value is missing")
    if not isinstance(scores, list):
        return _Problem("score", cols.score, f"must be a list, got {type(scores).__name__}")
    if len(scores) != len(mts):
        return _Problem(
            "length_mismatch",
            cols.score,
            f"has {len(scores)} scores for {len(mts)} candidates in '{cols.mt}'",
        )
    ints: list[int] = []
    for i, value in enumerate(scores):
        score = _as_score(value)
        if score is None:
            return _Problem("score", f"{cols.score}[{i}]", f"must be an integer, got {value!r}")
        if score_range is not None and not score_range[0] <= score <= score_range[1]:
            low, high = score_range
            return _Problem("score", f"{cols.score}[{i}]", f"{score} is outside {low}..{high}")
        ints.append(score)
    if cols.analysis is not None:
        if analysis is None:
            return _Problem("missing", cols.analysis, "value is missing")
        if not isinstance(analysis, str):
            return _Problem("analysis", cols.analysis, "must be a string")
        if not clean_analysis(analysis).strip():
            return _Problem(
                "analysis", cols.analysis, "is empty once its last (verdict) line is removed"
            )
    return _Group(src, src_lang, trg_lang, src_name, trg_name, mts, ints, analysis)


def _check_values(
    cols: _Columns, values: list[Any], score_range: tuple[int, int] | None
) -> _Group | _Problem:
    """`_check_row` on one row's values in `cols.required()` order."""
    src, src_lang, trg_lang, mts, scores = values[:5]
    analysis = values[5] if cols.analysis is not None else None
    return _check_row(cols, src, src_lang, trg_lang, mts, scores, analysis, score_range)


def _as_type(array: pa.Array, target: pa.DataType) -> pa.Array | None:
    """`array` cast to `target` (large/dictionary/view variants), or None when it is another
    kind of data (then every row fails `_check_row` and gets its message there)."""
    if array.type == target:
        return array
    try:
        return array.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _rows_with(bad_values: np.ndarray, parents: np.ndarray, n: int) -> np.ndarray:
    """Per row: does any of its list elements have `bad_values` set."""
    return np.bincount(parents[bad_values], minlength=n) > 0


def _language_names(codes: pa.Array | None, n: int) -> tuple[pa.Array, np.ndarray]:
    """(names, ok) for a column of codes, with `language_name`'s rule."""
    if codes is None:
        return pa.nulls(n, pa.string()), np.zeros(n, bool)
    lengths = pc.utf8_length(codes)
    found = pc.index_in(codes, value_set=_LANG_CODES)
    names = pc.if_else(pc.equal(lengths, 2), pc.take(_LANG_VALUES, found), codes)
    blank = pc.equal(pc.utf8_length(pc.ascii_trim_whitespace(codes)), 0)
    ok = pc.and_(pc.is_valid(names), pc.and_(pc.greater_equal(lengths, 2), pc.invert(blank)))
    return names, ok.fill_null(False).to_numpy(zero_copy_only=False)


_LANG_CODES = pa.array(list(LANG_NAMES), pa.string())
_LANG_VALUES = pa.array(list(LANG_NAMES.values()), pa.string())


def _score_checks(
    scores: pa.Array, parents: np.ndarray, n: int, score_range: tuple[int, int] | None
) -> tuple[pa.Array | None, np.ndarray]:
    """(flat int64 scores or None, per-row ok) for a list<int*> or list<float*> column."""
    value_type = scores.type.value_type if pa.types.is_list(scores.type) else None
    if value_type is None or not (
        pa.types.is_integer(value_type) or pa.types.is_floating(value_type)
    ):
        return None, np.zeros(n, bool)
    flat = pc.list_flatten(scores)
    bad = pc.is_null(flat)
    if pa.types.is_floating(value_type):
        flat = flat.cast(pa.float64())
        integral = pc.and_(
            pc.is_finite(flat),
            pc.and_(pc.equal(pc.floor(flat), flat), pc.less_equal(pc.abs(flat), _MAX_EXACT_FLOAT)),
        )
        bad = pc.or_(bad, pc.invert(integral))
    if score_range is not None:
        low, high = score_range
        outside = pc.or_(pc.less(flat, low), pc.greater(flat, high))
        bad = pc.or_(bad, outside)
    bad_np = bad.fill_null(True).to_numpy(zero_copy_only=False)
    ok = ~_rows_with(bad_np, parents, n)
    as_int = pc.if_else(pa.array(bad_np), 0, flat).cast(pa.int64())  # bad rows get dropped
    return as_int, ok


def _valid_mask(
    batch: pa.RecordBatch, cols: _Columns, score_range: tuple[int, int] | None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Columnar version of `_check_row` (without the analysis check) for a parquet batch.

    Returns the per-row mask and the arrays the renderer needs (normalised types).
    """
    n = batch.num_rows
    ok = np.ones(n, bool)
    src = _as_type(batch.column(cols.src), pa.string())
    if src is None:
        ok[:] = False
    else:
        blank = pc.equal(pc.utf8_length(pc.ascii_trim_whitespace(src)), 0)
        ok &= pc.invert(blank).fill_null(False).to_numpy(zero_copy_only=False)
    names = {}
    for key in (cols.src_lang, cols.trg_lang):
        codes = _as_type(batch.column(key), pa.string())
        names[key], lang_ok = _language_names(codes, n)
        ok &= lang_ok
        if codes is not None:
            names[f"{key}:code"] = codes
    mt = _as_type(batch.column(cols.mt), pa.list_(pa.string()))
    mt_lengths = np.full(n, -1)
    if mt is None:
        ok[:] = False
    else:
        mt_lengths = pc.list_value_length(mt).fill_null(-1).to_numpy(zero_copy_only=False)
        ok &= (mt_lengths >= MIN_CANDIDATES) & (mt_lengths <= MAX_CANDIDATES)
        parents = pc.list_parent_indices(mt).to_numpy(zero_copy_only=False)
        null_text = pc.is_null(pc.list_flatten(mt)).to_numpy(zero_copy_only=False)
        ok &= ~_rows_with(null_text, parents, n)
    scores = batch.column(cols.score)
    if pa.types.is_large_list(scores.type):
        scores = _as_type(scores, pa.list_(scores.type.value_type))
    flat_scores, scores_ok, parents = None, np.zeros(n, bool), None
    if scores is not None and pa.types.is_list(scores.type):
        lengths = pc.list_value_length(scores).fill_null(-2).to_numpy(zero_copy_only=False)
        parents = pc.list_parent_indices(scores).to_numpy(zero_copy_only=False)
        flat_scores, scores_ok = _score_checks(scores, parents, n, score_range)
        scores_ok &= lengths == mt_lengths
    ok &= scores_ok
    arrays = {"src": src, "mt": mt, "flat_scores": flat_scores, "score_parents": parents, **names}
    return ok, arrays


_PLAIN_WHITESPACE = " \t\n"
_UNUSUAL = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in UNUSUAL_WHITESPACE) + "]"
#: The last line when it holds a verdict word, with the line break before it (RE2 `$` is the
#: end of the text; `[^\n]` keeps the match inside one line).
_VERDICT_LINE = "\n?[^\n]*(?:" + "|".join(map(re.escape, VERDICT_WORDS)) + ")[^\n]*$"


def _clean_analyses(texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """`clean_analysis` of every row, and whether the row's analysis is valid (a string that is
    not blank once cleaned), as `_check_row` decides.

    A text without `UNUSUAL_WHITESPACE` is cleaned in Arrow (trim, drop a verdict last line);
    the few with such characters go through `clean_analysis` itself.
    """
    n = len(texts)
    kind = texts.type.value_type if pa.types.is_dictionary(texts.type) else texts.type
    is_text = (
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    )
    texts = _as_type(texts, pa.string()) if is_text else None
    if texts is None:  # not strings (a number cast to text would be wrong): every row fails
        return pa.nulls(n, pa.string()), np.zeros(n, bool)
    cleaned = pc.replace_substring_regex(
        pc.utf8_trim(texts, _PLAIN_WHITESPACE), pattern=_VERDICT_LINE, replacement=""
    )
    unusual = pc.match_substring_regex(texts, _UNUSUAL).fill_null(False)
    unusual_rows = np.flatnonzero(unusual.to_numpy(zero_copy_only=False))
    if len(unusual_rows):
        slow = [clean_analysis(texts[int(i)].as_py()) for i in unusual_rows]
        cleaned = pc.replace_with_mask(cleaned, unusual, pa.array(slow, pa.string()))
    blank = pc.equal(pc.utf8_length(pc.utf8_trim(cleaned, _PLAIN_WHITESPACE)), 0)
    ok = pc.invert(blank).fill_null(False).to_numpy(zero_copy_only=False).copy()
    if len(unusual_rows):  # Python's notion of blank (str.strip) for the texts that need it
        ok[unusual_rows] = [bool(text.strip()) for text in slow]
    return cleaned, ok


def _clean_from_parquet(
    rows: Sequence[int],
    batch: pa.RecordBatch,
    cols: _Columns,
    score_range: tuple[int, int] | None,
    on_problem: Callable[[int, _Problem], None],
) -> _Clean:
    """Validate a parquet batch column-wise; rows that fail get `_check_row`'s message."""
    ok, arrays = _valid_mask(batch, cols, score_range)
    analyses: pa.Array | None = None
    if cols.analysis is not None:
        analyses, analysis_ok = _clean_analyses(batch.column(cols.analysis))
        ok &= analysis_ok
    for i in np.flatnonzero(~ok):
        values = [batch.column(name)[int(i)].as_py() for name in cols.required()]
        checked = _check_values(cols, values, score_range)
        if isinstance(checked, _Group):  # the two checks disagree: a bug, never silent
            checked = _Problem("text", None, "rejected by the columnar check (please report)")
        on_problem(rows[int(i)], checked)
    if not ok.any():
        return _empty_clean(cols)
    keep = pa.array(ok)
    flat = arrays["flat_scores"].filter(pa.array(ok[arrays["score_parents"]]))
    kept_sizes = pc.list_value_length(arrays["mt"]).to_numpy(zero_copy_only=False)[ok]
    return _Clean(
        group_ids=pa.array(np.asarray(rows, dtype=np.int64)[ok]),
        src_lang=arrays[f"{cols.src_lang}:code"].filter(keep),
        trg_lang=arrays[f"{cols.trg_lang}:code"].filter(keep),
        src_name=arrays[cols.src_lang].filter(keep),
        trg_name=arrays[cols.trg_lang].filter(keep),
        src=arrays["src"].filter(keep),
        mt=arrays["mt"].filter(keep),
        scores=pa.ListArray.from_arrays(pa.array(_offsets(kept_sizes)), flat),
        analyses=analyses.filter(keep) if analyses is not None else None,
    )


def _clean_from_records(
    rows: Sequence[int],
    records: list[Any],
    cols: _Columns,
    score_range: tuple[int, int] | None,
    on_problem: Callable[[int, _Problem], None],
) -> _Clean:
    """Validate JSONL records row by row (they are Python objects already)."""
    groups: list[tuple[int, _Group]] = []
    for row, record in zip(rows, records, strict=True):
        if isinstance(record, BadLine):
            on_problem(row, _Problem("json", None, str(record)))
            continue
        if not isinstance(record, dict):
            on_problem(row, _Problem("json", None, not_an_object(record)))
            continue
        values = [record.get(name) for name in cols.required()]
        checked = _check_values(cols, values, score_range)
        if isinstance(checked, _Problem):
            on_problem(row, checked)
        else:
            groups.append((row, checked))
    if not groups:
        return _empty_clean(cols)
    gs = [g for _, g in groups]
    return _Clean(
        group_ids=pa.array([row for row, _ in groups], pa.int64()),
        src_lang=pa.array([g.src_lang for g in gs], pa.string()),
        trg_lang=pa.array([g.trg_lang for g in gs], pa.string()),
        src_name=pa.array([g.src_lang_name for g in gs], pa.string()),
        trg_name=pa.array([g.trg_lang_name for g in gs], pa.string()),
        src=pa.array([g.src_text for g in gs], pa.string()),
        mt=pa.array([g.candidates for g in gs], pa.list_(pa.string())),
        scores=pa.array([g.scores for g in gs], pa.list_(pa.int64())),
        analyses=(
            pa.array([clean_analysis(g.analysis or "") for g in gs], pa.string())
            if cols.analysis
            else None
        ),
    )


def _empty_clean(cols: _Columns) -> _Clean:
    strings = pa.array([], pa.string())
    return _Clean(
        group_ids=pa.array([], pa.int64()),
        src_lang=strings,
        trg_lang=strings,
        src_name=strings,
        trg_name=strings,
        src=strings,
        mt=pa.array([], pa.list_(pa.string())),
        scores=pa.array([], pa.list_(pa.int64())),
        analyses=strings if cols.analysis is not None else None,
    )
