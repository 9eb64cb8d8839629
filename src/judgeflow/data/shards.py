"""Sharded GRRM RL preparation: the same bytes as `prepare_grrm_rl`, from several workers.

A run is planned, fanned out and merged:

    plan = plan_grrm_rl_shards(input, output, shards=8, seed=3, ...)   # cheap: metadata / one scan
    results = [prepare_grrm_rl_shard(shard) for shard in plan.shards]   # anywhere: Ray, a pool
    merge_grrm_rl_shards(plan, results)                                  # the final parquet + report

Why the merged file equals the single-process one byte for byte:

- Shards are whole batches. A single run reads the input in batches of `batch_size` rows
  (parquet rows, or non-blank JSONL lines) and writes one row group per batch that has valid
  groups. Shard boundaries fall on those batch boundaries, so each shard reads exactly the
  batches the single run reads, and writes them as the same row groups.
- Each group is rendered from its own rows only: `group_id` is the input row number (each shard
  knows its first row) and the augmentation RNG is seeded from `seed` and `group_id`.
- `extra_info.index` runs over the whole output; a shard counts from 0 and the merge adds the
  rows written by the shards before it.
- Both paths write through the same writer (`grrm.write._write_tables`: one `ParquetWriter`, same
  schema and options, one `write_table` per batch) and the report is built by the same function
  from statistics that add up (the listed problems are the first ones of the file in both).

This module imports no Prefect and no Ray: `tasks/grrm.py` and `flows/prepare_sharded.py` run
`prepare_grrm_rl_shard` as Ray tasks; `prepare_grrm_rl_sharded` runs the three steps in-process
(with any `map`, e.g. a process pool's) for callers and tests without a cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from judgeflow.data.errors import DataError
from judgeflow.data.grrm.common import RL_SCHEMA, GrrmPrepareResult
from judgeflow.data.grrm.prepare import _prepared_tables, _rl_preparation, _source
from judgeflow.data.grrm.read import _jsonl_batch_starts, _Span
from judgeflow.data.grrm.report import _check_outcome, _publish_report, _Stats
from judgeflow.data.grrm.write import _write_tables
from judgeflow.data.io import (
    PathLike,
    atomic_write_text,
    is_url,
    local_path,
    open_binary,
    parquet_read_errors,
    remove,
)
from judgeflow.data.prepare import output_paths

__all__ = [
    "GrrmShard",
    "GrrmShardPlan",
    "GrrmShardResult",
    "merge_grrm_rl_shards",
    "plan_grrm_rl_shards",
    "prepare_grrm_rl_shard",
    "prepare_grrm_rl_sharded",
]

Format = Literal["parquet", "jsonl"]


@dataclass(frozen=True)
class GrrmShard:
    """One batch-aligned row range of a GRRM RL preparation: all a worker needs, small and
    picklable (paths and plain values, no open files or Arrow data).

    `start`/`stop` are parquet row numbers or JSONL line numbers (`stop` None: to the end);
    `offset` is the byte offset of line `start` in a JSONL file. `options` are
    `prepare_grrm_rl`'s keyword arguments.
    """

    index: int
    input: str
    format: Format
    start: int
    stop: int | None
    offset: int
    output: str  # the shard's parquet; its partial report is `<stem>.report.json`
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def report_path(self) -> str:
        return output_paths(self.output)[2]


@dataclass(frozen=True)
class GrrmShardPlan:
    """How one input is cut: the shards in input order and where the merge writes."""

    input: str
    output: str
    format: Format
    work_dir: str  # the shards' files; removed by the merge
    shards: list[GrrmShard]
    options: dict[str, Any]


@dataclass(frozen=True)
class GrrmShardResult:
    """A finished shard: its parquet (row groups = its batches) and partial report."""

    index: int
    output: str
    report_path: str
    rows_written: int


def plan_grrm_rl_shards(
    input: PathLike,
    output: PathLike,
    shards: int,
    *,
    work_dir: PathLike | None = None,
    **options: Any,
) -> GrrmShardPlan:
    """Cut `input` into at most `shards` ranges of whole batches, as even as batches allow.

    `options` are `prepare_grrm_rl`'s keyword arguments; they are checked here, so a bad value
    fails before any worker starts. Parquet inputs are cut from their metadata; JSONL inputs
    with one streaming pass that finds where each batch starts (no JSON is parsed). Fewer
    shards than asked come back when the input has fewer batches. `work_dir` (default
    `<stem>.shards` next to `output`) must be readable and writable by every worker.
    """
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise DataError(f"shards must be a positive integer, got {shards!r}")
    prep = _rl_preparation(**options)
    out_path, _, _ = output_paths(output)
    source, fmt = _source(input, prep.input_format)
    work = os.fspath(work_dir) if work_dir is not None else out_path.removesuffix(".parquet")
    if work_dir is None:
        work += ".shards"
    size = prep.batch_size
    if fmt == "parquet":
        with open_binary(source) as handle, parquet_read_errors(source):
            rows = pq.ParquetFile(handle).metadata.num_rows
        starts = [_Span(start=row) for row in range(0, rows, size)]
    else:
        starts, _ = _jsonl_batch_starts(source, size)
    spans = _group_batches(starts, shards)
    plan_shards = [
        GrrmShard(
            index=i,
            input=source,
            format=fmt,
            start=span.start,
            stop=span.stop,
            offset=span.offset,
            output=f"{work.rstrip('/')}/shard-{i:05d}.parquet",
            options=dict(options),
        )
        for i, span in enumerate(spans)
    ]
    return GrrmShardPlan(source, out_path, fmt, work, plan_shards, dict(options))


def _group_batches(starts: Sequence[_Span], shards: int) -> list[_Span]:
    """Consecutive batches into `min(shards, batches)` spans (at least one, maybe empty); the
    first `batches % shards` spans get one batch more."""
    count = max(1, min(shards, len(starts)))
    per, extra = divmod(len(starts), count)
    spans: list[_Span] = []
    first = 0
    for i in range(count):
        last = first + per + (1 if i < extra else 0)
        head = starts[first] if first < len(starts) else _Span()
        stop = starts[last].start if last < len(starts) else None
        spans.append(_Span(start=head.start, stop=stop, offset=head.offset))
        first = last
    return spans


def prepare_grrm_rl_shard(shard: GrrmShard) -> GrrmShardResult:
    """Validate and render one shard into its parquet, then write its partial report.

    Row groups are the shard's batches and `extra_info.index` counts from 0; the merge offsets
    it. Invalid rows are counted, not raised: the merge decides, once it sees every shard's
    count, as a single run does at the end of the file.
    """
    prep = _rl_preparation(**shard.options)
    stats = _Stats()
    tables = _prepared_tables(
        shard.input, shard.format, prep, stats, _Span(shard.start, shard.stop, shard.offset)
    )
    _write_tables(shard.output, RL_SCHEMA, tables, check=lambda: None)
    atomic_write_text(shard.report_path, json.dumps(stats.to_dict(), ensure_ascii=False))
    return GrrmShardResult(shard.index, shard.output, shard.report_path, stats.rows_written)


def merge_grrm_rl_shards(
    plan: GrrmShardPlan, results: Iterable[GrrmShardResult]
) -> GrrmPrepareResult:
    """Write the final parquet and report from the shards, then delete the shards' files.

    Fails like `prepare_grrm_rl` (invalid rows without `skip_invalid`, nothing to write), with
    the same message, before writing anything. The shards' files are removed either way; a
    retry re-runs the shards.
    """
    done = sorted(results, key=lambda result: result.index)
    if [r.index for r in done] != [s.index for s in plan.shards]:
        raise DataError(
            f"{plan.input}: merge needs shards {[s.index for s in plan.shards]}, "
            f"got {[r.index for r in done]}"
        )
    prep = _rl_preparation(**plan.options)
    try:
        stats = _Stats()
        for result in done:
            stats.extend(_Stats.from_dict(json.loads(_read_text(result.report_path))))
        _check_outcome(plan.input, stats, prep.skip_invalid)
        digest = _write_tables(
            plan.output,
            RL_SCHEMA,
            _shard_tables(done),
            check=lambda: _check_outcome(plan.input, stats, prep.skip_invalid),
        )
        return _publish_report(prep, plan.input, plan.format, plan.output, digest, stats)
    finally:
        _remove_work(plan)


def _shard_tables(results: Sequence[GrrmShardResult]) -> Iterator[pa.Table]:
    """The shards' row groups in order, with `extra_info.index` made global."""
    before = 0  # rows written by the earlier shards
    for result in results:
        with open_binary(result.output) as handle:
            parquet = pq.ParquetFile(handle)
            for group in range(parquet.num_row_groups):
                yield _offset_index(parquet.read_row_group(group), before)
        before += result.rows_written


