"""`prepare`: judge examples to verl RL parquet, plus a data report.

Output naming: `output` must end in `.parquet` and is the train file. With `val_fraction > 0`
the validation rows go to `<stem>.val.parquet` beside it; the report is always
`<stem>.report.json`. So `data/judge.parquet` gives `data/judge.parquet`,
`data/judge.val.parquet` and `data/judge.report.json`. A stale `<stem>.val.parquet` from an
earlier run is removed when this run writes no validation split, so the pair on disk always
belongs together.

Order of work: read + validate -> length filter -> split -> position balancing -> write. Nothing
is dropped silently: every source row is written or listed in the report with a reason.

The input is streamed: read, validated, filtered, rendered (`verl_rows`) and written
(`judge_splits`) a batch of `BATCH_SIZE` examples at a time, so memory does not grow with the
input beyond a few bytes per example (the prompt hashes of the duplicates section). A split or
balancing needs the whole input's queries or counts before the first row is placed, so with
`val_fraction > 0` or `balance_positions` a first pass reads and filters the input to plan them
(per example: a query digest and whether it is kept), and a second pass writes. Invalid rows
are all reported, as before: reading goes on to the end of the input, and an error making the
output (loading the tokenizer, writing) is raised only after them.

Pairwise validation data holds both A/B orders: each example becomes two consecutive rows, its
own order (`swapped` false) then swapped (preference flipped), sharing `extra_info.pair`, so
evaluation can measure swap consistency and position bias. That is the `val_fraction` split,
and with `both_orders=True` the output file itself (a separate validation source). Every row
carries `extra_info.prompt_hash` (`judge_prompt_hash`: the same for both orders), which the
report's `duplicates` section and evaluation's decontamination use.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import judgeflow
from judgeflow.data.duplicates import PromptUnits, hash_array, prompt_duplicates
from judgeflow.data.errors import DataError
from judgeflow.data.examples import Example, ExampleBatch
from judgeflow.data.io import PathLike, exists, open_binary, remove, staged_files
from judgeflow.data.judge_splits import SplitFiles
from judgeflow.data.prompt_hashes import normalise
from judgeflow.data.prompt_tokens import LengthFilter, load_tokenizer
from judgeflow.data.readers import InputFormat, ReadLog, read_batches
from judgeflow.data.verl_rows import examples_table
from judgeflow.modes import JUDGE_MODES, JudgeMode

#: How many dropped rows the report lists individually (all are counted).
MAX_LISTED_DROPS = 50
#: Examples read, rendered and written at a time (one parquet row group of each split).
BATCH_SIZE = 1024
REPORT_SCHEMA_VERSION = 1

DROP_REASONS = ("tie", "invalid", "prompt_too_long")


@dataclass(frozen=True)
class PrepareResult:
    """Where `prepare_judge` wrote its files (str: local paths or URLs) and the report."""

    train_path: str
    val_path: str | None
    report_path: str
    report: dict[str, Any]


def output_paths(output: PathLike) -> tuple[str, str, str]:
    """`(train, val, report)` paths for an output `<stem>.parquet`."""
    name = os.fspath(output)
    if not name.endswith(".parquet"):
        raise DataError(f"output must be a .parquet path, got {name!r}")
    stem = name.removesuffix(".parquet")
    return name, f"{stem}.val.parquet", f"{stem}.report.json"


# --------------------------------------------------------------------------- split + balance


def _val_queries(n_queries: int, val_fraction: float, seed: int) -> np.ndarray:
    """Which of `n_queries` queries (numbered in order of first appearance) go to validation.

    They are shuffled with `random.Random(seed)` and the first `floor(F * Q + 0.5)` go to val (at
    least 1 and at most Q - 1). A shuffle only permutes positions, so this is the choice of
    shuffling the queries themselves.
    """
    if n_queries < 2:
        raise DataError(
            f"val_fraction={val_fraction} needs at least 2 distinct queries after filtering "
            f"(equal up to case and spacing counts as one), got {n_queries}"
        )
    n_val = min(max(1, math.floor(val_fraction * n_queries + 0.5)), n_queries - 1)
    order = list(range(n_queries))
    random.Random(seed).shuffle(order)
    chosen = np.zeros(n_queries, bool)
    chosen[order[:n_val]] = True
    return chosen


def split_val(examples: Sequence[Example], val_fraction: float, seed: int) -> list[bool]:
    """Per example, True if it goes to validation.

    The unit is the query after `prompt_hashes.normalise` (case, spacing, Unicode forms): examples
    sharing it stay together (RewardBench2 expands one prompt into several, and a query that
    differs only in case or spacing is the same prompt to decontamination), so validation never
    sees a prompt trained on. Normalised queries, in order of first appearance, are shuffled with
    `random.Random(seed)` and the first `floor(F * Q + 0.5)` go to val (at least 1 and at most
    Q - 1 when F > 0). Both splits keep the input order. Queries that are distinct after
    normalisation split exactly as they would by their raw text.
    """
    if val_fraction <= 0:
        return [False] * len(examples)
    keys = [normalise(ex.query) for ex in examples]
    numbers = {key: i for i, key in enumerate(dict.fromkeys(keys))}
    chosen = _val_queries(len(numbers), val_fraction, seed)
    return [bool(chosen[numbers[key]]) for key in keys]


def _query_digest(query: str) -> bytes:
    """A normalised query as 16 bytes: how the planning pass tells queries apart."""
    return hashlib.blake2b(
        normalise(query).encode("utf-8", "surrogatepass"), digest_size=16
    ).digest()


def _val_flags(digests: bytes | bytearray, val_fraction: float, seed: int) -> np.ndarray:
    """`split_val` for examples given by their `_query_digest`s, concatenated."""
    keys = np.frombuffer(digests, dtype="S16")
    if val_fraction <= 0:
        return np.zeros(len(keys), bool)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    number = np.empty(len(first), np.int64)
    number[np.argsort(first, kind="stable")] = np.arange(len(first))  # by first appearance
    chosen = _val_queries(len(first), val_fraction, seed)
    return chosen[number[inverse.reshape(-1)]]


def balance_swaps(n: int, seed: int, split: str) -> set[int]:
    """Which of `n` rows to swap: exactly `n // 2`, chosen by a generator seeded per split."""
    return set(random.Random(f"judgeflow-balance:{seed}:{split}").sample(range(n), n // 2))


# --------------------------------------------------------------------------- prompt units


def judge_prompt_units(path: PathLike) -> PromptUnits:
    """The prompt units of a file `prepare_judge` wrote (for duplicates across two
    preparations, e.g. a `data.val_source` against the training source): one per pair (its
    first row; pointwise: per row), read column by column."""
    name = os.fspath(path)
    with open_binary(name) as handle:
        parquet = pq.ParquetFile(handle)
        fields = [f.name for f in parquet.schema_arrow.field("extra_info").type]
        if "prompt_hash" not in fields:
            if parquet.metadata.num_rows:
                raise DataError(f"{name}: no extra_info.prompt_hash; prepare it again")
            return PromptUnits("row", [])
        # RLVR and other files have no `pair` (a row is its own unit); where a row came from
        # is reported when the file says it.
        wanted = [n for n in ("prompt_hash", "pair", "source_file", "source_row", "index")
                  if n in fields]  # fmt: skip
        table = parquet.read(columns=[f"extra_info.{n}" for n in wanted])
    extra = pa.Table.from_struct_array(table.column("extra_info").combine_chunks())
    first = np.ones(extra.num_rows, dtype=bool)
    paired = np.array([], dtype=np.int64)
    if "pair" in wanted:
        pair = extra.column("pair").combine_chunks()
        first = pc.is_null(pair).to_numpy(zero_copy_only=False).copy()
        paired = np.flatnonzero(~first)
        if len(paired):
            values = pair.drop_null().to_numpy()
            _, firsts = np.unique(values, return_index=True)
            first[paired[firsts]] = True
    keep = pa.array(first)
    names: list[Any] = []
    codes = rows = index = None
    if "source_file" in wanted:
        files = extra.column("source_file").filter(keep).combine_chunks().dictionary_encode()
        names, codes = files.dictionary.to_pylist(), files.indices.to_numpy(zero_copy_only=False)
    if "source_row" in wanted:
        rows = extra.column("source_row").filter(keep).to_numpy()
    if "index" in wanted:
        index = extra.column("index").filter(keep).to_numpy()

    def where(i: int) -> dict[str, Any]:
        return {
            "file": names[codes[i]] if codes is not None else None,
            "row": int(rows[i]) if rows is not None else None,
            "index": int(index[i]) if index is not None else None,
        }

    hashes = hash_array(extra.column("prompt_hash").filter(keep))
    return PromptUnits("pair" if len(paired) else "row", hashes, where)


# --------------------------------------------------------------------------- report


def _check_params(
    mode: str,
    val_fraction: float,
    balance_positions: bool,
    both_orders: bool,
    tokenizer: Any,
    max_prompt_length: int | None,
) -> None:
    if mode not in JUDGE_MODES:
        raise DataError(f"mode must be one of {list(JUDGE_MODES)}, got {mode!r}")
    if isinstance(val_fraction, bool) or not 0.0 <= val_fraction < 1.0:
        raise DataError(f"val_fraction must be in [0, 1), got {val_fraction!r}")
    if balance_positions and mode != "pairwise":
        raise DataError("balance_positions only applies to pairwise mode")
    if both_orders:
        if mode != "pairwise":
            raise DataError("both_orders only applies to pairwise mode")
        if val_fraction > 0:
            raise DataError(
                "both_orders writes the whole output for evaluation; with val_fraction > 0 "
                "the validation split is written in both orders already"
            )
        if balance_positions:
            raise DataError("balance_positions does not apply to both_orders (balanced already)")
    if max_prompt_length is not None:
        if isinstance(max_prompt_length, bool) or not isinstance(max_prompt_length, int):
            raise DataError(f"max_prompt_length must be an integer, got {max_prompt_length!r}")
        if max_prompt_length < 1:
            raise DataError(f"max_prompt_length must be positive, got {max_prompt_length}")
        if tokenizer is None:
            raise DataError("max_prompt_length needs a tokenizer to measure prompts with")


def _tokenizer_name(tokenizer: Any) -> str | None:
    if tokenizer is None:
        return None
    if isinstance(tokenizer, str | os.PathLike):
        return os.fspath(tokenizer)
    return str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)


@dataclass(frozen=True)
class _Reading:
    """What both passes read and how they filter it: the preparation's input parameters."""

    mode: JudgeMode
    inputs: PathLike | Sequence[PathLike]
    input_format: InputFormat
    chosen_label: int
    rejected_label: int
    skip_invalid: bool
    tokenizer: Any
    max_prompt_length: int | None
    measure_both: bool  # pairwise and written in either order: the longer one decides
    chat_template_kwargs: dict[str, Any] | None

    def batches(self, log: ReadLog) -> Iterator[ExampleBatch]:
        return read_batches(
            self.mode, self.inputs, log, input_format=self.input_format,
            chosen_label=self.chosen_label, rejected_label=self.rejected_label,
            batch_size=BATCH_SIZE,
        )  # fmt: skip

    def length_filter(self) -> tuple[LengthFilter | None, Exception | None]:
        """The length filter (None without a tokenizer), or the error loading the tokenizer
        (raised after the invalid rows)."""
        if self.tokenizer is None:
            return None, None
        try:
            tokenizer = load_tokenizer(self.tokenizer)
        except Exception as exc:
            return None, exc
        return LengthFilter(
            tokenizer, self.max_prompt_length, self.measure_both, self.chat_template_kwargs,
            MAX_LISTED_DROPS,
        ), None  # fmt: skip

    def each_batch(
        self,
        log: ReadLog,
        work: Callable[[ExampleBatch], None],
        failed: Exception | None = None,
    ) -> Exception | None:
        """Hand every batch to `work` until a row is invalid (without `skip_invalid`: the run
        will fail) or `work` fails; read to the end either way, so that every invalid row is
        counted. Returns `work`'s error (or `failed`), for the caller to raise after those."""
        for batch in self.batches(log):
            if failed is not None or (log.invalid and not self.skip_invalid):
                continue
            try:
                work(batch)
            except Exception as exc:  # raised once the whole input has been read
                failed = exc
        return failed

    def check(self, log: ReadLog, failed: Exception | None, lengths: LengthFilter | None) -> None:
        """The errors of a finished pass, in the order a user should meet them."""
        log.check(self.skip_invalid)
        if failed is not None:
            raise failed
        if log.examples == (lengths.dropped if lengths is not None else 0):
            raise DataError(_nothing_left_message(log, lengths))


