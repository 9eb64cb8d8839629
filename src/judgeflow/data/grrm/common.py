"""GRRM data: names, schemas and the row and batch types every part of the preparation shares."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import pyarrow as pa

GRRM_ABILITY = "grrm/ranking"
GRRM_DATA_SOURCE = "TowerBlocks-MT-Ranking.ranking_score"
AUGMENTATION_KINDS = ("original", "shuffle", "subgroup", "subgroup-shuffle")
#: Why a row can be invalid; every key appears in the report, with 0 when it did not happen.
GRRM_DROP_REASONS = (
    "json",  # a JSONL line that is not a JSON object (not UTF-8, not JSON, an array, …)
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
SFT_SCHEMA = pa.schema(
    [("messages", _MESSAGES), ("group_id", pa.int64()), ("prompt_hash", pa.string())]
)
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
                    ("prompt_hash", pa.string()),  # the group's: shared by its augmented rows
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

    def keyword(self, column: str) -> str:
        """The keyword argument that names `column` (`score_key` for the scores), for hints."""
        return _COLUMN_ROLES[self._role(column)][0]

    def holds(self, column: str) -> str:
        """What `column` holds, in words ("the scores")."""
        return _COLUMN_ROLES[self._role(column)][1]

    def _role(self, column: str) -> str:
        return next(role for role in _COLUMN_ROLES if getattr(self, role) == column)


#: `_Columns` field -> (keyword argument, what the column holds).
_COLUMN_ROLES = {
    "src": ("src_key", "the source texts"),
    "src_lang": ("src_lang_key", "the source languages"),
    "trg_lang": ("trg_lang_key", "the target languages"),
    "mt": ("mt_key", "the candidate translations"),
    "score": ("score_key", "the scores"),
    "analysis": ("analysis_key", "the analyses"),
}


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
    prompt_hashes: pa.Array | None = None  # string: `grrm_prompt_hash` per group, set to render


def _offsets(sizes: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(sizes) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return offsets


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
