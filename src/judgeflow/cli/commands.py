"""`judgeflow` command line: prepare data, run pipelines, inspect configs, build dev assets.

Errors a user can fix (bad config, bad data, missing source) print one clear message and exit 2,
without a traceback. A data error's hints name the command's flags (`--skip-invalid`), or for a
pipeline the `--set` of its config key (`--set data.skip_invalid=true`), not Python keywords.
"""

from __future__ import annotations

import contextlib
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.console import Console

from judgeflow.cli.local_prefect import ServerStartError, local_server, prefect_settings
from judgeflow.config import ConfigError, list_profiles, list_recipes, load_config
from judgeflow.config.hints import GRRM_FLAGS, JUDGE_FLAGS, config_override
from judgeflow.modes import JUDGE_MODELS, JUDGE_MODES, MODES
from judgeflow.registry.paying_judge import TAG_REWARD_JUDGE

if TYPE_CHECKING:
    from judgeflow.data.errors import OptionNamer
    from judgeflow.modes import JudgeMode

app = typer.Typer(no_args_is_help=True, help="Train generative judge and reward models.")
prepare_app = typer.Typer(no_args_is_help=True, help="Turn raw data into training files.")
dev_app = typer.Typer(no_args_is_help=True, help="Development helpers (tiny model, …).")
app.add_typer(prepare_app, name="prepare")
app.add_typer(dev_app, name="dev")

console = Console(stderr=True, soft_wrap=True)

SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a config key: dotted.key=value (repeatable)."),
]
ProfileOption = Annotated[
    str | None, typer.Option("--profile", "-p", help="Overlay a profile, e.g. `tiny` for CPU.")
]


#: The command line's choices, made from `judgeflow.modes` (typer needs an Enum).
JudgeModeChoice = StrEnum("JudgeModeChoice", {m: m for m in JUDGE_MODES})  # type: ignore[misc]
ModelArgument = Annotated[
    str, typer.Argument(help="models:/NAME@champion, models:/NAME/3, a model dir or store URI.")
]
ModeChoice = StrEnum("ModeChoice", {m: m for m in MODES})  # type: ignore[misc]
JudgeModelChoice = StrEnum("JudgeModelChoice", {m: m for m in JUDGE_MODELS})  # type: ignore[misc]
RecipeArgument = Annotated[
    str, typer.Argument(help="A recipe preset (`judgeflow recipes` lists them) or a YAML file.")
]


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


def _user_errors() -> tuple[type[Exception], ...]:
    from judgeflow.data import DataError
    from judgeflow.registry.models import RegistryError
    from judgeflow.storage import SourceError, StoreError

    return (ConfigError, DataError, SourceError, StoreError, RegistryError, FileNotFoundError)


def _warn(message: str) -> None:
    console.print(f"[yellow]warning:[/] {message}")


def _fail(exc: Exception, names: OptionNamer | None = None) -> typer.Exit:
    """Print a user error (a data error's hints named by `names`, see `judgeflow.config.hints`)."""
    from rich.markup import escape

    from judgeflow.data import DataError

    text = exc.render(names) if names is not None and isinstance(exc, DataError) else str(exc)
    console.print(f"[bold red]error:[/] {escape(text)}", highlight=False, markup=True)
    return typer.Exit(code=2)


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
        raise _fail(ValueError("--tokenizer and --max-prompt-length go together"))
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
    except _user_errors() as exc:
        raise _fail(exc, JUDGE_FLAGS) from None
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
) -> None:
    """Policy RLVR data: every row checked against its verifiers, split by prompt, a report."""
    from judgeflow.data.rlvr import prepare_rlvr

    remap = {}
    for item in remap_verifier or []:
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise _fail(ValueError(f"--remap-verifier takes OLD=NEW, got {item!r}"))
        remap[old.strip()] = new.strip()
    try:
        result = prepare_rlvr(
            [str(p) for p in input], str(output), val_fraction=val_fraction, seed=seed,
            remap_verifier=remap, skip_invalid=skip_invalid,
        )  # fmt: skip
    except _user_errors() as exc:
        raise _fail(exc, JUDGE_FLAGS) from None
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
    except _user_errors() as exc:
        raise _fail(exc, GRRM_FLAGS) from None
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
    except _user_errors() as exc:
        raise _fail(exc, GRRM_FLAGS) from None
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


