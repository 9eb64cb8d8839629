"""The preparations: `prepare_grrm_sft` and `prepare_grrm_rl` read, validate, render and write."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import pyarrow as pa

from judgeflow.data.errors import (
    DataError,
    DataFileNotFoundError,
)
from judgeflow.data.grrm.common import (
    DEFAULT_BATCH_SIZE,
    GRRM_DATA_SOURCE,
    RL_SCHEMA,
    SFT_SCHEMA,
    GrrmPrepareResult,
    InputFormat,
    _Columns,
    _Preparation,
    _Problem,
)
from judgeflow.data.grrm.read import (
    _WHOLE_FILE,
    _detect_format,
    _jsonl_batches,
    _parquet_batches,
    _Span,
)
from judgeflow.data.grrm.render import _rl_table, _RlSettings, _sft_table
from judgeflow.data.grrm.report import _check_outcome, _publish_report, _Stats
from judgeflow.data.grrm.validate import _clean_from_parquet, _clean_from_records
from judgeflow.data.grrm.write import _write_tables
from judgeflow.data.grrm_template import (
    candidate_blocks,
    language_name,
    prompt_head,
    render_grrm_target,
)
from judgeflow.data.io import PathLike, exists
from judgeflow.data.prepare import output_paths
from judgeflow.data.prompt_hashes import grrm_prompt_hashes


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
        _parquet_batches(source, cols, prep.batch_size, span)
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
            # One hash per group, for the whole batch; augmented rows take their group's.
            hashes = grrm_prompt_hashes(clean.src)
            clean = clean._replace(prompt_hashes=pa.array(hashes, pa.string()))
            stats.add_prompts(clean.group_ids, hashes)
            table = prep.render(clean, stats.rows_written, stats.kinds)
            stats.rows_written += table.num_rows
            yield table


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
