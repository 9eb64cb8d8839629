"""Rendering with Arrow string kernels: prompts, SFT targets and ground truths for a batch."""

from __future__ import annotations

import string
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from judgeflow.data.grrm.augment import _group_rng, augmentation_plan
from judgeflow.data.grrm.common import (
    _MESSAGE,
    _MESSAGES,
    GRRM_ABILITY,
    RL_SCHEMA,
    SFT_SCHEMA,
    _Clean,
    _offsets,
)
from judgeflow.data.grrm_template import (
    GRRM_CANDIDATE_BLOCK,
    GRRM_PROMPT_HEAD,
    GRRM_VERDICT_BLOCK,
    LABELS,
    MAX_CANDIDATES,
    RANK_STEP,
    RANK_TIE,
    SCORE_ITEM,
    SCORES_SEPARATOR,
)


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
        [_messages_array(contents, 2, ("user", "assistant")), clean.group_ids, _hashes(clean)],
        schema=SFT_SCHEMA,
    )


def _hashes(clean: _Clean) -> pa.Array:
    """The groups' prompt hashes, which `_prepared_tables` sets once per batch."""
    assert clean.prompt_hashes is not None, "prompt hashes are set before rendering"
    return clean.prompt_hashes


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
            pc.take(_hashes(clean), rows_of),
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
