"""What the command groups share: option types, the status console, user errors.

Errors a user can fix (bad config, bad data, missing source) print one clear message and exit 2,
without a traceback. A data error's hints name the command's flags (`--skip-invalid`), or for a
pipeline the `--set` of its config key (`--set data.skip_invalid=true`), not Python keywords.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from judgeflow.config import ConfigError

if TYPE_CHECKING:
    from judgeflow.data.errors import OptionNamer

#: Status, warnings and errors go to stderr; results to stdout (`wide_console`).
console = Console(stderr=True, soft_wrap=True)

SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a config key: dotted.key=value (repeatable)."),
]
ProfileOption = Annotated[
    str | None, typer.Option("--profile", "-p", help="Overlay a profile, e.g. `tiny` for CPU.")
]

ModelArgument = Annotated[
    str, typer.Argument(help="models:/NAME@champion, models:/NAME/3, a model dir or store URI.")
]
RecipeArgument = Annotated[
    str, typer.Argument(help="A recipe preset (`judgeflow recipes` lists them) or a YAML file.")
]


def user_errors() -> tuple[type[Exception], ...]:
    """The errors a user can fix; imported when a command catches them, not at start-up."""
    from judgeflow.data import DataError
    from judgeflow.registry.models import RegistryError
    from judgeflow.storage import SourceError, StoreError

    return (ConfigError, DataError, SourceError, StoreError, RegistryError, FileNotFoundError)


def warn(message: str) -> None:
    console.print(f"[yellow]warning:[/] {message}")


def fail(exc: Exception, names: OptionNamer | None = None) -> typer.Exit:
    """Print a user error (a data error's hints named by `names`, see `judgeflow.config.hints`)."""
    from rich.markup import escape

    from judgeflow.data import DataError

    text = exc.render(names) if names is not None and isinstance(exc, DataError) else str(exc)
    console.print(f"[bold red]error:[/] {escape(text)}", highlight=False, markup=True)
    return typer.Exit(code=2)


def wide_console() -> Console:
    """A terminal's own width; piped into a file or grep, wide enough that no cell folds."""
    return Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