@dev_app.command("tiny-model")
def tiny_model_cmd(
    out_dir: Annotated[Path, typer.Argument(help="Directory to write the tokenizer and model to.")],
    seed: Annotated[int, typer.Option(help="Seed of the random initialisation.")] = 0,
) -> None:
    """Build a tiny random-init Qwen2 model and tokenizer offline (CPU tests and the demo)."""
    from judgeflow.dev.tiny_model import build_tiny_model

    path = build_tiny_model(out_dir, seed=seed)
    console.print(f"[green]tiny model[/] {path}")


@dev_app.command("demo-data")
def demo_data_cmd(
    out_dir: Annotated[
        Path, typer.Argument(help="Directory to write the tinyjudge_*.jsonl files to.")
    ],
    rlvr: Annotated[
        bool, typer.Option("--rlvr", help="The RLVR demo's tinyrlvr*.jsonl (samples/rlvr/).")
    ] = False,
    judged: Annotated[
        bool,
        typer.Option(
            "--judged", help="The judge-paid demo's tinyjudged*.jsonl (samples/rlvr_judged/)."
        ),
    ] = False,
) -> None:
    """Write the tiny demo's sample data (what judgeflow ships in samples/) again."""
    from judgeflow.dev import demo_data, judged_demo_data, rlvr_demo_data

    module = judged_demo_data if judged else rlvr_demo_data if rlvr else demo_data
    for path in module.write_demo_data(out_dir):
        console.print(f"[green]wrote[/] {path}")


@app.command("render")
def render_cmd(
    recipe: RecipeArgument, profile: ProfileOption = None, set_: SetOption = None
) -> None:
    """Dry run: print the sbatch script and engine command of each GPU stage; submits nothing."""
    from judgeflow.cli.dry_run import render_recipe

    try:
        cfg = load_config(recipe, profile=profile, overrides=set_ or [], report=_warn)
    except ConfigError as exc:
        raise _fail(exc) from None
    print(render_recipe(cfg), end="")


@app.command("recipes")
def recipes_cmd() -> None:
    """List the recipe presets and profiles."""
    for name in list_recipes():
        print(name)
    print("profiles: " + ", ".join(list_profiles()))


@app.command("config")
def config_cmd(
    recipe: RecipeArgument, profile: ProfileOption = None, set_: SetOption = None
) -> None:
    """Print the fully resolved configuration of a recipe (after profile and overrides)."""
    import yaml

    try:
        cfg = load_config(recipe, profile=profile, overrides=set_ or [], report=_warn)
    except ConfigError as exc:
        raise _fail(exc) from None
    from judgeflow.config.redaction import is_secret, strip_credentials

    data = cfg.model_dump(mode="json")  # a secret typed on the command line is not echoed
    data["cluster"]["env"] = {
        k: "***" if is_secret(k, v) else v for k, v in data["cluster"]["env"].items()
    }
    print(strip_credentials(yaml.safe_dump(data, sort_keys=False)), end="")


class GrrmStage(StrEnum):
    sft = "sft"
    rlvr = "rlvr"
    full = "full"


