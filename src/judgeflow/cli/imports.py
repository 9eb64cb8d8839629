"""`judgeflow import open-instruct SCRIPT`: a launch script of another tool as a recipe."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from judgeflow.cli.common import console

import_app = typer.Typer(no_args_is_help=True, help="Bring another tool's launch scripts in.")


@import_app.command("open-instruct")
def open_instruct_cmd(
    script: Annotated[
        Path, typer.Argument(help="A grpo_fast.py launch script (mason.py wrapper and all).")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="The recipe to write (YAML).")],
    base: Annotated[str, typer.Option(help="The preset the recipe starts from.")] = "rlvr",
) -> None:
    """Write a recipe over a preset from an open-instruct grpo_fast.py script: every flag is
    mapped onto judgeflow keys or listed with why it has no counterpart, and the recipe is
    loaded once to check it before it is written."""
    import tempfile
    import warnings

    from rich.table import Table

    from judgeflow.config import IgnoredKeyWarning, load_config
    from judgeflow.config.open_instruct import import_script, recipe_yaml
    from judgeflow.data.io import atomic_write_text

    try:
        imported = import_script(script.read_text(encoding="utf-8"), script_dir=script.parent)
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"{script}: {exc}", param_hint="SCRIPT") from exc
    text = recipe_yaml(imported, base=base, source=script.name)
    with tempfile.TemporaryDirectory() as tmp:  # the recipe must load before it is written
        trial = Path(tmp) / output.name
        trial.write_text(text, encoding="utf-8")
        try:
            with warnings.catch_warnings():  # keys of verl read on a cluster only: said below
                warnings.simplefilter("ignore", IgnoredKeyWarning)
                load_config(str(trial))
        except Exception as exc:
            raise typer.BadParameter(
                f"the recipe does not load: {exc}", param_hint="SCRIPT"
            ) from exc
    atomic_write_text(output, text)
    table = Table("open-instruct flag", "judgeflow", "note", title=f"{script.name} → {output}")
    for flag, keys, note in imported.mapped:
        set_keys = ", ".join(f"{k}={v}" for k, v in keys.items()) or "—"
        table.add_row(flag.shown[:60], set_keys, note)
    for flag, why in imported.unmapped:
        table.add_row(flag.shown[:60], "[yellow]not mapped[/]", why)
    console.print(table)
    derived = {k: v for k, v in imported.keys.items()
               if not any(k in keys for _, keys, _ in imported.mapped)}  # fmt: skip
    if derived:
        console.print("from several flags: " + ", ".join(f"{k}={v}" for k, v in derived.items()))
    console.print(f"[green]wrote[/] {output} ({len(imported.mapped)} flags mapped, "
                  f"{len(imported.unmapped)} with no counterpart)")  # fmt: skip
