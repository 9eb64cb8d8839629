"""GRRM data: TowerBlocks-MT-Ranking-style groups to LLaMA-Factory SFT and verl RL parquet.

An input row is one group: a source text, its language pair, 2 to 8 candidate translations, one
integer score per candidate and (for SFT) the annotator's analysis. Column names are
configurable; the defaults are the TowerBlocks-MT-Ranking ones.

Both preparations stream: the input is read in record batches (`pyarrow` `iter_batches`, or
JSONL line by line). A parquet batch is validated column-wise in Arrow (JSONL records, already
Python objects, row by row), prompts, targets and ground truths are rendered with Arrow string
kernels over the whole batch, and the table is appended to a `ParquetWriter` in a background
thread while the next batch renders; the writer writes to a temporary file published atomically
at the end. Memory is bounded by the batch size, not by the input size. The report
(`<stem>.report.json`) is published after the data file.
A large RL input can also be prepared in batch-aligned shards by several workers and merged into
the same bytes (`judgeflow.data.shards`); both paths read, render and write with the functions
below (`_prepared_tables`, `_write_tables`, `_publish_report`).

Decisions (see DESIGN "GRRM"): scores must be integers; an integral float (`7.0`, e.g. a
parquet `double` column) is accepted as that integer, anything else (`7.5`, NaN, bool, str) is
an error, as is a score outside `score_range` (0-10 by default, the scale the prompt
announces). A two-letter language code must be one of `LANG_NAMES`; a longer string is a
language name and passes through unchanged. Output rows are not shuffled (the reference shuffles
the whole file; that needs it in memory): LLaMA-Factory's trainer and verl with
`data.shuffle=True` shuffle anyway.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
import os
import random
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import IO, Any, Literal, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import judgeflow
from judgeflow.data.errors import (
    MAX_LISTED_ISSUES,
    DataError,
    DataFileNotFoundError,
    DataValidationError,
    RowIssue,
)
from judgeflow.data.grrm_template import (
    ASCII_WHITESPACE,
    GRRM_CANDIDATE_BLOCK,
    GRRM_PROMPT_HEAD,
    GRRM_VERDICT_BLOCK,
    LABELS,
    LANG_NAMES,
    MAX_CANDIDATES,
    MIN_CANDIDATES,
    RANK_STEP,
    RANK_TIE,
    SCORE_ITEM,
    SCORES_SEPARATOR,
    UNUSUAL_WHITESPACE,
    VERDICT_WORDS,
    candidate_blocks,
    clean_analysis,
    language_name,
    prompt_head,
    render_grrm_target,
)
from judgeflow.data.io import PathLike, atomic_write_text, atomic_writer, exists, open_binary
from judgeflow.data.prepare import output_paths

__all__ = [
    "AUGMENTATION_KINDS",
    "GRRM_ABILITY",
    "GRRM_DATA_SOURCE",
    "GRRM_DROP_REASONS",
    "GrrmPrepareResult",
    "augmentation_plan",
    "grrm_sft_example",
    "prepare_grrm_rl",
    "prepare_grrm_sft",
]

GRRM_ABILITY = "grrm/ranking"
GRRM_DATA_SOURCE = "TowerBlocks-MT-Ranking.ranking_score"
AUGMENTATION_KINDS = ("original", "shuffle", "subgroup", "subgroup-shuffle")
#: Why a row can be invalid; every key appears in the report, with 0 when it did not happen.
GRRM_DROP_REASONS = (
    "json",  # a JSONL line that is not a JSON object
    "missing",  # a required value is null or absent
    "text",  # source text or a candidate is not a string (or the source text is blank)
    "language",  # unknown two-letter code, or not a string
    "candidate_count",  # fewer than 2 or more than 8 candidates
    "length_mismatch",  # candidates and scores differ in number
    "score",  # not an integer, or outside score_range
    "analysis",  # not a string, or empty once its verdict line is removed
)
REPORT_SCHEMA_VERSION = 1
#: How many dropped rows the report lists individually (all are counted).
MAX_LISTED_DROPS = 50
DEFAULT_BATCH_SIZE = 1024

InputFormat = Literal["auto", "parquet", "jsonl"]
Kind = Literal["grrm-sft", "grrm-rl"]

_MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
_MESSAGES = pa.list_(_MESSAGE)
SFT_SCHEMA = pa.schema([("messages", _MESSAGES), ("group_id", pa.int64())])
RL_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", _MESSAGES),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct(
                [
                    ("split", pa.string()),
                    ("index", pa.int64()),
                    ("group_id", pa.int64()),
                    ("candidate_indices", pa.list_(pa.int64())),
                    ("augmentation", pa.string()),
                    ("src_lang", pa.string()),
                    ("trg_lang", pa.string()),
                ]
            ),
        ),
    ]
)


@dataclass(frozen=True)
class GrrmPrepareResult:
    """Where a GRRM preparation wrote its parquet and report, and the report itself."""

    output_path: str
    report_path: str
    report: dict[str, Any]


@dataclass(frozen=True)
class _Columns:
    """The input column names (configurable because GRRM-style sets name them differently)."""

    src: str
    src_lang: str
    trg_lang: str
    mt: str
    score: str
    analysis: str | None  # None: not read (RL)

    def required(self) -> list[str]:
        names = [self.src, self.src_lang, self.trg_lang, self.mt, self.score]
        return [*names, self.analysis] if self.analysis is not None else names


class _Group(NamedTuple):
    """One validated input row."""

    src_text: str
    src_lang: str
    trg_lang: str
    src_lang_name: str
    trg_lang_name: str
    candidates: list[str]
    scores: list[int]
    analysis: str | None  # raw analysis (SFT only); cleaned when the target is rendered


class _Problem(NamedTuple):
    reason: str
    field: str | None
    message: str


# --------------------------------------------------------------------------- augmentation


@cache
def _proper_subsets(n: int) -> tuple[tuple[int, ...], ...]:
    """All subsets of `range(n)` of size 2 … n-1, by size then lexicographically."""
    return tuple(s for r in range(2, n) for s in itertools.combinations(range(n), r))


def _shuffles(size: int, count: int, rng: random.Random) -> list[tuple[int, ...]]:
    """Up to `count` distinct permutations of `range(size)`, never the identity.

    When `count` is at least half of the `size! - 1` candidates they are enumerated and sampled
    (so exhaustion needs no retry loop); otherwise random shuffles are drawn until enough
    distinct ones are found (the expected number of draws is below 2 per permutation).
    """
    if count <= 0 or size < 2:
        return []
    total = math.factorial(size) - 1
    if 2 * count >= total:
        others = list(itertools.permutations(range(size)))[1:]  # [0] is the identity
        return rng.sample(others, min(count, total))
    seen = {tuple(range(size))}
    found: list[tuple[int, ...]] = []
    order = list(range(size))
    while len(found) < count:
        rng.shuffle(order)
        candidate = tuple(order)
        if candidate not in seen:
            seen.add(candidate)
            found.append(candidate)
    return found


def augmentation_plan(
    n: int, subgroup_augment: int, shuffle_augment: int, rng: random.Random
) -> list[tuple[str, tuple[int, ...]]]:
    """The RL rows of one group of `n` candidates as `(kind, candidate_indices)`.

    `candidate_indices[j]` is the input candidate that gets label `LABELS[j]`. Order: the
    original, its shuffles, then each sampled subgroup (original relative order) followed by its
    shuffles. Subgroups (only for n > 2) are `min(subgroup_augment, 2**n - n - 2)` distinct
    proper subsets of size 2 … n-1, drawn uniformly from the list of all of them.
    """
    identity = tuple(range(n))
    plan = [("original", identity)]
    plan += [("shuffle", p) for p in _shuffles(n, shuffle_augment, rng)]
    if subgroup_augment > 0 and n > 2:
        subsets = _proper_subsets(n)
        for pick in rng.sample(range(len(subsets)), min(subgroup_augment, len(subsets))):
            subset = subsets[pick]
            plan.append(("subgroup", subset))
            plan += [
                ("subgroup-shuffle", tuple(subset[i] for i in p))
                for p in _shuffles(len(subset), shuffle_augment, rng)
            ]
    return plan


def _group_rng(seed: int, group_id: int) -> random.Random:
    """One generator per group: output does not depend on batch size or on skipped rows."""
    return random.Random(f"judgeflow-grrm:{seed}:{group_id}")


# --------------------------------------------------------------------------- reading


def _detect_format(path: str, input_format: InputFormat) -> Literal["parquet", "jsonl"]:
    if input_format != "auto":
        return input_format
    lowered = path.lower()
    if lowered.endswith(".parquet"):
        return "parquet"
    if lowered.endswith((".jsonl", ".json")):
        return "jsonl"
    raise DataError(f"{path}: cannot tell the format from the name; pass input_format")


@dataclass(frozen=True)
class _Span:
    """A row range of the input that starts on a batch boundary, so that its batches are the
    ones a whole-file run reads (and its output row groups the ones that run writes).

    Rows are parquet row numbers or 0-based JSONL line numbers (blank lines included): `start`
    is the first, `stop` is one past the last (None: to the end of the file). For JSONL,
    `offset` is the byte offset of line `start`, so a shard seeks instead of re-reading the file.
    """

    start: int = 0
    stop: int | None = None
    offset: int = 0


_WHOLE_FILE = _Span()


def _parquet_batches(
    path: str, columns: list[str], batch_size: int, span: _Span = _WHOLE_FILE
) -> Iterator[tuple[range, pa.RecordBatch]]:
    """(row numbers, record batch) per batch of `span`; only the needed columns are read.

    Only the row groups that overlap `span` are read. Batches are `batch_size` rows counted
    from `span.start` (the reader's batches may straddle row groups, so a span that starts
    inside a row group is re-cut rather than read with the reader's own boundaries).
    """
    with open_binary(path) as handle:
        parquet = pq.ParquetFile(handle)
        names = parquet.schema_arrow.names
        missing = [c for c in columns if c not in names]
        if missing:
            raise DataError(
                f"{path}: missing column(s) {missing} (columns: {names}); "
                "set the *_key arguments to this file's column names"
            )
        meta = parquet.metadata
        stop = meta.num_rows if span.stop is None else min(span.stop, meta.num_rows)
        groups: list[int] = []
        first_row = group_start = 0
        for group in range(meta.num_row_groups):
            group_rows = meta.row_group(group).num_rows
            if group_start + group_rows > span.start and group_start < stop:
                if not groups:
                    first_row = group_start
                groups.append(group)
            group_start += group_rows
        if not groups or stop <= span.start:
            return
        batches = parquet.iter_batches(batch_size=batch_size, columns=columns, row_groups=groups)
        start = span.start
        for batch in _recut(batches, span.start - first_row, stop - span.start, batch_size):
            yield range(start, start + batch.num_rows), batch
            start += batch.num_rows


def _recut(
    batches: Iterable[pa.RecordBatch], skip: int, count: int, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """`count` rows after the first `skip`, in batches of exactly `batch_size` (the last may be
    shorter). Batches that already have the right size pass through untouched."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        piece = batch.slice(skip, min(batch.num_rows - skip, count))
        skip = 0
        count -= piece.num_rows
        while piece.num_rows:
            take = min(batch_size - held, piece.num_rows)
            pending.append(piece.slice(0, take))
            held += take
            piece = piece.slice(take)
            if held == batch_size:
                yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
                pending, held = [], 0
        if count <= 0:
            break
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def _jsonl_batches(
    path: str, columns: list[str], batch_size: int, span: _Span = _WHOLE_FILE
) -> Iterator[tuple[list[int], list[Any]]]:
    """(line numbers, records) per batch of non-blank lines; rows are 0-based line numbers.

    A line that is not valid JSON is passed on as a `_BadLine` for the validator to report.
    Lines are split as Python's text mode splits them (universal newlines); `_jsonl_batch_starts`
    uses the same rule, so spans it finds line up with this reader.
    """
    with open_binary(path) as raw:
        if span.offset:
            raw.seek(span.offset)
        text: IO[str] = io.TextIOWrapper(raw, encoding="utf-8")
        rows: list[int] = []
        records: list[Any] = []
        for line_no, line in enumerate(text, start=span.start):
            if span.stop is not None and line_no >= span.stop:
                break
            if not line.strip():
                continue
            try:
                record: Any = json.loads(line)
            except ValueError as err:
                record = _BadLine(f"not valid JSON: {err}")
            rows.append(line_no)
            records.append(record)
            if len(rows) == batch_size:
                yield rows, records
                rows, records = [], []
        if rows:
            yield rows, records


def _jsonl_batch_starts(path: str, batch_size: int) -> tuple[list[_Span], int]:
    """Where each batch of a JSONL file starts, and the number of non-blank lines.

    Each span's `start`/`offset` are the line number and byte offset of the batch's first
    non-blank line (its `stop` is left open). One streaming pass that splits lines like
    `_jsonl_batches` (`newline=""` keeps the line endings, so byte lengths add up) and parses
    no JSON.
    """
    starts: list[_Span] = []
    records = offset = 0
    with open_binary(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        for line_no, line in enumerate(text):
            if line.strip():
                if records % batch_size == 0:
                    starts.append(_Span(start=line_no, offset=offset))
                records += 1
            offset += len(line.encode("utf-8"))
    return starts, records


class _BadLine(str):
    """A JSONL line that could not be parsed; the text is the parser's message."""


# --------------------------------------------------------------------------- validation


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


class _Clean(NamedTuple):
    """The valid groups of one batch as Arrow arrays, in input order."""

    group_ids: pa.Array  # int64: the input row of each group
    src_lang: pa.Array  # codes as given
    trg_lang: pa.Array
    src_name: pa.Array  # names for the prompt
    trg_name: pa.Array
    src: pa.Array
    mt: pa.Array  # list<string>
    scores: pa.Array  # list<int64>
    analyses: pa.Array | None  # string: cleaned analysis per group (SFT)


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
        if isinstance(record, _BadLine):
            on_problem(row, _Problem("json", None, str(record)))
            continue
        if not isinstance(record, dict):
            kind = type(record).__name__
            on_problem(row, _Problem("json", None, f"a line must be a JSON object, got {kind}"))
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


# --------------------------------------------------------------------------- rendering (Arrow)


def _template_parts(template: str, fields: dict[str, pa.Array]) -> list[str | pa.Array]:
    """A `str.format` template as its literal pieces with each field replaced by an array."""
    parts: list[str | pa.Array] = []
    for literal, name, _, _ in string.Formatter().parse(template):
        if literal:
            parts.append(literal)
        if name is not None:
            parts.append(fields[name])
    return parts


def _heads(clean: _Clean) -> pa.Array:
    """The prompt head per group, assembled in Arrow from `GRRM_PROMPT_HEAD`'s pieces."""
    fields = {"src_lang_name": clean.src_name, "trg_lang_name": clean.trg_name,
              "src_text": clean.src}  # fmt: skip
    return pc.binary_join_element_wise(*_template_parts(GRRM_PROMPT_HEAD, fields), "")


def _label_affixes(template: str, field: str) -> tuple[pa.Array, str]:
    """A template of `{label}` and one other `field`, split around that field: the text before
    it for each label (an array indexed by label position) and the text after it."""
    prefixes = [template.format_map({"label": label, field: "\0"}) for label in LABELS]
    suffixes = {text.split("\0")[1] for text in prefixes}
    assert len(suffixes) == 1, f"{template!r}: the label must come before {{{field}}}"
    return pa.array([text.split("\0")[0] for text in prefixes], pa.string()), suffixes.pop()


_BLOCK_PREFIXES, _BLOCK_SUFFIX = _label_affixes(GRRM_CANDIDATE_BLOCK, "text")
_SCORE_PREFIXES, _SCORE_SUFFIX = _label_affixes(SCORE_ITEM, "score")
_TRUTH_PREFIXES = pa.array([f'"{label}": ' for label in LABELS], pa.string())
_LABELS = pa.array(LABELS, pa.string())
#: Before each label of a ranking line: nothing (first), a tie, or a step down.
_RANK_SEPARATORS = pa.array(["", RANK_TIE, RANK_STEP], pa.string())


def _offsets(sizes: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(sizes) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return offsets


def _positions(sizes: np.ndarray) -> np.ndarray:
    """0, 1, …, size-1 for each list, concatenated (the label index of each element)."""
    offsets = _offsets(sizes)
    return np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], sizes)


def _joined_lists(items: pa.Array, sizes: np.ndarray, separator: str) -> pa.Array:
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(_offsets(sizes)), items), separator)