@app.command("run")
def run_cmd(
    recipe: RecipeArgument,
    profile: ProfileOption = None,
    set_: SetOption = None,
    stage: Annotated[
        GrrmStage, typer.Option(help="GRRM recipes: which part to run.")
    ] = GrrmStage.full,
) -> None:
    """Run a recipe's pipeline as a Prefect flow (local API unless PREFECT_API_URL is set)."""
    from judgeflow.config import judgeflow_home

    try:
        set_ = _secrets_out_of_parameters(set_ or [])
        cfg = load_config(recipe, profile=profile, overrides=set_, report=_warn)
        _ensure_model(cfg.model.path)
    except ConfigError as exc:
        raise _fail(exc) from None
    _checkout_on_path()
    home = judgeflow_home()
    interactive = sys.stdout.isatty()
    prefect_settings(home, quiet_console=interactive)
    if cfg.mode == "grrm":
        from flows.grrm import grrm

        def pipeline() -> dict:
            return grrm(recipe=recipe, stage=stage.value, profile=profile, overrides=set_)
    elif cfg.mode == "rlvr" and cfg.reward.paid_by_judge:
        from flows.rlvr_judged import rlvr_judged

        def pipeline() -> dict:
            return rlvr_judged(recipe=recipe, profile=profile, overrides=set_)
    elif cfg.mode == "rlvr":
        from flows.rlvr import rlvr

        def pipeline() -> dict:
            return rlvr(recipe=recipe, profile=profile, overrides=set_)
    else:
        from flows.judge_grpo import judge_grpo

        judge_mode = cfg.mode  # pointwise or pairwise here

        def pipeline() -> dict:
            return judge_grpo(recipe=recipe, mode=judge_mode, profile=profile, overrides=set_)

    try:
        if server := local_server():  # started by the console script while this imported
            from judgeflow.tracking import Tracker

            Tracker.warm_up(cfg.tracking.tracking_uri)  # meanwhile, on this core
            from flows.temporary_server import without_heartbeats

            try:
                server.wait_until_up()
            except ServerStartError as exc:
                raise _fail(exc) from None
        with _progress_view(interactive):
            if server:
                with without_heartbeats():
                    summary = pipeline()
            else:
                summary = pipeline()
    except _user_errors() as exc:
        raise _fail(exc, config_override) from None
    _print_summary(summary, home)


def _secrets_out_of_parameters(overrides: list[str]) -> list[str]:
    """`cluster.env.HF_TOKEN=…` with a secret-looking name (or a value holding a URL with
    credentials) becomes `cluster.secrets.HF_TOKEN=env:JUDGEFLOW_SECRET__HF_TOKEN`, the value
    going to this process's environment: flow parameters are stored and shown by Prefect, the
    environment is not. A `tracking.tracking_uri` loses its `user:password@` to MLflow's
    credential variables the same way, and a data URL (`data.source`, `data.val_source`,
    `sft.source`) its credentials to this process's environment, where the download finds them
    (`judgeflow.config.secrets.keep_url_credentials`)."""
    import re

    from judgeflow.config import parse_override
    from judgeflow.config.redaction import has_url_credentials, is_secret
    from judgeflow.config.secrets import CLI_ENV_PREFIX, DATA_URL_KEYS, keep_url_credentials

    out = []
    for item in overrides:
        key, value = parse_override(item)
        if key == "tracking.tracking_uri" and has_url_credentials(str(value)):
            from judgeflow.tracking import take_credentials

            item = f"{key}={take_credentials(str(value))}"
        elif key in DATA_URL_KEYS and has_url_credentials(str(value)):
            item = f"{key}={keep_url_credentials(str(value))}"
        elif key.startswith("cluster.env.") and is_secret(key, str(value)):
            name = key.removeprefix("cluster.env.")
            variable = CLI_ENV_PREFIX + re.sub(r"\W", "_", name)
            os.environ[variable] = str(value)
            item = f"cluster.secrets.{name}=env:{variable}"
        out.append(item)
    return out


@app.command("evaluate")
def evaluate_cmd(
    model: ModelArgument,
    data: Annotated[
        str,
        typer.Option(
            "--data", "-d", help="Prepared verl parquet or raw judge / GRRM data (any source URI)."
        ),
    ],
    mode: Annotated[
        ModeChoice | None,
        typer.Option(help="The judge's kind; a registered version knows its own."),
    ] = None,
    recipe: Annotated[
        str | None, typer.Option(help="Recipe for the settings (default: the version's own).")
    ] = None,
    profile: ProfileOption = None,
    set_: SetOption = None,
    allow_overlap: Annotated[
        bool, typer.Option(help="Score rows the model trained on (reported) instead of refusing.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Folder for predictions, details, PNGs.")
    ] = None,
) -> None:
    """Evaluate a judge: metrics, per-subset breakdown, predictions and pictures (+ MLflow)."""
    from judgeflow.cli.evaluate import default_output_dir, evaluate_model
    from judgeflow.config.secrets import keep_url_credentials

    overrides = [*(set_ or []), *(["evaluation.allow_overlap=true"] if allow_overlap else [])]
    out_dir = output or default_output_dir()
    data = keep_url_credentials(data)  # shown and stored without them; the download finds them
    try:
        result = evaluate_model(
            model, data, mode=mode.value if mode else None, recipe=recipe, profile=profile,
            overrides=overrides, output_dir=out_dir,
        )  # fmt: skip
    except _user_errors() as exc:
        raise _fail(exc, config_override) from None
    _print_evaluation(result, out_dir)


