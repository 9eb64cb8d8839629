"""Judge examples to verl RL rows, a batch at a time: Arrow string kernels render the prompts.

`to_verl_row` makes one row (columns: docs/how-to/command-line.md, `prepare judge`) of one
`Example`; `verl_table` makes the same rows for a whole batch at once: the template's literal
pieces joined with the batch's query and response columns (the same single-pass substitution as
`templates`), swapped pairs exchanged with `if_else`, the A/B twins of a both-orders split as a
`take` of each example twice.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from judgeflow.data.examples import Example, ExampleBatch, PointwiseExample
from judgeflow.data.prompt_hashes import judge_prompt_hash, judge_prompt_hashes
from judgeflow.data.templates import (
    PAIRWISE_PIECES,
    POINTWISE_PIECES,
    render_pairwise,
    render_pointwise,
)
from judgeflow.modes import JudgeMode

ABILITY: dict[JudgeMode, str] = {"pointwise": "judge/pointwise", "pairwise": "judge/pairwise"}

_MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
_LABEL: dict[JudgeMode, pa.DataType] = {"pointwise": pa.int64(), "pairwise": pa.string()}
_TRUTH: dict[JudgeMode, str] = {"pointwise": "helpfulness", "pairwise": "preference"}
#: Leaf columns that differ in almost every row (no parquet dictionary, no statistics).
UNIQUE_COLUMNS = ("content", "prompt_hash")


def verl_schema(mode: JudgeMode) -> pa.Schema:
    """One fixed schema per mode, so every row (and an empty split) has identical structs."""
    label = _LABEL[mode]
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
    truth = pa.struct([(_TRUTH[mode], label)])
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(_MESSAGE)),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", truth)])),
            ("extra_info", extra),
        ]
    )


# --------------------------------------------------------------------------- one example


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


# --------------------------------------------------------------------------- a batch


def examples_table(batch: ExampleBatch, *, hashes: bool = True) -> pa.Table:
    """The examples of a batch as Arrow columns, with each one's prompt hash (`prompt_hash`;
    nulls with `hashes=False`, for a table only measured)."""
    pairwise = batch.pairwise
    if hashes:
        values = judge_prompt_hashes(
            batch.queries, batch.responses, batch.responses_b if pairwise else None
        )
        prompt_hashes = pa.array(values, pa.string())
    else:
        prompt_hashes = pa.nulls(len(batch), pa.string())
    columns = {
        "query": pa.array(batch.queries, pa.string()),
        "response_a": pa.array(batch.responses, pa.string()),
        "response_b": pa.array(batch.responses_b if pairwise else [], pa.string()),
        "label": pa.array(batch.labels, pa.string() if pairwise else pa.int64()),
        "source": pa.array(batch.sources, pa.string()),
        "source_row": pa.array(batch.rows, pa.int64()),
        "source_id": pa.array(batch.ids, pa.string()),
        "subset": pa.array(batch.subsets, pa.string()),
        "chosen_index": pa.array(batch.chosen_index, pa.int64()),
        "rejected_index": pa.array(batch.rejected_index, pa.int64()),
        "prompt_hash": prompt_hashes,
    }
    if not pairwise:
        columns["response_b"] = pa.nulls(len(batch), pa.string())
    return pa.table(columns)


def render_contents(examples: pa.Table, swapped: pa.Array | None = None) -> pa.Array:
    """The judge prompt (the user turn) of every example; pairwise with A and B exchanged where
    `swapped` is true. Pointwise examples have no `response_b` (all null)."""
    query, a = examples.column("query"), examples.column("response_a")
    if examples.column("response_b").null_count == examples.num_rows:
        head, middle, tail = POINTWISE_PIECES
        return _joined(head, query, middle, a, tail)
    b = examples.column("response_b")
    if swapped is not None:
        a, b = pc.if_else(swapped, b, a), pc.if_else(swapped, a, b)
    head, before_a, before_b, tail = PAIRWISE_PIECES
    return _joined(head, query, before_a, a, before_b, b, tail)


def _joined(*parts: str | pa.ChunkedArray | pa.Array) -> pa.Array:
    joined = pc.binary_join_element_wise(*parts, "")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def verl_table(
    examples: pa.Table,
    mode: JudgeMode,
    split: str,
    file: str,
    first: int,
    *,
    both_orders: bool = False,
    swapped: np.ndarray | None = None,
) -> pa.Table:
    """The verl rows of consecutive members of a split, the first at position `first`.

    One order: one row per example, `index` its position, A/B exchanged where `swapped` (one
    flag per example), pairwise `pair` = `index`. `both_orders` (pairwise): two consecutive rows
    per example, its own order then swapped, both with `pair` = the example's position; `index`
    stays the row's position in the split.
    """
    n = examples.num_rows
    positions = np.arange(first, first + n, dtype=np.int64)
    if both_orders:
        examples = examples.take(pa.array(np.repeat(np.arange(n), 2)))
        flags = np.tile(np.array([False, True]), n)
        index, pair = pa.array(np.arange(2 * first, 2 * (first + n))), pa.array(positions.repeat(2))
    else:
        flags = swapped if swapped is not None else np.zeros(n, bool)
        index = pa.array(positions)
        pair = index if mode == "pairwise" else pa.nulls(n, pa.int64())
    rows = len(flags)
    swaps = pa.array(flags, pa.bool_())
    label = examples.column("label").combine_chunks()
    if mode == "pairwise":
        label = pc.if_else(swaps, pc.if_else(pc.equal(label, "A"), "B", "A"), label)
    contents = render_contents(examples, swaps if mode == "pairwise" else None)
    schema = verl_schema(mode)
    extra_fields = list(schema.field("extra_info").type)
    extra = pa.StructArray.from_arrays(
        [
            _constant(split, rows),
            index,
            pair,
            _constant(file, rows),
            *(
                examples.column(name).combine_chunks()
                for name in ("source_row", "source_id", "subset", "chosen_index", "rejected_index")
            ),
            swaps,
            label,
            examples.column("prompt_hash").combine_chunks(),
        ],
        fields=extra_fields,
    )
    reward_type = schema.field("reward_model").type
    truth = pa.StructArray.from_arrays([label], fields=list(reward_type.field("ground_truth").type))
    reward = pa.StructArray.from_arrays([_constant("rule", rows), truth], fields=list(reward_type))
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32))  # one message per row
    prompt = pa.ListArray.from_arrays(
        offsets,
        pa.StructArray.from_arrays([_constant("user", rows), contents], fields=list(_MESSAGE)),
        type=schema.field("prompt").type,
    )
    return pa.Table.from_arrays(
        [
            examples.column("source").combine_chunks(),
            prompt,
            _constant(ABILITY[mode], rows),
            reward,
            extra,
        ],
        schema=schema,
    )


def _constant(value: str, n: int) -> pa.Array:
    """`value` in each of `n` rows (dictionary-friendly for the parquet writer)."""
    return pa.array([value] * n, pa.string())