def _candidate_blocks(texts: pa.Array, sizes: np.ndarray) -> pa.Array:
    """Per row, its `Translation L:` blocks (texts flat in label order, `sizes` per row)."""
    prefixes = pc.take(_BLOCK_PREFIXES, pa.array(_positions(sizes)))
    blocks = pc.binary_join_element_wise(prefixes, texts, _BLOCK_SUFFIX, "")
    return _joined_lists(blocks, sizes, "")


def _ground_truths(scores: pa.Array, sizes: np.ndarray) -> pa.Array:
    """`{"A": 7, "B": 5}` per row, as `ground_truth_json` writes it."""
    prefixes = pc.take(_TRUTH_PREFIXES, pa.array(_positions(sizes)))
    items = pc.binary_join_element_wise(prefixes, scores.cast(pa.string()), "")
    return pc.binary_join_element_wise("{", _joined_lists(items, sizes, ", "), "}", "")


def _verdict_blocks(scores: pa.Array, sizes: np.ndarray) -> pa.Array:
    """`verdict_block` for every row at once (`scores` flat in label order, `sizes` per row).

    Each row's scores are sorted best first, label ascending inside a tie, by one sort of the
    whole batch on a single key (row, how far below the best score, label); the ranking and
    scores lines are then joined from those sorted labels.
    """
    values = scores.to_numpy(zero_copy_only=False)
    labels = _positions(sizes)
    rows = np.repeat(np.arange(len(sizes)), sizes)
    low, high = int(values.min()), int(values.max())
    if (high - low + 1) * len(values) * MAX_CANDIDATES < 2**62:
        below_best = high - values  # 0 for the best score
    else:  # a huge score range (no score_range): dense ranks keep the key within int64
        _, rank = np.unique(values, return_inverse=True)
        below_best = rank.max() - rank.reshape(-1)
    levels = int(below_best.max()) + 1
    order = np.argsort((rows * levels + below_best) * MAX_CANDIDATES + labels)  # unique keys
    values, labels = values[order], labels[order]  # rows keep their places: same offsets
    separator = np.full(len(order), 2, np.int64)  # a step down …
    separator[1:][values[1:] == values[:-1]] = 1  # … unless tied with the previous label
    separator[_offsets(sizes)[:-1]] = 0  # … and nothing before a row's first label
    ranked = pc.take(_LABELS, pa.array(labels))
    ranking = pc.binary_join_element_wise(
        pc.take(_RANK_SEPARATORS, pa.array(separator)), ranked, ""
    )
    items = pc.binary_join_element_wise(
        pc.take(_SCORE_PREFIXES, pa.array(labels)), pa.array(values).cast(pa.string()),
        _SCORE_SUFFIX, "",
    )  # fmt: skip
    fields = {
        "ranking": _joined_lists(ranking, sizes, ""),
        "scores": _joined_lists(items, sizes, SCORES_SEPARATOR),
    }
    return pc.binary_join_element_wise(*_template_parts(GRRM_VERDICT_BLOCK, fields), "")