@app.command("judge")
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
    out = _wide_console()
    try:
        check_output(output, data)  # a location it cannot write fails now, not after every row
        cfg, model_uri, version = resolve_config(
            model, mode=mode.value if mode else None, recipe=None, profile=None,
            overrides=set_ or [], tracking_uri=None,
        )  # fmt: skip
        # One judging per output: here, before the MLflow run; on Slurm the job claims it.
        local = cfg.cluster.backend != "slurm"
        claim = claim_output(output, data) if local else contextlib.nullcontext()
        with claim:
            tracker = start_judging_run(cfg, model, version, data)
            summary = _judge_with_bar(cfg, model_uri, data, output, tracker, version, skip_invalid, out)  # fmt: skip
        record_judging(tracker, summary)
        tracker.finish()
    except JobFailed as exc:
        raise _fail(exc) from None
    except _user_errors() as exc:
        raise _fail(
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
    out = _wide_console()
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


def _wide_console() -> Console:
    """A terminal's own width; piped into a file or grep, wide enough that no cell folds."""
    return Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def _print_evaluation(result: Any, out_dir: Path) -> None:
    from judgeflow.console import evaluation_tables

    out = _wide_console()
    named = f"{result.model}" + (f" ({result.version})" if result.version else "")
    out.rule(f"[bold]{named}")
    out.print(f"weights   : {result.model_dir}")
    out.print(f"evaluated : {result.eval_file} ({int(result.metrics.get('eval/n', 0))} rows)")
    overlap = result.details.get("overlap") or {}
    checked = result.details.get("decontamination")
    if checked == "unchecked":
        out.print(
            "[yellow]overlap   : unchecked: the model has no lineage file (judgeflow-lineage.json: "
            "a base model, or weights without it), so what it trained on is unknown[/]"
        )
    elif checked == "overlap-allowed":
        out.print(
            f"[yellow]overlap   : {overlap['overlapping_rows']} rows the model trained on were "
            f"scored (--allow-overlap); kept as evaluation set {result.details.get('eval_set')}, "
            "apart from clean numbers[/]"
        )
    else:
        out.print("overlap   : checked: none with the model's training data")
    for table in evaluation_tables(result, result.mode):
        out.print(table)
    if result.mlflow_run_id:
        out.print(f"MLflow run: {result.mlflow_run_id} (experiment judgeflow-evaluate)")
    out.print(f"files     : {out_dir}")


@app.command("models")
def models_cmd(
    name: Annotated[
        str | None,
        typer.Argument(
            help="A recipe (grpo-pointwise) or registered model; default: all. "
            "A version (models:/NAME@champion, models:/NAME/2): its model card."
        ),
    ] = None,
) -> None:
    """Registered judge models: versions, aliases, the gate's metric, decision and lineage;
    for one version, its model card (lineage, evaluation, how to use it)."""
    from rich.table import Table

    from judgeflow.config.redaction import strip_credentials
    from judgeflow.registry.models import ModelRegistry

    registry = ModelRegistry()
    if name is not None and name.startswith("models:/"):
        try:
            version = registry.resolve(name)
        except _user_errors() as exc:
            raise _fail(exc) from None
        _print_model_card(version, name)
        return
    try:
        names = _registered_names(registry, name)
    except _user_errors() as exc:
        raise _fail(exc) from None
    out = _wide_console()
    if not names:
        out.print("no registered models yet: a pipeline run registers its model at the end")
        return
    paid = _policies_paid(registry)
    for registered in names:
        table = Table(title=registered, title_justify="left")
        columns = ["version", "aliases", "metric", "value", "decision", "data", "parent", "run"]
        versions = registry.versions(registered)
        judge_of = any(v.tags.get(TAG_REWARD_JUDGE) for v in versions)
        paid_any = any(paid.get(v.ref) for v in versions)
        columns += ["paid by"] * judge_of + ["paid policies"] * paid_any
        for column in columns:
            table.add_column(column, overflow="fold")
        for v in versions:
            metric = v.tags.get("judgeflow.primary_metric", "")
            value = (v.evaluation(v.tags.get("judgeflow.eval_set")) or {}).get(metric)
            decision = "forced" if v.tags.get("judgeflow.forced") == "true" else (
                "promoted" if v.tags.get("judgeflow.promoted") == "true" else "challenger"
            )  # fmt: skip
            table.add_row(
                v.version, ", ".join(v.aliases), metric,
                "" if value is None else f"{value:.4f}", decision,
                strip_credentials(v.tags.get("judgeflow.data.source", "")),  # older versions' tags
                v.tags.get("judgeflow.parent_version", ""),
                (v.run_id or "")[:12],
                *([v.tags.get(TAG_REWARD_JUDGE, "").removeprefix("models:/")] if judge_of else []),
                *([", ".join(paid.get(v.ref, []))] if paid_any else []),
            )  # fmt: skip
        out.print(table)


#: The lineage a version's card shows: tag -> label.
CARD_LINEAGE = {
    "judgeflow.recipe": "recipe",
    "judgeflow.data.source": "data",
    "judgeflow.data.manifest_hash": "data hash",
    "judgeflow.config_hash": "config hash",
    "judgeflow.code_version": "code",
    "judgeflow.git_commit": "git commit",
    "judgeflow.start_model": "started from",
    "judgeflow.parent_version": "parent version",
    "judgeflow.mlflow_run_id": "MLflow run",
    "judgeflow.slurm_job_ids": "Slurm jobs",
    "judgeflow.decision": "gate",
    TAG_REWARD_JUDGE: "paid by judge",
    "judgeflow.reward.judge_run_id": "judge's run",
    "judgeflow.reward.judge_data_hash": "judge's data",
}


def _print_model_card(version: Any, uri: str) -> None:
    """One version: what it is, where it came from, how it measured, and how to use it."""
    from rich.markdown import Markdown

    from judgeflow.config.redaction import strip_credentials

    out = _wide_console()
    aliases = f" ({', '.join(version.aliases)})" if version.aliases else ""
    out.rule(f"[bold]{version.ref}{aliases}")
    out.print(f"{'mode':<15}: {version.tags.get('judgeflow.mode', '')}")
    out.print(f"{'weights':<15}: {strip_credentials(version.model_uri)}")
    for tag, label in CARD_LINEAGE.items():
        if version.tags.get(tag):
            out.print(f"{label:<15}: {strip_credentials(version.tags[tag])}", highlight=False)
    from judgeflow.registry.models import ModelRegistry

    policies = _policies_paid(ModelRegistry()).get(version.ref)
    if policies:
        out.print(f"{'paid policies':<15}: {', '.join(policies)}", highlight=False)
    if version.description:
        out.print(Markdown(version.description))
    out.print(f"\n[bold]Use it[/]: mlflow.pyfunc.load_model({uri!r}).predict(frame)")
    out.print(f"  REST : mlflow models serve -m {uri} --env-manager local -p 5001")
    out.print(f"  batch: judgeflow judge {uri} --data FILE --output verdicts.parquet")


def _policies_paid(registry: Any) -> dict[str, list[str]]:
    """Judge version (`NAME/VERSION`) -> the policy versions it paid (their
    `judgeflow.reward.judge` tag), across every registered model."""
    paid: dict[str, list[str]] = {}
    for name in registry.names():
        for v in registry.versions(name):
            if judge := v.tags.get(TAG_REWARD_JUDGE):
                paid.setdefault(judge.removeprefix("models:/"), []).append(v.ref)
    return {judge: sorted(policies) for judge, policies in paid.items()}


def _registered_names(registry: Any, name: str | None) -> list[str]:
    """All judgeflow models; a recipe's model and its SFT model; or one registered name."""
    if name is None:
        return list(registry.names())
    if name in list_recipes():
        base = load_config(name).registered_model_name
        return [n for n in (base, f"{base}-sft") if registry.versions(n)] or [base]
    return [name]


def _progress_view(interactive: bool):  # -> ContextManager
    """Progress bars on a terminal; nothing extra when the output is a file or a pipe."""
    from contextlib import nullcontext

    from judgeflow.console import terminal_view

    return terminal_view(Console(soft_wrap=True)) if interactive else nullcontext()


def _checkout_on_path() -> None:
    """The pipelines (`flows/`, `tasks/`) live in the project's checkout, not in the wheel: the
    editable install puts the checkout on `sys.path`; an installed wheel finds it through
    $JUDGEFLOW_REPO or the working directory."""
    import importlib.util

    if importlib.util.find_spec("flows.judge_grpo") is not None:
        return
    checkout = Path(os.environ.get("JUDGEFLOW_REPO") or Path.cwd())
    if not (checkout / "flows" / "judge_grpo.py").is_file():
        raise _fail(
            ConfigError(
                "judgeflow run needs the project's checkout (its flows/ and tasks/ are not in "
                f"the wheel), and {checkout} is not one: run it from the checkout, or set "
                "JUDGEFLOW_REPO to it"
            )
        )
    sys.path.insert(0, str(checkout))


def _ensure_model(path: str) -> None:
    """Build the tiny model when a profile points at it and it is missing (a new
    JUDGEFLOW_HOME); a missing local directory otherwise is a one-line error, not a hub lookup."""
    from judgeflow.config import judgeflow_home

    target = Path(path)
    if not target.is_absolute() and not path.startswith("."):
        return  # a hub id such as Qwen/Qwen3-8B
    if (target / "config.json").is_file():
        return
    if target.resolve() == (judgeflow_home() / "tiny-model").resolve():
        from judgeflow.dev.tiny_model import build_tiny_model

        console.print(f"building the tiny model in {target} (offline, seconds)")
        build_tiny_model(target)
        return
    raise ConfigError(
        f"model.path {path}: no model there (no config.json). Point model.path at a model "
        f"directory or a hub id; for a tiny CPU model run `judgeflow dev tiny-model {path}`"
    )


def _print_summary(summary: dict, home: Path) -> None:
    from judgeflow.config.redaction import strip_credentials
    from judgeflow.console import summary_tables

    out = Console(soft_wrap=True)
    out.rule("[bold]judgeflow run finished")
    out.print(f"MLflow run id : [bold]{summary['mlflow_run_id']}[/]")
    out.print(f"checkpoint    : {summary.get('checkpoint')}")
    tables = summary_tables(summary)
    for table in tables:
        out.print(table)
    if not tables:
        for key, value in sorted(summary.get("metrics", {}).items()):
            out.print(f"  {key:32s} {value:.4f}")
    if judge := summary.get("paid_by"):
        out.print(
            f"paid by       : [bold]{judge['ref']}[/] ({judge['mode']} judge)", highlight=False
        )
    if (overlap := summary.get("judge_overlap")) and overlap["status"] != "checked":
        said = (
            f"{overlap['overlapping_rows']} of {overlap['rows']} held-out questions are ones the "
            "judge trained on: its reward there is not an independent opinion"
            if overlap["status"] == "overlap"
            else "unchecked: the judge's lineage records no training questions"
        )
        out.print(f"judge overlap : [yellow]{said}[/]", highlight=False)
    if hacking := summary.get("hacking"):
        colour = "red" if hacking["status"] == "hacked" else "green"
        out.print(f"hacking guard : [{colour}]{hacking['message']}[/]", highlight=False)
    for decision in (summary.get("registry") or {}).values():
        colour = "green" if decision["promoted"] else "yellow"
        out.print(
            f"registered    : [bold]{decision['name']} v{decision['version']}[/] "
            f"[{colour}]{decision['reason']}[/]",
            highlight=False,
        )
    uri = summary.get("tracking_uri", "")
    prefect_home = os.environ.get("PREFECT_HOME", str(home / "prefect"))
    out.print("\nOpen the UIs:")
    if uri.startswith("sqlite:"):
        out.print(
            f"  MLflow : {sys.prefix}/bin/mlflow ui --backend-store-uri {uri} --port 5000  → http://127.0.0.1:5000"
        )
    else:
        out.print(f"  MLflow : {summary.get('mlflow_url') or uri}")
    if os.environ.get("PREFECT_API_URL") and local_server() is None:
        out.print(
            f"  Prefect: {strip_credentials(os.environ['PREFECT_API_URL'].removesuffix('/api'))}"
        )
    else:
        out.print(
            f"  Prefect: PREFECT_HOME={prefect_home} {sys.prefix}/bin/prefect server start  → http://127.0.0.1:4200"
        )


def main() -> None:  # pragma: no cover - console entry point alias
    app()
