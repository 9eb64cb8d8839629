"""`judgeflow judge MODEL --data FILE --output FILE`: a verdict for every row of an unlabeled
file, here or as a Slurm job, with a progress bar, recorded in MLflow
(`typer_app` registers the command)."""

from __future__ import annotations

import contextlib
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console

from judgeflow.cli.common import (
    ModelArgument,
    SetOption,
    console,
    fail,
    user_errors,
    wide_console,
)
from judgeflow.cli.interrupts import noting_interrupts, raise_if_interrupted
from judgeflow.modes import JUDGE_MODELS

#: The command line's choices, made from `judgeflow.modes` (typer needs an Enum).
JudgeModelChoice = StrEnum("JudgeModelChoice", {m: m for m in JUDGE_MODELS})  # type: ignore[misc]


def judge_cmd(
    model: ModelArgument,
    data: Annotated[
        str,
        typer.Option(
            "--data", "-d", help="Rows to judge: jsonl, json or parquet (columns, OpenJudge, RB2)."
        ),
    ],
    output: Annotated[
        str, typer.Option("--output", "-o", help="Verdicts: .parquet, else JSON lines.")
    ],
    mode: Annotated[
        JudgeModelChoice | None,
        typer.Option(help="The judge's kind; a registered version knows its own."),
    ] = None,
    skip_invalid: Annotated[
        bool, typer.Option(help="Drop invalid rows (counted and listed) instead of stopping.")
    ] = False,
    set_: SetOption = None,
) -> None:
    """Judge every row of an unlabeled file: a verdict, its reasoning and `valid` per row.

    A killed run resumes where it stopped when run again with the same arguments. With
    `--set cluster.backend=slurm` it runs as a Slurm job (then DATA and OUTPUT must be on a
    shared filesystem or S3); each run is recorded in MLflow (experiment `judgeflow-judge`).
    One judging per output at a time: a second is refused, naming the first."""
    from judgeflow.cluster import JobFailed
    from judgeflow.config.secrets import keep_url_credentials
    from judgeflow.inference.claim import check_output, claim_output
    from judgeflow.registry import resolve_config
    from judgeflow.stages.judge import record_judging, start_judging_run

    data = keep_url_credentials(data)
    out = wide_console()
    try:
        check_output(output, data)  # a location it cannot write fails now, not after every row
        cfg, model_uri, version = resolve_config(
            model, mode=mode.value if mode else None, recipe=None, profile=None,
            overrides=set_ or [], tracking_uri=None,
        )  # fmt: skip
        # One judging per output: here, before the MLflow run; on Slurm the job claims it.
        local = cfg.cluster.backend != "slurm"
        claim = claim_output(output, data) if local else contextlib.nullcontext()
        with claim, noting_interrupts():  # a Ctrl-C stops it even if a library swallowed it
            tracker = start_judging_run(cfg, model, version, data)
            summary = _judge_with_bar(cfg, model_uri, data, output, tracker, version, skip_invalid, out)  # fmt: skip
        record_judging(tracker, summary)
        tracker.finish()
    except JobFailed as exc:
        raise fail(exc) from None
    except user_errors() as exc:
        raise fail(
            exc, lambda option, value: "--skip-invalid" if option == "skip_invalid" else None
        ) from None
    _print_judging(version or model, model_uri, data, summary, tracker.run_id)


def _judge_with_bar(
    cfg: Any, model_uri: str, data: str, output: str, tracker: Any, version: str | None,
    skip_invalid: bool, out: Console,
) -> dict[str, Any]:  # fmt: skip
    """Judge here or as a Slurm job, with a progress bar; the MLflow run fails with it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from judgeflow.stages.judge import judge_stage

    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=out, disable=not out.is_terminal,
    ) as bar:  # fmt: skip
        task = bar.add_task("judging", total=None)

        def progress(done: int, total: int) -> None:
            raise_if_interrupted()  # between batches: their verdicts are recorded
            bar.update(task, completed=done, total=total or None)

        ref = version or model_uri
        try:
            if cfg.cluster.backend == "slurm":
                return _judge_on_slurm(cfg, model_uri, data, output, tracker.run_id, ref, skip_invalid, progress)  # fmt: skip
            return judge_stage(
                cfg, model_uri, data, output, model_ref=ref, skip_invalid=skip_invalid,
                progress=progress,
            )  # fmt: skip
        except BaseException:
            tracker.finish("FAILED")
            raise


def _judge_on_slurm(
    cfg: Any, model_uri: str, data: str, output: str, run_id: str, ref: str,
    skip_invalid: bool, progress: Any,
) -> dict[str, Any]:  # fmt: skip
    """Submit the judging job and follow it: its log to stderr, its progress to the bar."""
    from submitit.core.utils import FailedJobError

    from judgeflow.cluster import JobFailed, submit, watch
    from judgeflow.stages import evaluation_job_config, judge_job_spec

    spec = judge_job_spec(cfg, model_uri, data, output, run_id, model_ref=ref, skip_invalid=skip_invalid)  # fmt: skip
    try:
        handle = submit(spec, evaluation_job_config(cfg).cluster)  # the evaluation's resources
    except FailedJobError as exc:
        raise JobFailed(f"sbatch refused the judging job: {str(exc).strip()}") from None
    console.print(f"judging: Slurm job {handle.job_id}; log {handle.log_paths['stdout']}")
    try:
        return watch(
            handle, on_log=lambda line: console.print(line, markup=False, highlight=False),
            on_progress=lambda p: progress(p.step, p.total), poll_s=cfg.cluster.poll_s,
        )  # fmt: skip
    except BaseException:
        if not handle.done():
            handle.cancel()
        raise


def _print_judging(
    model: str, model_uri: str, data: str, summary: dict[str, Any], run_id: str
) -> None:
    out = wide_console()
    out.print(f"judge     : {model} ({model_uri})")
    again = f" ({summary['resumed']} judged before, resumed)" if summary["resumed"] else ""
    out.print(f"judged    : {summary['total']} rows of {data}{again}")
    key = {"pointwise": "score", "pairwise": "better"}.get(summary["mode"], "ranked first")
    shown = " · ".join(f"{value}: {count}" for value, count in summary["verdicts"].items())
    out.print(f"verdicts  : {key} {shown or '-'}")
    rate = f"{summary['format_failure_rate']:.1%}"
    out.print(f"format    : {summary['format_failures']} failures ({rate})")
    if summary["mode"] == "pairwise":
        out.print(
            f"swapped   : {summary['inconsistent']} of {summary['total']} changed with the order"
        )
    if summary["dropped"]:
        out.print(f"dropped   : {len(summary['dropped'])} invalid rows (--skip-invalid):")
        for issue in summary["dropped"][:20]:
            out.print(f"  {issue}", highlight=False)
    out.print(f"output    : {summary['output']}")
    out.print(f"MLflow run: {run_id}")
