"""`prepare`: judge examples to verl RL parquet, plus a data report.

Output naming: `output` must end in `.parquet` and is the train file. With `val_fraction > 0`
the validation rows go to `<stem>.val.parquet` beside it; the report is always
`<stem>.report.json`. So `data/judge.parquet` gives `data/judge.parquet`,
`data/judge.val.parquet` and `data/judge.report.json`. A stale `<stem>.val.parquet` from an
earlier run is removed when this run writes no validation split, so the pair on disk always
belongs together.

Order of work: read + validate -> length filter -> split -> position balancing -> write. Nothing
is dropped silently: every source row is written or listed in the report with a reason.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import judgeflow
from judgeflow.data.duplicates import PromptUnits, prompt_duplicates
from judgeflow.data.errors import DataError
from judgeflow.data.examples import Example, PairwiseExample, PointwiseExample
from judgeflow.data.io import (
    PathLike,
    atomic_write_many,
    exists,
    open_binary,
    parquet_bytes,
    remove,
)
from judgeflow.data.prompt_hashes import judge_prompt_hash, normalise
from judgeflow.data.readers import DroppedRow, InputFormat, ReadResult, read_examples
from judgeflow.data.templates import render_pairwise, render_pointwise
from judgeflow.modes import JUDGE_MODES, JudgeMode

#: How many dropped rows the report lists individually (all are counted).
MAX_LISTED_DROPS = 50
#: Conversations per `apply_chat_template` call when measuring prompt lengths.
TOKENIZE_BATCH = 256
REPORT_SCHEMA_VERSION = 1

ABILITY: dict[JudgeMode, str] = {"pointwise": "judge/pointwise", "pairwise": "judge/pairwise"}
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


def _schema(mode: JudgeMode) -> pa.Schema:
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
            ("pair", pa.int64()),  # pairwise: the A/B twins of a both-orders split share it
            ("source_file", pa.string()),
            ("source_row", pa.int64()),
            ("source_id", pa.string()),
            ("subset", pa.string()),
            ("chosen_index", pa.int64()),
            ("rejected_index", pa.int64()),
            ("swapped", pa.bool_()),
            ("label", label),
            ("prompt_hash", pa.string()),
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


def example_prompt_hash(example: Example) -> str:
    """The prompt hash of an example: its query and response(s), whatever their order."""
    if isinstance(example, PointwiseExample):
        return judge_prompt_hash(example.query, [example.response])
    return judge_prompt_hash(example.query, [example.response_a, example.response_b])


def to_verl_row(
    example: Example, split: str, index: int, swapped: bool = False, pair: int | None = None
) -> dict[str, Any]:
    """One verl RL row (columns: docs/how-to/command-line.md, `prepare judge`); `pair` is None in
    pointwise rows."""
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
            "pair": pair,
            "source_file": origin.file,
            "source_row": origin.row,
            "source_id": origin.id,
            "subset": origin.subset,
            "chosen_index": origin.chosen_index,
            "rejected_index": origin.rejected_index,
            "swapped": swapped,
            "label": label,
            "prompt_hash": example_prompt_hash(example),
        },
    }


# --------------------------------------------------------------------------- length filter


def load_tokenizer(tokenizer: Any) -> Any:
    """A loaded HF tokenizer, or one loaded from a local path / hub id.

    A local directory whose `tokenizer_config.json` names its class is loaded with the class
    `AutoTokenizer` would pick for it, without importing `AutoTokenizer`: its module pulls in
    transformers' generation utilities (torch's compiler, scikit-learn, SciPy), seconds of
    imports that measuring prompts never uses and that made `prepare` of 40 rows take 3-20 s.
    Anything else (a hub id, remote code, no class named) goes through `AutoTokenizer`.
    """
    if not isinstance(tokenizer, str | os.PathLike):
        return tokenizer
    path = os.fspath(tokenizer)
    declared = _declared_tokenizer_class(path)
    if declared is not None:
        return declared.from_pretrained(path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def _declared_tokenizer_class(path: str) -> Any:
    """The class `AutoTokenizer.from_pretrained(path)` resolves from the directory's
    `tokenizer_config.json` (`tokenizer_class`, its fast variant first), or None whenever it
    would look further (no such file or class, `auto_map` remote code, a name we cannot find)."""
    try:
        with open(os.path.join(path, "tokenizer_config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return None
    name = config.get("tokenizer_class") if isinstance(config, dict) else None
    if not isinstance(name, str) or not name or "auto_map" in config:
        return None
    import transformers

    for candidate in [name] if name.endswith("Fast") else [f"{name}Fast", name]:
        try:
            return getattr(transformers, candidate)
        except Exception:  # not exported, or its module fails to import: AutoTokenizer decides
            continue
    return None


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

    With `both_orders` (position balancing, or a split written in both A/B orders) a pairwise
    example may be written in either order, or both, so both are measured and the longer one
    decides; the limit then holds whichever way it is written.
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
    queries = list(dict.fromkeys(keys))
    if len(queries) < 2:
        raise DataError(
            f"val_fraction={val_fraction} needs at least 2 distinct queries after filtering "
            f"(equal up to case and spacing counts as one), got {len(queries)}"
        )
    n_val = min(max(1, math.floor(val_fraction * len(queries) + 0.5)), len(queries) - 1)
    random.Random(seed).shuffle(queries)
    val_queries = set(queries[:n_val])
    return [key in val_queries for key in keys]


def balance_swaps(n: int, seed: int, split: str) -> set[int]:
    """Which of `n` rows to swap: exactly `n // 2`, chosen by a generator seeded per split."""
    return set(random.Random(f"judgeflow-balance:{seed}:{split}").sample(range(n), n // 2))


def split_rows(
    members: Sequence[Example], split: str, both_orders: bool, swaps: set[int]
) -> list[dict[str, Any]]:
    """The verl rows of one split.

    One order: one row per example, A/B swapped for the positions in `swaps`, `pair` = index.
    Both orders (pairwise): two consecutive rows per example, its own order then swapped, both
    with `pair` = the example's position; `index` stays the row's position in the split.
    """
    rows: list[dict[str, Any]] = []
    for position, example in enumerate(members):
        if not isinstance(example, PairwiseExample):
            rows.append(to_verl_row(example, split, position))
        elif both_orders:
            rows.append(to_verl_row(example, split, len(rows), False, position))
            rows.append(to_verl_row(example.swapped(), split, len(rows), True, position))
        elif position in swaps:
            rows.append(to_verl_row(example.swapped(), split, position, True, position))
        else:
            rows.append(to_verl_row(example, split, position, False, position))
    return rows


# --------------------------------------------------------------------------- prompt units


def _units(extras: Sequence[dict[str, Any]]) -> PromptUnits:
    """One unit per pair (its first row; pointwise: per row) from rows' `extra_info`."""
    kept: list[dict[str, Any]] = []
    pairs: set[int] = set()
    for extra in extras:
        pair = extra.get("pair")
        if pair is not None:
            if pair in pairs:
                continue
            pairs.add(pair)
        kept.append(extra)

    def where(i: int) -> dict[str, Any]:
        extra = kept[i]
        return {"file": extra["source_file"], "row": extra["source_row"], "index": extra["index"]}

    return PromptUnits("pair" if pairs else "row", [e["prompt_hash"] for e in kept], where)


