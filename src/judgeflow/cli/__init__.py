"""The front ends: the `judgeflow` command line.

- `commands`: the typer app (`judgeflow run|prepare|evaluate|render|models|recipes|config|dev`)
- `evaluate`: `judgeflow evaluate`, a judge measured on a data file outside any pipeline
- `dry_run`: `judgeflow render`, what each GPU stage of a recipe would submit, submitting nothing
- `local_prefect`: Prefect's temporary server for `judgeflow run`, started first thing

This module imports nothing heavy: `main` (the console script) starts `judgeflow run`'s Prefect
server before the typer app and its imports load, so the two overlap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["app", "main"]


def main() -> None:
    """The `judgeflow` command."""
    from judgeflow.cli.launch import main as launch

    launch()


def __getattr__(name: str) -> Any:  # `from judgeflow.cli import app` loads the typer app
    if name == "app":
        from judgeflow.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
