"""`judgeflow prepare judge|rlvr|grrm-sft|grrm-rl`: raw data into training files, each with a
data report beside it (the work is `judgeflow.data`'s; these commands name its options)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from judgeflow.cli.common import console, fail, user_errors
from judgeflow.config.hints import GRRM_FLAGS, JUDGE_FLAGS
from judgeflow.modes import JUDGE_MODES

if TYPE_CHECKING:
    from judgeflow.modes import JudgeMode

prepare_app = typer.Typer(no_args_is_help=True, help="Turn raw data into training files.")

#: The command line's choices, made from `judgeflow.modes` (typer needs an Enum).
JudgeModeChoice = StrEnum("JudgeModeChoice", {m: m for m in JUDGE_MODES})  # type: ignore[misc]


class InputFormat(StrEnum):
    auto = "auto"
    openjudge = "openjudge"
    rewardbench2 = "rewardbench2"


class GrrmFormat(StrEnum):
    auto = "auto"
    parquet = "parquet"
    jsonl = "jsonl"


GrrmFormatOption = Annotated[
    GrrmFormat, typer.Option("--format", help="Input format; auto: from the file name.")
]


def _print_written(result: Any) -> None:
    """Where a preparation wrote its files (`PrepareResult`)."""
    console.print(f"[green]train[/] {result.train_path}")
    if result.val_path:
        console.print(f"[green]val[/]   {result.val_path}")
    console.print(f"[green]report[/] {result.report_path}")


@prepare_app.command("judge")
def prepare_judge_cmd(
    mode: Annotated[
        JudgeModeChoice, typer.Option(help="pointwise (<score>) or pairwise (<better>).")
    ],
    input: Annotated[
        list[Path],
        typer.Option(
            "--input", "-i", help="OpenJudge or RewardBench2 file (parquet/jsonl); repeatable."
        ),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="verl RL parquet to write.")],
    val_fraction: Annotated[
        float, typer.Option(min=0.0, max=0.99, help="Share held out as a validation file.")
    ] = 0.0,
    balance_positions: Annotated[
        bool, typer.Option(help="Swap A/B in half the pairwise rows (label flipped).")
    ] = False,
    both_orders: Annotated[
        bool,
        typer.Option(
            help="Pairwise: write every pair in both A/B orders (an evaluation file); the "
            "--val-fraction split always is."
        ),
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed for the split and the swaps.")] = 0,
    tokenizer: Annotated[
        Path | None, typer.Option(help="Tokenizer dir for the prompt length filter.")
    ] = None,
    max_prompt_length: Annotated[
        int | None, typer.Option(help="Drop rows whose chat-templated prompt is longer (tokens).")
    ] = None,
    input_format: Annotated[
        InputFormat, typer.Option("--format", help="Input format; auto-detected from columns.")
    ] = InputFormat.auto,
    skip_invalid: Annotated[
        bool, typer.Option(help="Drop invalid rows (counted in the report) instead of failing.")
    ] = False,
) -> None:
    """Write verl RL parquet with the judge prompt templates, and a data report beside it."""
    from judgeflow.data import prepare_judge

    if (tokenizer is None) != (max_prompt_length is None):
        raise fail(ValueError("--tokenizer and --max-prompt-length go together"))
    try:
        result = prepare_judge(
            cast("JudgeMode", mode.value),
            [str(p) for p in input],
            str(output),
            val_fraction=val_fraction,
            balance_positions=balance_positions,
            both_orders=both_orders,
            seed=seed,
            tokenizer=str(tokenizer) if tokenizer else None,
            max_prompt_length=max_prompt_length,
            input_format=input_format.value,
            skip_invalid=skip_invalid,
        )
    except user_errors() as exc:
        raise fail(exc, JUDGE_FLAGS) from None
    report = result.report
    _print_written(result)
    counts = report["counts"]
    dropped = {k: v for k, v in report["dropped"]["by_reason"].items() if v}
    console.print(
        f"rows read {counts['rows_read']}, examples written {counts['examples_written']}, "
        f"rows written {counts.get('rows_written', counts['examples_written'])}, "
        f"dropped {dropped or 'none'}"
    )


@prepare_app.command("rlvr")
def prepare_rlvr_cmd(
    input: Annotated[
        list[Path],
        typer.Option(
            "--input", "-i", help="open-instruct RLVR rows (messages, ground_truth, dataset)."
        ),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="verl RL parquet to write.")],
    val_fraction: Annotated[
        float, typer.Option(min=0.0, max=0.99, help="Share of prompts held out for validation.")
    ] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed of the split.")] = 0,
    remap_verifier: Annotated[
        list[str] | None,
        typer.Option(
            help="OLD=NEW: rows whose dataset is OLD use the verifier NEW (open-instruct's "
            "--remap_verifier); repeatable."
        ),
    ] = None,
    skip_invalid: Annotated[
        bool, typer.Option(help="Drop invalid rows (counted in the report) instead of failing.")
    ] = False,
    system_prompt: Annotated[
        str | None,
        typer.Option(
            help="The system turn every prompt gets in place of its own (data.system_prompt)."
        ),
    ] = None,
) -> None:
    """Policy RLVR data: every row checked against its verifiers, split by prompt, a report."""
    from judgeflow.data.rlvr import prepare_rlvr

    if system_prompt is not None and not system_prompt.strip():
        raise typer.BadParameter("an empty system prompt", param_hint="--system-prompt")

    remap = {}
    for item in remap_verifier or []:
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise fail(ValueError(f"--remap-verifier takes OLD=NEW, got {item!r}"))
        remap[old.strip()] = new.strip()
    try:
        result = prepare_rlvr(
            [str(p) for p in input], str(output), val_fraction=val_fraction, seed=seed,
            remap_verifier=remap, skip_invalid=skip_invalid, system_prompt=system_prompt,
        )  # fmt: skip
    except user_errors() as exc:
        raise fail(exc, JUDGE_FLAGS) from None
    _print_written(result)
    counts = result.report["counts"]
    verifiers = result.report["splits"]["train"]["verifiers"]
    console.print(
        f"rows read {counts['rows_read']}, rows written {counts['rows_written']}, dropped "
        f"{counts['rows_dropped']['invalid']} invalid; train verifiers {verifiers}"
    )


@prepare_app.command("grrm-sft")
def prepare_grrm_sft_cmd(
    input: Annotated[
        Path, typer.Option("--input", "-i", help="TowerBlocks-MT-Ranking-style parquet/jsonl.")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="sharegpt `messages` parquet to write.")
    ],
    mt_key: Annotated[
        str, typer.Option(help="Column with the candidate translations.")
    ] = "mt_texts",
    score_key: Annotated[str, typer.Option(help="Column with the integer scores.")] = "scores",
    analysis_key: Annotated[str, typer.Option(help="Column with the analysis text.")] = "analysis",
    skip_invalid: Annotated[
        bool, typer.Option(help="Drop invalid rows (reported) instead of failing.")
    ] = False,
    input_format: GrrmFormatOption = GrrmFormat.auto,
) -> None:
    """GRRM SFT data: the group-ranking prompt and the analysis/ranking/scores target."""
    from judgeflow.data import prepare_grrm_sft

    try:
        result = prepare_grrm_sft(
            str(input), str(output), mt_key=mt_key, score_key=score_key,
            analysis_key=analysis_key, skip_invalid=skip_invalid, input_format=input_format.value,
        )  # fmt: skip
    except user_errors() as exc:
        raise fail(exc, GRRM_FLAGS) from None
    _print_grrm_result(result)


@prepare_app.command("grrm-rl")
def prepare_grrm_rl_cmd(
    input: Annotated[
        Path, typer.Option("--input", "-i", help="TowerBlocks-MT-Ranking-style parquet/jsonl.")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="verl RL parquet to write.")],
    subgroup_augment: Annotated[
        int, typer.Option(min=0, help="Subgroups sampled per group of n > 2.")
    ] = 0,
    shuffle_augment: Annotated[
        int, typer.Option(min=0, help="Extra candidate orders per (sub)group.")
    ] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the augmentation.")] = 0,
    mt_key: Annotated[
        str, typer.Option(help="Column with the candidate translations.")
    ] = "mt_texts",
    score_key: Annotated[str, typer.Option(help="Column with the integer scores.")] = "scores",
    analysis_key: Annotated[
        str, typer.Option(help="Accepted for symmetry with grrm-sft; unused.")
    ] = "analysis",
    skip_invalid: Annotated[
        bool, typer.Option(help="Drop invalid rows (reported) instead of failing.")
    ] = False,
    input_format: GrrmFormatOption = GrrmFormat.auto,
) -> None:
    """GRRM RL rows (ground truth `{label: score}`) with subgroup and shuffle augmentation."""
    from judgeflow.data import prepare_grrm_rl

    try:
        result = prepare_grrm_rl(
            str(input), str(output), subgroup_augment=subgroup_augment,
            shuffle_augment=shuffle_augment, seed=seed, mt_key=mt_key, score_key=score_key,
            skip_invalid=skip_invalid, input_format=input_format.value,
        )  # fmt: skip
    except user_errors() as exc:
        raise fail(exc, GRRM_FLAGS) from None
    _print_grrm_result(result)


def _print_grrm_result(result: object) -> None:
    report = result.report  # type: ignore[attr-defined]
    console.print(f"[green]wrote[/] {result.output_path}")  # type: ignore[attr-defined]
    console.print(f"[green]report[/] {result.report_path}")  # type: ignore[attr-defined]
    dropped = {k: v for k, v in report["dropped"]["by_reason"].items() if v}
    console.print(
        f"rows read {report['counts']['rows_read']}, written {report['counts']['rows_written']}, "
        f"dropped {dropped or 'none'}"
    )