def judge_prompt_units(path: PathLike) -> PromptUnits:
    """The prompt units of a file `prepare_judge` wrote (for duplicates across two
    preparations, e.g. a `data.val_source` against the training source)."""
    with open_binary(os.fspath(path)) as handle:
        extras = pq.read_table(handle, columns=["extra_info"]).column("extra_info").to_pylist()
    if extras and "prompt_hash" not in extras[0]:
        raise DataError(f"{os.fspath(path)}: no extra_info.prompt_hash; prepare it again")
    return _units(extras)


# --------------------------------------------------------------------------- report


def _label_histogram(mode: JudgeMode, labels: list[Any]) -> dict[str, int]:
    keys = [str(i) for i in range(5)] if mode == "pointwise" else ["A", "B"]
    counts = Counter(str(label) for label in labels)
    return {key: counts.get(key, 0) for key in keys}


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
        measure_both = mode == "pairwise" and (balance_positions or both_orders or val_fraction > 0)
        examples, length_drops, lengths = _length_filter(
            examples, tok, max_prompt_length, measure_both, chat_template_kwargs
        )
    if not examples:
        raise DataError(_nothing_left_message(read, length_drops))

    in_val = split_val(examples, val_fraction, seed)
    splits: dict[str, list[Example]] = {
        "train": [ex for ex, v in zip(examples, in_val, strict=True) if not v],
        "val": [ex for ex, v in zip(examples, in_val, strict=True) if v],
    }
    split_reports: dict[str, Any] = {}
    units: dict[str, PromptUnits] = {}
    payloads: list[tuple[str, bytes]] = []
    for split, members in splits.items():
        if split == "val" and val_fraction <= 0:
            continue
        twins = mode == "pairwise" and (split == "val" or both_orders)
        swaps = (
            balance_swaps(len(members), seed, split) if balance_positions and not twins else set()
        )
        rows = split_rows(members, split, twins, swaps)
        path = train_path if split == "train" else val_path
        payloads.append((path, parquet_bytes(pa.Table.from_pylist(rows, schema=_schema(mode)))))
        units[split] = _units([r["extra_info"] for r in rows])
        split_reports[split] = {
            "path": path,
            "rows": len(rows),
            "pairs": len(members) if mode == "pairwise" else None,
            "both_orders": twins,
            "queries": len({ex.query for ex in members}),
            "labels": _label_histogram(mode, [r["extra_info"]["label"] for r in rows]),
            "swapped": sum(r["extra_info"]["swapped"] for r in rows),
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
        "counts": {
            "rows_read": read.rows_read,
            "rows_dropped": {"tie": by_reason["tie"], "invalid": by_reason["invalid"]},
            "rows_used": read.rows_used,
            "examples_built": len(read.examples),
            "examples_dropped": {"prompt_too_long": by_reason["prompt_too_long"]},
            "examples_written": {s: len(splits[s]) for s in split_reports},
            "rows_written": {s: r["rows"] for s, r in split_reports.items()},
        },
        "dropped": {
            "total": len(dropped),
            "by_reason": {reason: by_reason[reason] for reason in DROP_REASONS},
            "listed_limit": MAX_LISTED_DROPS,
            "listed": [d.to_dict() for d in dropped[:MAX_LISTED_DROPS]],
        },
        "splits": {"train": split_reports["train"], "val": split_reports.get("val")},
        "duplicates": prompt_duplicates(units),
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
    sources = "" if read.rows_read else f" from {', '.join(s.path for s in read.inputs)}"
    lines = [f"no examples left to write: read {read.rows_read} rows{sources}, dropped: {summary}"]
    lines += [f"  {d.file}: row {d.row}: {d.reason}: {d.detail}" for d in dropped[:5]]
    return "\n".join(lines)
