"""The `judgeflow` typer app, assembled here from its command groups, in the order `--help`
lists them. The groups import nothing heavy at the top: a command imports what it needs when
it runs, so `judgeflow --help` and `judgeflow run`'s start stay quick."""

from __future__ import annotations

from typing import Annotated

import typer

from judgeflow.cli import dev, imports, judging, models, prepare, recipes
from judgeflow.log_setup import level_for, show_logs

app = typer.Typer(no_args_is_help=True, help="Train generative judge and reward models.")


@app.callback()
def _show_logs(
    quiet: Annotated[
        bool, typer.Option("--quiet", help="Show only warnings and errors of judgeflow's log.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Show judgeflow's debug log records too.")
    ] = False,
) -> None:
    # judgeflow's log records on stderr (`judgeflow.log_setup`): INFO and above unless told.
    if quiet and verbose:
        raise typer.BadParameter("--quiet and --verbose exclude each other")
    show_logs(level_for(quiet=quiet, verbose=verbose))


app.add_typer(prepare.prepare_app, name="prepare")
app.add_typer(dev.dev_app, name="dev")
app.add_typer(imports.import_app, name="import")

app.command("render")(recipes.render_cmd)
app.command("recipes")(recipes.recipes_cmd)
app.command("config")(recipes.config_cmd)
app.command("run")(recipes.run_cmd)
app.command("evaluate")(models.evaluate_cmd)
app.command("judge")(judging.judge_cmd)
app.command("models")(models.models_cmd)
