"""The data report: counts, drops by reason, the first problems and duplicated prompts,
published after the data."""

from __future__ import annotations

import json
from array import array
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import judgeflow
from judgeflow.data.duplicates import PromptUnits, prompt_duplicates
from judgeflow.data.errors import (
    MAX_LISTED_ISSUES,
    DataError,
    DataValidationError,
    RowIssue,
)
from judgeflow.data.grrm.common import (
    AUGMENTATION_KINDS,
    GRRM_DROP_REASONS,
    MAX_LISTED_DROPS,
    REPORT_SCHEMA_VERSION,
    GrrmPrepareResult,
    Kind,
    _Clean,
    _Preparation,
    _Problem,
)
from judgeflow.data.grrm_template import (
    MAX_CANDIDATES,
    MIN_CANDIDATES,
)
from judgeflow.data.io import PathLike, atomic_write_text, open_binary
from judgeflow.data.prepare import output_paths


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
        # One entry per written group, for the duplicates: its prompt hash and input row (compact:
        # a flat int64 array and short strings, so memory stays small as the input grows).
        self.prompt_hashes: list[str] = []
        self.prompt_rows: array[int] = array("q")

    def add_prompts(self, group_ids: pa.Array, hashes: list[str]) -> None:
        """Record the prompt hash of each group about to be written."""
        self.prompt_hashes += hashes
        self.prompt_rows.frombytes(
            group_ids.to_numpy(zero_copy_only=False).astype(np.int64).tobytes()
        )

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
            "prompt_hashes": self.prompt_hashes,
            "prompt_rows": self.prompt_rows.tolist(),
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
        stats.prompt_hashes = list(data["prompt_hashes"])
        stats.prompt_rows = array("q", data["prompt_rows"])
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
        self.prompt_hashes += later.prompt_hashes
        self.prompt_rows += later.prompt_rows

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
    rows = stats.prompt_rows
    units = PromptUnits("group", stats.prompt_hashes, lambda i: {"file": source, "row": rows[i]})
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
        # SFT data is training data; an RL file is the split it was prepared as.
        "duplicates": prompt_duplicates({parameters.get("split", "train"): units}),
    }


def grrm_prompt_units(path: PathLike, input_path: str | None = None) -> PromptUnits:
    """The groups of a GRRM RL or SFT parquet written here, one unit per group (the first of
    its augmented rows), located at `input_path` (the report's `input.path`) and the group's
    row. For duplicates across two preparations, e.g. a test file against the train file."""
    with open_binary(path) as handle:
        parquet = pq.ParquetFile(handle)
        nested = "extra_info" in parquet.schema_arrow.names
        names = ["prompt_hash", "group_id"]
        table = parquet.read(columns=[f"extra_info.{n}" for n in names] if nested else names)
    if nested:  # the struct, with just those two fields
        table = pa.Table.from_struct_array(table.column("extra_info").combine_chunks())
    groups = table.column("group_id").to_numpy()
    first = np.ones(len(groups), bool)
    first[1:] = groups[1:] != groups[:-1]  # a group's rows are consecutive
    hashes = table.column("prompt_hash").filter(pa.array(first)).to_pylist()
    rows = groups[first].tolist()
    return PromptUnits("group", hashes, lambda i: {"file": input_path, "row": rows[i]})
