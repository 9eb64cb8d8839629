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
the same bytes (`judgeflow.data.shards`); both paths read, render and write with the same functions
(`prepare._prepared_tables`, `write._write_tables`, `report._publish_report`).

Decisions (see docs/design/prompts.md, "GRRM"): scores must be integers; an integral float
(`7.0`, e.g. a parquet `double` column) is accepted as that integer, anything else (`7.5`, NaN,
bool, str) is an error, as is a score outside `score_range` (0-10 by default, the scale the
prompt announces). A two-letter language code must be one of `LANG_NAMES`; a longer string is a
language name and passes through unchanged. Output rows are not shuffled (the reference shuffles
the whole file; that needs it in memory): LLaMA-Factory's trainer and verl with
`data.shuffle=True` shuffle anyway.

Every SFT row carries `prompt_hash` and every RL row `extra_info.prompt_hash`: the group's
`grrm_prompt_hash(src_text)`, computed once per group for a whole batch and shared by all its
augmented orderings and subgroups. The report's `duplicates` counts groups whose prompt occurs
more than once in the file (`judgeflow.data.duplicates`).

The package by concern: `common` (names, schemas, row and batch types), `read`, `validate`
(row-wise and column-wise, side by side), `render`, `augment`, `write`, `report`, and `prepare`
(the two preparations).
"""

from judgeflow.data.grrm.augment import augmentation_plan
from judgeflow.data.grrm.common import (
    AUGMENTATION_KINDS,
    GRRM_ABILITY,
    GRRM_DATA_SOURCE,
    GRRM_DROP_REASONS,
    RL_SCHEMA,
    SFT_SCHEMA,
    GrrmPrepareResult,
)
from judgeflow.data.grrm.prepare import grrm_sft_example, prepare_grrm_rl, prepare_grrm_sft
from judgeflow.data.grrm.report import grrm_prompt_units

__all__ = [
    "AUGMENTATION_KINDS",
    "GRRM_ABILITY",
    "GRRM_DATA_SOURCE",
    "GRRM_DROP_REASONS",
    "RL_SCHEMA",
    "SFT_SCHEMA",
    "GrrmPrepareResult",
    "augmentation_plan",
    "grrm_prompt_units",
    "grrm_sft_example",
    "prepare_grrm_rl",
    "prepare_grrm_sft",
]