@dataclass
class _Plan:
    """What the planning pass decided, per example in reading order: whether it is kept
    (`kept`: None when every one is) and, per kept one, whether it goes to validation; and which
    members of each one-order split are swapped (`swaps`, a flag per member)."""

    kept: bytearray | None
    in_val: np.ndarray
    swaps: dict[str, np.ndarray]
    lengths: LengthFilter | None
    log: ReadLog


def prepare_judge(
    mode: JudgeMode,
    inputs: PathLike | Sequence[PathLike],
    output: PathLike,
    *,
    val_fraction: float = 0.0,
    balance_positions: bool = False,
    both_orders: bool = False,
    seed: int = 0,
    tokenizer: Any = None,
    max_prompt_length: int | None = None,
    input_format: InputFormat = "auto",
    skip_invalid: bool = False,
    chosen_label: int = 4,
    rejected_label: int = 0,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> PrepareResult:
    """Read judge data, validate it, render prompts and write verl RL parquet plus a report.

    `tokenizer` (a path or a loaded HF tokenizer) enables prompt-length statistics, and with
    `max_prompt_length` drops prompts longer than that many tokens (reason `prompt_too_long`).
    Pairwise: the `val_fraction` split is written in both A/B orders (two rows per example);
    `balance_positions` swaps A and B in exactly `n // 2` rows of every one-order split;
    `both_orders` writes the output file itself in both orders, for data that is only evaluated
    on (a separate validation source prepared with `val_fraction=0`).
    `chat_template_kwargs` must match verl's `data.apply_chat_template_kwargs` if you set any.
    """
    _check_params(mode, val_fraction, balance_positions, both_orders, tokenizer, max_prompt_length)
    train_path, val_path, report_path = output_paths(output)
    measure_both = mode == "pairwise" and (balance_positions or both_orders or val_fraction > 0)
    reading = _Reading(
        mode, inputs, input_format, chosen_label, rejected_label, skip_invalid, tokenizer,
        max_prompt_length, measure_both, chat_template_kwargs,
    )  # fmt: skip
    # Which splits hold both A/B orders (two rows per example).
    twins = {"train": mode == "pairwise" and both_orders, "val": mode == "pairwise"}
    plan = None
    if val_fraction > 0 or balance_positions:
        plan = _plan(reading, val_fraction, seed)
        if balance_positions:
            sizes = {"train": (~plan.in_val).sum(), "val": plan.in_val.sum()}
            plan.swaps = {s: _swap_flags(int(n), seed, s) for s, n in sizes.items() if not twins[s]}
    paths = {"train": train_path, "val": val_path} if val_fraction > 0 else {"train": train_path}
    stale_val = "val" not in paths and exists(val_path)

    with staged_files([train_path, val_path, report_path]) as staged, SplitFiles(staged) as out:
        for split, path in paths.items():
            out.add(split, path, mode, twins[split])
        log, lengths = _write(reading, out, plan)
        out.finish()
        report = _report(
            mode, log, lengths, out,
            parameters={
                "val_fraction": val_fraction,
                "balance_positions": balance_positions,
                "both_orders": both_orders,
                "seed": seed,
                "tokenizer": _tokenizer_name(tokenizer),
                "max_prompt_length": max_prompt_length,
                "input_format": input_format,
                "skip_invalid": skip_invalid,
                "chosen_label": chosen_label,
                "rejected_label": rejected_label,
                "chat_template_kwargs": chat_template_kwargs or {},
            },
            removed=[val_path] if stale_val else [],
        )  # fmt: skip
        # The data files and the report are published together, the report last.
        text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
        staged.open(report_path).write(text.encode("utf-8"))
    if stale_val:
        remove(val_path)
    return PrepareResult(
        train_path=train_path,
        val_path=paths.get("val"),
        report_path=report_path,
        report=report,
    )


def _plan(reading: _Reading, val_fraction: float, seed: int) -> _Plan:
    """The planning pass: read, validate and filter the whole input, and split it by query."""
    log = ReadLog(listed_limit=MAX_LISTED_DROPS)
    lengths, failed = reading.length_filter()
    kept = bytearray() if lengths is not None and lengths.max_prompt_length is not None else None
    digests = bytearray()  # a `_query_digest` per kept example

    def plan(batch: ExampleBatch) -> None:
        queries = batch.queries
        if lengths is not None:
            keep = lengths.keep(examples_table(batch, hashes=False), batch.file)
            if kept is not None:
                kept.extend(keep.tobytes())
                queries = [q for q, k in zip(queries, keep.tolist(), strict=True) if k]
        last, digest = None, b""
        for query in queries:
            if query != last:
                last, digest = query, _query_digest(query)
            digests.extend(digest)

    reading.check(log, reading.each_batch(log, plan, failed), lengths)
    return _Plan(kept, _val_flags(digests, val_fraction, seed), {}, lengths, log)


def _write(
    reading: _Reading, out: SplitFiles, plan: _Plan | None
) -> tuple[ReadLog, LengthFilter | None]:
    """The writing pass: every kept example to its split file (without a plan: all to train,
    filtered here). Returns what the report needs of the reading."""
    log = ReadLog(listed_limit=MAX_LISTED_DROPS)
    lengths, failed = reading.length_filter() if plan is None else (plan.lengths, None)
    built = placed = 0  # examples read, and kept, so far

    def changed(file: str) -> DataError:
        return DataError(f"{file} changed while it was being prepared; run again")

    def write(batch: ExampleBatch) -> None:
        nonlocal built, placed
        examples = examples_table(batch)
        if plan is None:
            if lengths is not None:
                examples = examples.filter(pa.array(lengths.keep(examples, batch.file)))
            in_val = np.zeros(examples.num_rows, bool)
        else:
            if plan.kept is not None:
                if built + len(batch) > len(plan.kept):
                    raise changed(batch.file)
                examples = examples.filter(
                    pa.array(np.frombuffer(plan.kept, bool, len(batch), built))
                )
            in_val = plan.in_val[placed : placed + examples.num_rows]
            if len(in_val) != examples.num_rows:
                raise changed(batch.file)
        built += len(batch)
        placed += examples.num_rows
        for split, file in out.files.items():
            members = in_val if split == "val" else ~in_val
            swaps = plan.swaps.get(split) if plan is not None else None
            if swaps is not None:
                swaps = swaps[file.examples : file.examples + int(members.sum())]
            split_members = examples if members.all() else examples.filter(pa.array(members))
            file.add(split_members, batch.file, swaps)

    failed = reading.each_batch(log, write, failed)
    if plan is None:
        reading.check(log, failed, lengths)
        return log, lengths
    if failed is not None:
        raise failed
    planned = (plan.log.rows_read, plan.log.examples, len(plan.in_val))
    if (log.rows_read, log.examples, placed) != planned:
        raise DataError("the input changed while it was being prepared; run again")
    return log, lengths


def _swap_flags(n: int, seed: int, split: str) -> np.ndarray:
    """`balance_swaps` as a flag per member."""
    flags = np.zeros(n, bool)
    flags[list(balance_swaps(n, seed, split))] = True
    return flags


def _report(
    mode: JudgeMode,
    log: ReadLog,
    lengths: LengthFilter | None,
    out: SplitFiles,
    *,
    parameters: dict[str, Any],
    removed: list[str],
) -> dict[str, Any]:
    splits = {split: file.report() for split, file in out.files.items()}
    too_long = lengths.dropped if lengths is not None else 0
    listed = log.dropped + (lengths.listed if lengths is not None else [])
    by_reason = {reason: log.by_reason[reason] for reason in DROP_REASONS}
    by_reason["prompt_too_long"] = too_long
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "judgeflow_version": judgeflow.__version__,
        "mode": mode,
        "inputs": [
            {
                "path": s.path,
                "format": s.format,
                "rows_read": s.rows_read,
                "rows_used": s.rows_used,
                "examples": s.examples,
            }
            for s in log.inputs
        ],
        "formats": sorted({s.format for s in log.inputs if s.format is not None}),
        "parameters": parameters,
        "counts": {
            "rows_read": log.rows_read,
            "rows_dropped": {"tie": by_reason["tie"], "invalid": by_reason["invalid"]},
            "rows_used": log.rows_used,
            "examples_built": log.examples,
            "examples_dropped": {"prompt_too_long": too_long},
            "examples_written": {split: file.examples for split, file in out.files.items()},
            "rows_written": {s: r["rows"] for s, r in splits.items()},
        },
        "dropped": {
            "total": sum(by_reason.values()),
            "by_reason": by_reason,
            "listed_limit": MAX_LISTED_DROPS,
            "listed": [d.to_dict() for d in listed[:MAX_LISTED_DROPS]],
        },
        "splits": {"train": splits["train"], "val": splits.get("val")},
        "duplicates": prompt_duplicates({s: file.units() for s, file in out.files.items()}),
        "prompt_tokens": lengths.statistics() if lengths is not None else None,
        "removed_stale_files": removed,
    }


def _nothing_left_message(log: ReadLog, lengths: LengthFilter | None) -> str:
    dropped = log.dropped + (lengths.listed if lengths is not None else [])
    reasons = Counter(log.by_reason)
    if lengths is not None and lengths.dropped:
        reasons["prompt_too_long"] = lengths.dropped
    summary = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())) or "none"
    sources = "" if log.rows_read else f" from {', '.join(s.path for s in log.inputs)}"
    lines = [f"no examples left to write: read {log.rows_read} rows{sources}, dropped: {summary}"]
    lines += [f"  {d.file}: row {d.row}: {d.reason}: {d.detail}" for d in dropped[:5]]
    return "\n".join(lines)