def _offset_index(table: pa.Table, offset: int) -> pa.Table:
    """`table` with `offset` added to `extra_info.index` (a shard numbers its rows from 0)."""
    if offset == 0:
        return table
    extra = table.column("extra_info").combine_chunks()
    fields = list(extra.type)
    arrays = [extra.field(i) for i in range(len(fields))]
    position = extra.type.get_field_index("index")
    arrays[position] = pc.add(arrays[position], offset)
    mask = extra.is_null() if extra.null_count else None
    rebuilt = pa.StructArray.from_arrays(arrays, fields=fields, mask=mask)
    return table.set_column(table.schema.get_field_index("extra_info"), "extra_info", rebuilt)


def _read_text(path: str) -> str:
    with open_binary(path) as handle:
        return handle.read().decode("utf-8")


def _remove_work(plan: GrrmShardPlan) -> None:
    for shard in plan.shards:
        remove(shard.output)
        remove(shard.report_path)
    if not is_url(plan.work_dir):
        with contextlib.suppress(OSError):
            local_path(plan.work_dir).rmdir()


def prepare_grrm_rl_sharded(
    input: PathLike,
    output: PathLike,
    shards: int,
    *,
    map_fn: Callable[[Callable[[GrrmShard], GrrmShardResult], list[GrrmShard]], Iterable[Any]]
    | None = None,
    work_dir: PathLike | None = None,
    **options: Any,
) -> GrrmPrepareResult:
    """`prepare_grrm_rl` in `shards` pieces, run by `map_fn` (e.g. an executor's `map`;
    default: one after the other in this process).

    The output and report are the bytes `prepare_grrm_rl(input, output, **options)` writes.
    """
    plan = plan_grrm_rl_shards(input, output, shards, work_dir=work_dir, **options)
    run = map_fn or map
    return merge_grrm_rl_shards(plan, list(run(prepare_grrm_rl_shard, plan.shards)))
