"""The front ends: the `judgeflow` command line.

- `typer_app`: the typer app (`app`), assembled from the command groups:
  - `recipes`: `judgeflow recipes|config|render|run`
  - `prepare`: `judgeflow prepare judge|rlvr|grrm-sft|grrm-rl`
  - `models`: `judgeflow evaluate` and `judgeflow models`
  - `judging`: `judgeflow judge`
  - `dev`: `judgeflow dev tiny-model|demo-data`
  - `common`: what they share (option types, the status console, user errors)
- `evaluate`: the work of `judgeflow evaluate`, a judge or a policy measured on a data file
  outside any pipeline
- `dry_run`: the work of `judgeflow render`, what each GPU stage of a recipe would submit,
  submitting nothing
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
        from judgeflow.cli.typer_app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