def _messages_array(contents: pa.Array, per_row: int, roles: tuple[str, ...]) -> pa.Array:
    """list<struct<role, content>> with `per_row` messages per row (contents already in order)."""
    rows = len(contents) // per_row
    struct = pa.StructArray.from_arrays(
        [pa.array(list(roles) * rows, pa.string()), contents], fields=list(_MESSAGE)
    )
    offsets = pa.array(np.arange(0, len(contents) + 1, per_row, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, struct, type=_MESSAGES)


def _sft_table(clean: _Clean) -> pa.Table:
    sizes = pc.list_value_length(clean.mt).to_numpy(zero_copy_only=False)
    prompts = pc.binary_join_element_wise(
        _heads(clean), _candidate_blocks(pc.list_flatten(clean.mt), sizes), ""
    )
    assert clean.analyses is not None
    targets = pc.binary_join_element_wise(
        clean.analyses,
        _verdict_blocks(pc.list_flatten(clean.scores), sizes),
        "",
    )
    n = len(prompts)
    order = np.empty(2 * n, np.int64)
    order[0::2] = np.arange(n)
    order[1::2] = np.arange(n) + n
    contents = pc.take(pa.concat_arrays([prompts, targets]), pa.array(order))
    return pa.Table.from_arrays(
        [_messages_array(contents, 2, ("user", "assistant")), clean.group_ids], schema=SFT_SCHEMA
    )


@dataclass(frozen=True)
class _RlSettings:
    subgroup_augment: int
    shuffle_augment: int
    seed: int
    split: str
    data_source: str


def _rl_table(
    clean: _Clean, settings: _RlSettings, first_index: int, kinds: Counter[str]
) -> pa.Table:
    """Expand each group into its augmentation plan and assemble the verl rows in Arrow."""
    group_sizes = pc.list_value_length(clean.mt).to_numpy(zero_copy_only=False)
    group_starts = _offsets(group_sizes)[:-1]
    out_group: list[int] = []
    out_kind: list[str] = []
    out_sizes: list[int] = []
    local: list[int] = []
    for position, (group_id, size) in enumerate(
        zip(clean.group_ids.to_pylist(), group_sizes.tolist(), strict=True)
    ):
        rng = _group_rng(settings.seed, group_id)
        plan = augmentation_plan(size, settings.subgroup_augment, settings.shuffle_augment, rng)
        for kind, idx in plan:
            out_kind.append(kind)
            out_sizes.append(len(idx))
            local.extend(idx)
        out_group += [position] * len(plan)
    kinds.update(out_kind)
    n = len(out_kind)
    sizes = np.asarray(out_sizes, np.int64)
    rows_of = pa.array(np.asarray(out_group, np.int64))
    local_np = np.asarray(local, np.int64)
    flat_index = pa.array(local_np + np.repeat(group_starts[out_group], sizes))
    texts = pc.take(pc.list_flatten(clean.mt), flat_index)
    prompts = pc.binary_join_element_wise(
        pc.take(_heads(clean), rows_of), _candidate_blocks(texts, sizes), ""
    )
    truths = _ground_truths(pc.take(pc.list_flatten(clean.scores), flat_index), sizes)
    reward = pa.StructArray.from_arrays(
        [pa.array(["rule"] * n, pa.string()), truths],
        fields=list(RL_SCHEMA.field("reward_model").type),
    )
    extra = pa.StructArray.from_arrays(
        [
            pa.array([settings.split] * n, pa.string()),
            pa.array(np.arange(first_index, first_index + n, dtype=np.int64)),
            pc.take(clean.group_ids, rows_of),
            pa.ListArray.from_arrays(pa.array(_offsets(sizes)), pa.array(local_np)),
            pa.array(out_kind, pa.string()),
            pc.take(clean.src_lang, rows_of),
            pc.take(clean.trg_lang, rows_of),
        ],
        fields=list(RL_SCHEMA.field("extra_info").type),
    )
    return pa.Table.from_arrays(
        [
            pa.array([settings.data_source] * n, pa.string()),
            _messages_array(prompts, 1, ("user",)),
            pa.array([GRRM_ABILITY] * n, pa.string()),
            reward,
            extra,
        ],
        schema=RL_SCHEMA,
    )


# --------------------------------------------------------------------------- the run


class _HashingSink:
    """A write-only file object that hashes what passes through (no second read of the output)."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle
        self._digest = hashlib.sha256()
        self._position = 0
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self._digest.update(view)
        self._handle.write(view)
        self._position += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        self._handle.flush()

    def close(self) -> None:  # the atomic writer owns the real handle
        self.closed = True

    def writable(self) -> bool:
        return True

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


@dataclass
class _Stats:
    rows_read: int = 0
    rows_used: int = 0
    rows_written: int = 0
    problems: int = 0

    def __post_init__(self) -> None:
        self.issues: list[RowIssue] = []
        self.listed: list[dict[str, Any]] = []
        self.by_reason: Counter[str] = Counter()
        self.candidates: Counter[int] = Counter()
        self.pairs: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()

    def count(self, clean: _Clean) -> None:
        """Histogram the valid groups of a batch (candidate counts, language pairs)."""
        groups = len(clean.group_ids)
        self.rows_used += groups
        if not groups:
            return
        sizes = pc.list_value_length(clean.mt).to_numpy(zero_copy_only=False)
        for size, number in enumerate(np.bincount(sizes).tolist()):
            if number:
                self.candidates[size] += number
        pairs = pc.value_counts(pc.binary_join_element_wise(clean.src_lang, clean.trg_lang, "-"))
        for item in pairs.to_pylist():
            self.pairs[item["values"]] += item["counts"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able partial stats (a shard's report), read back by `from_dict`."""
        return {
            "rows_read": self.rows_read,
            "rows_used": self.rows_used,
            "rows_written": self.rows_written,
            "problems": self.problems,
            "issues": [issue.to_dict() for issue in self.issues],
            "listed": self.listed,
            "by_reason": dict(self.by_reason),
            "candidates": {str(n): count for n, count in self.candidates.items()},
            "pairs": dict(self.pairs),
            "kinds": dict(self.kinds),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> _Stats:
        stats = cls(data["rows_read"], data["rows_used"], data["rows_written"], data["problems"])
        stats.issues = [RowIssue(**issue) for issue in data["issues"]]
        stats.listed = list(data["listed"])
        stats.by_reason = Counter(data["by_reason"])
        stats.candidates = Counter({int(n): count for n, count in data["candidates"].items()})
        stats.pairs = Counter(data["pairs"])
        stats.kinds = Counter(data["kinds"])
        return stats

    def extend(self, later: _Stats) -> None:
        """Add the stats of the rows that follow these (the next shard): counts add up and
        the listed problems stay the first ones of the file, as a single pass lists them."""
        self.rows_read += later.rows_read
        self.rows_used += later.rows_used
        self.rows_written += later.rows_written
        self.problems += later.problems
        self.issues = (self.issues + later.issues)[:MAX_LISTED_ISSUES]
        self.listed = (self.listed + later.listed)[:MAX_LISTED_DROPS]
        self.by_reason.update(later.by_reason)
        self.candidates.update(later.candidates)
        self.pairs.update(later.pairs)
        self.kinds.update(later.kinds)

    def drop(self, file: str, row: int, problem: _Problem) -> None:
        self.problems += 1
        self.by_reason[problem.reason] += 1
        if len(self.issues) < MAX_LISTED_ISSUES:
            self.issues.append(RowIssue(file, row, problem.field, problem.message))
        if len(self.listed) < MAX_LISTED_DROPS:
            self.listed.append(
                {
                    "file": file,
                    "row": row,
                    "reason": problem.reason,
                    "field": problem.field,
                    "detail": problem.message,
                }
            )


def _check_params(
    subgroup_augment: int,
    shuffle_augment: int,
    seed: int,
    batch_size: int,
    score_range: tuple[int, int] | None,
) -> None:
    for name, value in (
        ("subgroup_augment", subgroup_augment),
        ("shuffle_augment", shuffle_augment),
        ("seed", seed),
        ("batch_size", batch_size),
    ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise DataError(f"{name} must be an integer, got {value!r}")
    if subgroup_augment < 0 or shuffle_augment < 0:
        raise DataError("subgroup_augment and shuffle_augment must be >= 0")
    if batch_size < 1:
        raise DataError(f"batch_size must be positive, got {batch_size}")
    if score_range is not None:
        low, high = score_range
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (low, high)) or low > high:
            raise DataError(f"score_range must be (low, high) integers, got {score_range!r}")


@dataclass(frozen=True)
class _Preparation:
    """One kind of GRRM preparation with its parameters applied: what to read, how to render."""

    kind: Kind
    cols: _Columns
    render: Callable[[_Clean, int, Counter[str]], pa.Table]
    schema: pa.Schema
    skip_invalid: bool
    score_range: tuple[int, int] | None
    input_format: InputFormat
    batch_size: int
    parameters: dict[str, Any]  # as the report records them


def _source(input: PathLike, input_format: InputFormat) -> tuple[str, Literal["parquet", "jsonl"]]:
    """The input as a string and its format; a missing file fails here, before any work."""
    source = os.fspath(input)
    if not exists(source):
        raise DataFileNotFoundError(source)
    return source, _detect_format(source, input_format)


def _prepared_tables(
    source: str,
    fmt: Literal["parquet", "jsonl"],
    prep: _Preparation,
    stats: _Stats,
    span: _Span = _WHOLE_FILE,
) -> Iterator[pa.Table]:
    """Validate and render `span` of the input: one table per batch that has valid groups.

    Output row numbers (`first` of the renderer) count from 0 at the start of the span. Without
    `skip_invalid`, rendering stops at the first problem (the run fails) but reading goes on,
    so that every invalid row is counted.
    """

    def on_problem(row: int, problem: _Problem) -> None:
        stats.drop(source, row, problem)

    cols, score_range = prep.cols, prep.score_range
    batches: Iterator[tuple[Sequence[int], Any]] = (
        _parquet_batches(source, cols.required(), prep.batch_size, span)
        if fmt == "parquet"
        else _jsonl_batches(source, cols.required(), prep.batch_size, span)
    )
    for rows, chunk in batches:
        if fmt == "parquet":
            clean = _clean_from_parquet(rows, chunk, cols, score_range, on_problem)
        else:
            clean = _clean_from_records(rows, chunk, cols, score_range, on_problem)
        stats.rows_read += len(rows)
        stats.count(clean)
        if len(clean.group_ids) and (prep.skip_invalid or not stats.problems):
            table = prep.render(clean, stats.rows_written, stats.kinds)
            stats.rows_written += table.num_rows
            yield table


def _write_tables(
    path: str, schema: pa.Schema, tables: Iterable[pa.Table], check: Callable[[], None]
) -> str:
    """Write `tables` to `path` as one row group each; returns the file's sha256.

    Every GRRM parquet file is written here, by a single or a sharded run alike, so equal
    tables give equal bytes. `check` runs after the last table and before the file is
    published: raising there leaves nothing at `path`.
    """
    with atomic_writer(path) as handle:
        sink = _HashingSink(handle)
        writer = pq.ParquetWriter(sink, schema, **_writer_options(schema))
        try:
            # Encoding a table overlaps with rendering the next (Arrow releases the GIL); one
            # write in flight keeps the order and bounds memory to two batches. Leaving the
            # executor waits for that write, so the writer is never closed under it.
            with ThreadPoolExecutor(1, "grrm-write") as background:
                writing: Future[None] | None = None
                for table in tables:
                    if writing is not None:
                        writing.result()
                    writing = background.submit(writer.write_table, table)
                if writing is not None:
                    writing.result()
            check()
        finally:
            writer.close()
        return sink.hexdigest()


def _writer_options(schema: pa.Schema) -> dict[str, list[str]]:
    """Parquet options per column. The long texts (prompt and target contents, ground truths)
    are unique per row: no dictionary (a failed try only costs time) and no min/max statistics
    (footer bytes no reader uses). Short strings (roles, sources, languages) get a dictionary."""
    long_texts = {"content", "ground_truth"}
    short = [(path, leaf) for path, leaf in _leaves(schema) if leaf.name not in long_texts]
    return {
        "use_dictionary": [path for path, leaf in short if pa.types.is_string(leaf.type)],
        "write_statistics": [path for path, _ in short],
    }


def _leaves(fields: Iterable[pa.Field], prefix: str = "") -> Iterator[tuple[str, pa.Field]]:
    """(parquet column path, field) of every leaf, e.g. `messages.list.element.role`."""
    for field in fields:
        path = f"{prefix}{field.name}"
        if pa.types.is_struct(field.type):
            yield from _leaves(field.type, f"{path}.")
        elif pa.types.is_list(field.type):
            yield from _leaves([field.type.value_field.with_name("element")], f"{path}.list.")
        else:
            yield path, field


def _check_outcome(source: str, stats: _Stats, skip_invalid: bool) -> None:
    """Fail a run that met invalid rows (without `skip_invalid`) or has nothing to write."""
    if stats.problems and not skip_invalid:
        raise DataValidationError(stats.issues, total=stats.problems)
    if stats.rows_written == 0:
        raise DataError(_nothing_left(source, stats))


def _publish_report(
    prep: _Preparation, source: str, fmt: str, output: str, digest: str, stats: _Stats
) -> GrrmPrepareResult:
    """Write `<stem>.report.json` (after the data file, so a report means the data is there)."""
    out_path, _, report_path = output_paths(output)
    report = _report(prep.kind, source, fmt, out_path, digest, stats, prep.parameters)
    atomic_write_text(report_path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return GrrmPrepareResult(output_path=out_path, report_path=report_path, report=report)


def _run(input: PathLike, output: PathLike, prep: _Preparation) -> GrrmPrepareResult:
    """Stream `input` through validation and rendering into `output`, then write the report."""
    out_path, _, _ = output_paths(output)
    source, fmt = _source(input, prep.input_format)
    stats = _Stats()
    digest = _write_tables(
        out_path,
        prep.schema,
        _prepared_tables(source, fmt, prep, stats),
        lambda: _check_outcome(source, stats, prep.skip_invalid),
    )
    return _publish_report(prep, source, fmt, out_path, digest, stats)


def _nothing_left(source: str, stats: _Stats) -> str:
    summary = ", ".join(f"{n} {r}" for r, n in sorted(stats.by_reason.items())) or "none"
    lines = [f"{source}: no groups left to write: read {stats.rows_read} rows, dropped: {summary}"]
    lines += [f"  {issue}" for issue in stats.issues[:5]]
    return "\n".join(lines)


def _report(
    kind: Kind,
    source: str,
    fmt: str,
    out_path: str,
    digest: str,
    stats: _Stats,
    parameters: dict[str, Any],
) -> dict[str, Any]:
    dropped = stats.problems
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "judgeflow_version": judgeflow.__version__,
        "kind": kind,
        "input": {"path": source, "format": fmt},
        "output": {"path": out_path, "rows": stats.rows_written, "sha256": digest},
        "parameters": parameters,
        "counts": {
            "rows_read": stats.rows_read,
            "rows_used": stats.rows_used,
            "rows_dropped": dropped,
            "rows_written": stats.rows_written,
        },
        "dropped": {
            "total": dropped,
            "by_reason": {reason: stats.by_reason[reason] for reason in GRRM_DROP_REASONS},
            "listed_limit": MAX_LISTED_DROPS,
            "listed": stats.listed,
        },
        "candidates": {
            str(n): stats.candidates[n] for n in range(MIN_CANDIDATES, MAX_CANDIDATES + 1)
        },
        "language_pairs": dict(sorted(stats.pairs.items())),
        "augmentation": (
            {k: stats.kinds[k] for k in AUGMENTATION_KINDS} if kind == "grrm-rl" else None
        ),
    }


def _column_parameters(cols: _Columns) -> dict[str, Any]:
    params = {
        "src_key": cols.src,
        "src_lang_key": cols.src_lang,
        "trg_lang_key": cols.trg_lang,
        "mt_key": cols.mt,
        "score_key": cols.score,
    }
    if cols.analysis is not None:
        params["analysis_key"] = cols.analysis
    return params


def prepare_grrm_sft(
    input: PathLike,
    output: PathLike,
    *,
    src_key: str = "src_text",
    src_lang_key: str = "src_lang",
    trg_lang_key: str = "trg_lang",
    mt_key: str = "mt_texts",
    score_key: str = "scores",
    analysis_key: str = "analysis",
    skip_invalid: bool = False,
    score_range: tuple[int, int] | None = (0, 10),
    input_format: InputFormat = "auto",
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> GrrmPrepareResult:
    """Write the LLaMA-Factory sharegpt SFT parquet (`messages`: user prompt, assistant target).

    One output row per valid input row, in input order, with `group_id` = the input row. Invalid
    rows raise `DataValidationError` listing them (file, row, field), or with `skip_invalid` are
    dropped and counted in the report. `batch_size` bounds memory and does not change the output.
    """
    _check_params(0, 0, 0, batch_size, score_range)
    cols = _Columns(src_key, src_lang_key, trg_lang_key, mt_key, score_key, analysis_key)
    parameters = {
        **_column_parameters(cols),
        "skip_invalid": skip_invalid,
        "score_range": list(score_range) if score_range is not None else None,
        "input_format": input_format,
    }
    prep = _Preparation(
        "grrm-sft",
        cols,
        render=lambda clean, _first, _kinds: _sft_table(clean),
        schema=SFT_SCHEMA,
        skip_invalid=skip_invalid,
        score_range=score_range,
        input_format=input_format,
        batch_size=batch_size,
        parameters=parameters,
    )
    return _run(input, output, prep)


def prepare_grrm_rl(
    input: PathLike,
    output: PathLike,
    *,
    subgroup_augment: int = 0,
    shuffle_augment: int = 0,
    seed: int = 0,
    split: str = "train",
    data_source: str = GRRM_DATA_SOURCE,
    src_key: str = "src_text",
    src_lang_key: str = "src_lang",
    trg_lang_key: str = "trg_lang",
    mt_key: str = "mt_texts",
    score_key: str = "scores",
    skip_invalid: bool = False,
    score_range: tuple[int, int] | None = (0, 10),
    input_format: InputFormat = "auto",
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> GrrmPrepareResult:
    """Write verl RL parquet for the GRRM reward, with subgroup and shuffle augmentation.

    Per group of n: the original order, then up to `shuffle_augment` distinct other orders
    (`min(K, n! - 1)`), then `min(subgroup_augment, 2**n - n - 2)` subgroups (n > 2 only), each
    followed by its own shuffles. `extra_info.candidate_indices` says which input candidates
    fill labels A, B, …; `reward_model.ground_truth` is the JSON of `{label: score}`. Seeded per
    group, so the output depends only on the input, the parameters and `seed`.
    """
    prep = _rl_preparation(
        subgroup_augment=subgroup_augment,
        shuffle_augment=shuffle_augment,
        seed=seed,
        split=split,
        data_source=data_source,
        src_key=src_key,
        src_lang_key=src_lang_key,
        trg_lang_key=trg_lang_key,
        mt_key=mt_key,
        score_key=score_key,
        skip_invalid=skip_invalid,
        score_range=score_range,
        input_format=input_format,
        batch_size=batch_size,
    )
    return _run(input, output, prep)


def _rl_preparation(
    *,
    subgroup_augment: int = 0,
    shuffle_augment: int = 0,
    seed: int = 0,
    split: str = "train",
    data_source: str = GRRM_DATA_SOURCE,
    src_key: str = "src_text",
    src_lang_key: str = "src_lang",
    trg_lang_key: str = "trg_lang",
    mt_key: str = "mt_texts",
    score_key: str = "scores",
    skip_invalid: bool = False,
    score_range: tuple[int, int] | None = (0, 10),
    input_format: InputFormat = "auto",
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> _Preparation:
    """`prepare_grrm_rl`'s keyword arguments, checked and applied. A sharded run ships the
    arguments (plain values) to its workers, and each builds the same preparation from them."""
    _check_params(subgroup_augment, shuffle_augment, seed, batch_size, score_range)
    cols = _Columns(src_key, src_lang_key, trg_lang_key, mt_key, score_key, None)
    settings = _RlSettings(subgroup_augment, shuffle_augment, seed, split, data_source)
    parameters = {
        **_column_parameters(cols),
        "subgroup_augment": subgroup_augment,
        "shuffle_augment": shuffle_augment,
        "seed": seed,
        "split": split,
        "data_source": data_source,
        "skip_invalid": skip_invalid,
        "score_range": list(score_range) if score_range is not None else None,
        "input_format": input_format,
    }
    return _Preparation(
        "grrm-rl",
        cols,
        render=lambda clean, first, kinds: _rl_table(clean, settings, first, kinds),
        schema=RL_SCHEMA,
        skip_invalid=skip_invalid,
        score_range=score_range,
        input_format=input_format,
        batch_size=batch_size,
        parameters=parameters,
    )


def grrm_sft_example(
    src_text: str,
    src_lang: str,
    trg_lang: str,
    candidates: Sequence[str],
    scores: Sequence[int],
    analysis: str,
) -> list[dict[str, str]]:
    """The SFT `messages` for one group (for callers and tests that need a single example)."""
    prompt = prompt_head(language_name(src_lang), language_name(trg_lang), src_text)
    prompt += candidate_blocks(candidates)
    return [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": render_grrm_target(analysis, scores)},
    ]
