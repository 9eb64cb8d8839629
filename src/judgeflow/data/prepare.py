"""`prepare`: judge examples to verl RL parquet, plus a data report.

Output naming: `output` must end in `.parquet` and is the train file. With `val_fraction > 0`
the validation rows go to `<stem>.val.parquet` beside it; the report is always
`<stem>.report.json`. So `data/judge.parquet` gives `data/judge.parquet`,
`data/judge.val.parquet` and `data/judge.report.json`. A stale `<stem>.val.parquet` from an
earlier run is removed when this run writes no validation split, so the pair on disk always
belongs together.

Order of work: read + validate -> length filter -> split -> position balancing -> write. Nothing
is dropped silently: every source row is written or listed in the report with a reason.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

import judgeflow
from judgeflow.data.errors import DataError
from judgeflow.data.examples import MODES, Example, Mode, PairwiseExample, PointwiseExample
from judgeflow.data.io import PathLike, atomic_write_many, exists, parquet_bytes, remove
from judgeflow.data.readers import DroppedRow, InputFormat, ReadResult, read_examples
from judgeflow.data.templates import render_pairwise, render_pointwise

#: How many dropped rows the report lists individually (all are counted).
MAX_LISTED_DROPS = 50
#: Conversations per `apply_chat_template` call when measuring prompt lengths.
TOKENIZE_BATCH = 256
REPORT_SCHEMA_VERSION = 1

ABILITY: dict[Mode, str] = {"pointwise": "judge/pointwise", "pairwise": "judge/pairwise"}
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


# --------------------------------------------------------------------------- verl rows


def _schema(mode: Mode) -> pa.Schema:
    """One fixed schema per mode, so every row (and an empty split) has identical structs."""
    if mode == "pointwise":
        truth = pa.struct([("helpfulness", pa.int64())])
        label: pa.DataType = pa.int64()
    else:
        truth = pa.struct([("preference", pa.string())])
        label = pa.string()
    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    extra = pa.struct(
        [
            ("split", pa.string()),
            ("index", pa.int64()),
            ("source_file", pa.string()),
            ("source_row", pa.int64()),
            ("source_id", pa.string()),
            ("subset", pa.string()),
            ("chosen_index", pa.int64()),
            ("rejected_index", pa.int64()),
            ("swapped", pa.bool_()),
            ("label", label),
        ]
    )
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(message)),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", truth)])),
            ("extra_info", extra),
        ]
    )


def render_messages(example: Example) -> list[dict[str, str]]:
    """The chat messages verl will template: the judge prompt as the only user turn."""
    if isinstance(example, PointwiseExample):
        content = render_pointwise(example.query, example.response)
    else:
        content = render_pairwise(example.query, example.response_a, example.response_b)
    return [{"role": "user", "content": content}]


def to_verl_row(example: Example, split: str, index: int, swapped: bool = False) -> dict[str, Any]:
    """One verl RL row (see DESIGN "verl row format")."""
    origin = example.origin
    truth: dict[str, Any]
    label: int | str
    if isinstance(example, PointwiseExample):
        ability, truth, label = ABILITY["pointwise"], {"helpfulness": example.label}, example.label
    else:
        ability, truth = ABILITY["pairwise"], {"preference": example.preference}
        label = example.preference
    return {
        "data_source": example.source,
        "prompt": render_messages(example),
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": truth},
        "extra_info": {
            "split": split,
            "index": index,
            "source_file": origin.file,
            "source_row": origin.row,
            "source_id": origin.id,
            "subset": origin.subset,
            "chosen_index": origin.chosen_index,
            "rejected_index": origin.rejected_index,
            "swapped": swapped,
            "label": label,
        },
    }


# --------------------------------------------------------------------------- length filter


def load_tokenizer(tokenizer: Any) -> Any:
    """A loaded HF tokenizer, or one loaded from a local path / hub id."""
    if isinstance(tokenizer, str | os.PathLike):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(os.fspath(tokenizer))
    return tokenizer


def prompt_lengths(
    tokenizer: Any,
    conversations: Sequence[list[dict[str, str]]],
    *,
    chat_template_kwargs: dict[str, Any] | None = None,
    batch_size: int = TOKENIZE_BATCH,
) -> list[int]:
    """Token counts of chat-templated prompts, measured exactly as verl's RLHFDataset does.

    verl filters with `len(tokenizer.apply_chat_template(prompt, add_generation_prompt=True))`,
    so that is what we count (in batches, which gives identical ids).
    """
    kwargs = chat_template_kwargs or {}
    lengths: list[int] = []
    for start in range(0, len(conversations), batch_size):
        batch = list(conversations[start : start + batch_size])
        ids = tokenizer.apply_chat_template(
            batch, add_generation_prompt=True, tokenize=True, **kwargs
        )
        lengths.extend(len(seq) for seq in ids)
    return lengths


def _length_filter(
    examples: list[Example],
    tokenizer: Any,
    max_prompt_length: int | None,
    both_orders: bool,
    chat_template_kwargs: dict[str, Any] | None,
) -> tuple[list[Example], list[DroppedRow], list[int]]:
    """Drop examples whose prompt exceeds `max_prompt_length` tokens.

    With position balancing a pairwise example may be written in either order, so both orders
    are measured and the longer one decides; the limit then holds whichever way it is written.
    """
    convs = [render_messages(ex) for ex in examples]
    lengths = prompt_lengths(tokenizer, convs, chat_template_kwargs=chat_template_kwargs)
    if both_orders:
        swapped = [
            render_messages(ex.swapped()) for ex in examples if isinstance(ex, PairwiseExample)
        ]
        other = prompt_lengths(tokenizer, swapped, chat_template_kwargs=chat_template_kwargs)
        lengths = [max(a, b) for a, b in zip(lengths, other, strict=True)]
    if max_prompt_length is None:
        return examples, [], lengths
    kept: list[Example] = []
    kept_lengths: list[int] = []
    dropped: list[DroppedRow] = []
    for example, length in zip(examples, lengths, strict=True):
        if length <= max_prompt_length:
            kept.append(example)
            kept_lengths.append(length)
            continue
        origin = example.origin
        dropped.append(
            DroppedRow(
                file=origin.file,
                row=origin.row,
                reason="prompt_too_long",
                detail=f"prompt is {length} tokens > max_prompt_length {max_prompt_length}",
                chosen_index=origin.chosen_index,
                rejected_index=origin.rejected_index,
            )
        )
    return kept, dropped, kept_lengths


# --------------------------------------------------------------------------- split + balance


def split_val(examples: Sequence[Example], val_fraction: float, seed: int) -> list[bool]:
    """Per example, True if it goes to validation.

    The unit is the query: examples sharing a query text (RewardBench2 expands one prompt into
    several) stay together, so validation never sees a prompt trained on. Queries are shuffled
    with `random.Random(seed)` and the first `floor(F * Q + 0.5)` go to val (at least 1 and at
    most Q - 1 when F > 0). Both splits keep the input order.
    """
    if val_fraction <= 0:
        return [False] * len(examples)
    queries = list(dict.fromkeys(ex.query for ex in examples))
    if len(queries) < 2:
        raise DataError(
            f"val_fraction={val_fraction} needs at least 2 distinct queries after filtering, "
            f"got {len(queries)}"
        )
    n_val = min(max(1, math.floor(val_fraction * len(queries) + 0.5)), len(queries) - 1)
    random.Random(seed).shuffle(queries)
    val_queries = set(queries[:n_val])
    return [ex.query in val_queries for ex in examples]


def balance_swaps(n: int, seed: int, split: str) -> set[int]:
    """Which of `n` rows to swap: exactly `n // 2`, chosen by a generator seeded per split."""
    return set(random.Random(f"judgeflow-balance:{seed}:{split}").sample(range(n), n // 2))


# --------------------------------------------------------------------------- report


def _label_histogram(mode: Mode, labels: list[Any]) -> dict[str, int]:
    keys = [str(i) for i in range(5)] if mode == "pointwise" else ["A", "B"]
    counts = Counter(str(label) for label in labels)
    return {key: counts.get(key, 0) for key in keys}


def _check_params(
    mode: str,
    val_fraction: float,
    balance_positions: bool,
    tokenizer: Any,
    max_prompt_length: int | None,
) -> None:
    if mode not in MODES:
        raise DataError(f"mode must be one of {list(MODES)}, got {mode!r}")
    if isinstance(val_fraction, bool) or not 0.0 <= val_fraction < 1.0:
        raise DataError(f"val_fraction must be in [0, 1), got {val_fraction!r}")
    if balance_positions and mode != "pairwise":
        raise DataError("balance_positions only applies to pairwise mode")
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


def prepare_judge(
    mode: Mode,
    inputs: PathLike | Sequence[PathLike],
    output: PathLike,
    *,
    val_fraction: float = 0.0,
    balance_positions: bool = False,
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
    `balance_positions` (pairwise) swaps A and B in exactly `n // 2` rows of each split.
    `chat_template_kwargs` must match verl's `data.apply_chat_template_kwargs` if you set any.
    """
    _check_params(mode, val_fraction, balance_positions, tokenizer, max_prompt_length)
    train_path, val_path, report_path = output_paths(output)
    read = read_examples(
        mode,
        inputs,
        input_format=input_format,
        skip_invalid=skip_invalid,
        chosen_label=chosen_label,
        rejected_label=rejected_label,
    )
    examples = read.examples
    length_drops: list[DroppedRow] = []
    lengths: list[int] | None = None
    tok = load_tokenizer(tokenizer) if tokenizer is not None else None
    if tok is not None and examples:
        examples, length_drops, lengths = _length_filter(
            examples, tok, max_prompt_length, balance_positions, chat_template_kwargs
        )
    if not examples:
        raise DataError(_nothing_left_message(read, length_drops))

    in_val = split_val(examples, val_fraction, seed)
    splits: dict[str, list[Example]] = {
        "train": [ex for ex, v in zip(examples, in_val, strict=True) if not v],
        "val": [ex for ex, v in zip(examples, in_val, strict=True) if v],
    }
    split_reports: dict[str, Any] = {}
    payloads: list[tuple[str, bytes]] = []
    for split, members in splits.items():
        if split == "val" and val_fraction <= 0:
            continue
        swaps = balance_swaps(len(members), seed, split) if balance_positions else set()
        rows = []
        for index, example in enumerate(members):
            swapped = index in swaps
            if swapped and isinstance(example, PairwiseExample):
                example = example.swapped()
            rows.append(to_verl_row(example, split, index, swapped))
        path = train_path if split == "train" else val_path
        payloads.append((path, parquet_bytes(pa.Table.from_pylist(rows, schema=_schema(mode)))))
        split_reports[split] = {
            "path": path,
            "rows": len(rows),
            "queries": len({ex.query for ex in members}),
            "labels": _label_histogram(mode, [r["extra_info"]["label"] for r in rows]),
            "swapped": len(swaps),
            "sha256": hashlib.sha256(payloads[-1][1]).hexdigest(),
        }
    stale_val = "val" not in split_reports and exists(val_path)

    dropped = read.dropped + length_drops
    by_reason = Counter(d.reason for d in dropped)
    report: dict[str, Any] = {
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
            for s in read.inputs
        ],
        "formats": sorted({s.format for s in read.inputs if s.format is not None}),
        "parameters": {
            "val_fraction": val_fraction,
            "balance_positions": balance_positions,
            "seed": seed,
            "tokenizer": _tokenizer_name(tokenizer),
            "max_prompt_length": max_prompt_length,
            "input_format": input_format,
            "skip_invalid": skip_invalid,
            "chosen_label": chosen_label,
            "rejected_label": rejected_label,
            "chat_template_kwargs": chat_template_kwargs or {},
        },
        "counts": {
            "rows_read": read.rows_read,
            "rows_dropped": {"tie": by_reason["tie"], "invalid": by_reason["invalid"]},
            "rows_used": read.rows_used,
            "examples_built": len(read.examples),
            "examples_dropped": {"prompt_too_long": by_reason["prompt_too_long"]},
            "examples_written": {s: r["rows"] for s, r in split_reports.items()},
        },
        "dropped": {
            "total": len(dropped),
            "by_reason": {reason: by_reason[reason] for reason in DROP_REASONS},
            "listed_limit": MAX_LISTED_DROPS,
            "listed": [d.to_dict() for d in dropped[:MAX_LISTED_DROPS]],
        },
        "splits": {"train": split_reports["train"], "val": split_reports.get("val")},
        "prompt_tokens": None
        if lengths is None
        else {"min": min(lengths), "max": max(lengths), "mean": sum(lengths) / len(lengths)},
        "removed_stale_files": [val_path] if stale_val else [],
    }
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    # The data files and the report are published together, the report last.
    atomic_write_many([*payloads, (report_path, text.encode("utf-8"))])
    if stale_val:
        remove(val_path)
    return PrepareResult(
        train_path=train_path,
        val_path=val_path if "val" in split_reports else None,
        report_path=report_path,
        report=report,
    )


def _nothing_left_message(read: ReadResult, length_drops: list[DroppedRow]) -> str:
    dropped = read.dropped + length_drops
    reasons = Counter(d.reason for d in dropped)
    summary = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())) or "none"
    lines = [f"no examples left to write: read {read.rows_read} rows, dropped: {summary}"]
    lines += [f"  {d.file}: row {d.row}: {d.reason}: {d.detail}" for d in dropped[:5]]
    return "\n".join(lines)
