"""`judgeflow recipes|config|render|run`: list the recipes, resolve one, dry-run one, run one.

`run` starts the recipe's pipeline, a Prefect flow in the project's checkout (`flows/`), and
prints the run's summary; the console script has started the temporary Prefect server it
talks to by then (`judgeflow.cli.local_prefect`). `typer_app` registers the commands.
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from judgeflow.cli.common import (
    ProfileOption,
    RecipeArgument,
    SetOption,
    console,
    fail,
    user_errors,
    warn,
)
from judgeflow.cli.local_prefect import ServerStartError, local_server, prefect_settings
from judgeflow.config import ConfigError, list_profiles, list_recipes, load_config
from judgeflow.config.hints import config_override


def render_cmd(
    recipe: RecipeArgument, profile: ProfileOption = None, set_: SetOption = None
) -> None:
    """Dry run: print the sbatch script and engine command of each GPU stage; submits nothing."""
    from judgeflow.cli.dry_run import render_recipe

    try:
        cfg = load_config(recipe, profile=profile, overrides=set_ or [], report=warn)
    except ConfigError as exc:
        raise fail(exc) from None
    print(render_recipe(cfg), end="")


def recipes_cmd() -> None:
    """List the recipe presets and profiles."""
    for name in list_recipes():
        print(name)
    print("profiles: " + ", ".join(list_profiles()))


def config_cmd(
    recipe: RecipeArgument, profile: ProfileOption = None, set_: SetOption = None
) -> None:
    """Print the fully resolved configuration of a recipe (after profile and overrides)."""
    import yaml

    try:
        cfg = load_config(recipe, profile=profile, overrides=set_ or [], report=warn)
    except ConfigError as exc:
        raise fail(exc) from None
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
        cfg = load_config(recipe, profile=profile, overrides=set_, report=warn)
        _ensure_model(cfg.model.path)
    except ConfigError as exc:
        raise fail(exc) from None
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
                raise fail(exc) from None
        with _progress_view(interactive):
            if server:
                with without_heartbeats():
                    summary = pipeline()
            else:
                summary = pipeline()
    except user_errors() as exc:
        raise fail(exc, config_override) from None
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
        raise fail(
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
        if panel := judge.get("panel"):
            refs = ", ".join(p["ref"] for p in panel)
            out.print(f"judge panel   : {refs} (each rollout: the lowest score)", highlight=False)
    if (overlap := summary.get("judge_overlap")) and overlap["status"] != "checked":
        said = (
            f"{overlap['overlapping_rows']} of {overlap['rows']} held-out questions are ones the "
            "judge trained on: its reward there is not an independent opinion"
            if overlap["status"] == "overlap"
            else "unchecked: the judge's lineage records no training questions"
        )
        out.print(f"judge overlap : [yellow]{said}[/]", highlight=False)
    if hacking := summary.get("hacking"):
        colour = "green" if hacking["status"] == "clear" else "red"
        out.print(f"hacking gate  : [{colour}]{hacking['message']}[/]", highlight=False)
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
