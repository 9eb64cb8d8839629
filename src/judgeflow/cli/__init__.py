"""The front ends: the `judgeflow` command line.

- `commands`: the typer app (`judgeflow run|prepare|evaluate|render|models|recipes|config|dev`)
- `evaluate`: `judgeflow evaluate`, a judge measured on a data file outside any pipeline
- `dry_run`: `judgeflow render`, what each GPU stage of a recipe would submit, submitting nothing
"""

from judgeflow.cli.commands import app, main

__all__ = ["app", "main"]
