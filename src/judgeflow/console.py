"""What a person sees on a terminal while `judgeflow run` works, and the table it ends with.

The CLI installs a `TerminalView` for the length of a run; the flow's tasks report to it through
`report_progress` / `report_stage`, which do nothing when no view is installed (a Prefect
worker, a test). One progress bar per training stage shows step/total, reward (or loss) and
elapsed time; finished stages print one line each.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

__all__ = [
    "TerminalView",
    "comparison_rows",
    "comparison_table",
    "report_progress",
    "report_stage",
    "terminal_view",
]

_view: TerminalView | None = None
_lock = threading.Lock()

#: Progress metrics shown beside a bar: (metric, label).
_SHOWN = (
    ("train/reward_mean", "reward"),
    ("train/format_failure_rate", "format fail"),
    ("sft/loss", "loss"),
)


class TerminalView:
    """Rich progress bars, one per training stage, and one line per finished stage."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.description:<14}"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TextColumn("{task.fields[shown]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self.tasks: dict[str, TaskID] = {}

    def update(self, stage: str, step: int, total: int, metrics: Mapping[str, float]) -> None:
        shown = "  ".join(f"{label} {metrics[key]:.3f}" for key, label in _SHOWN if key in metrics)
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=total or None, shown="")
        self.progress.update(self.tasks[stage], completed=step, total=total or None, shown=shown)

    def stage(self, name: str, status: str, duration_s: float) -> None:
        colour = {"ran": "green", "cached": "blue", "failed": "red"}.get(status, "white")
        self.progress.console.print(
            f"  [{colour}]{status:>6}[/] {escape(name)} ({duration_s:.1f} s)"  # evaluate[sft]
        )


@contextmanager
def terminal_view(console: Console) -> Iterator[TerminalView]:
    """Show progress on `console` while the block runs (bars stay on screen when done)."""
    global _view
    view = TerminalView(console)
    with view.progress:
        with _lock:
            _view = view
        try:
            yield view
        finally:
            with _lock:
                _view = None


def report_progress(stage: str, step: int, total: int, metrics: Mapping[str, float]) -> None:
    """A training stage reached `step` of `total` (no-op without a terminal view)."""
    view = _view
    if view is not None:
        view.update(stage, step, total, metrics)


def report_stage(name: str, status: str, duration_s: float) -> None:
    """A pipeline stage ended: ran, cached or failed (no-op without a terminal view)."""
    view = _view
    if view is not None:
        view.stage(name, status, duration_s)


# ---------------------------------------------------------------------------- before → after

#: Metrics compared across evaluations, in display order.
COMPARED = ("reward_mean", "format_failure_rate", "exact_match", "mae", "accuracy",
            "ranking_reward", "score_reward")  # fmt: skip


def comparison_rows(metrics: Mapping[str, float], labels: Sequence[str]) -> list[dict[str, Any]]:
    """One row per compared metric with a column per evaluation label (`before`, `sft`, …) that
    has it, and `change` = last − first. `metrics` holds `<label>/<metric>` keys."""
    present = [label for label in labels if any(k.startswith(f"{label}/") for k in metrics)]
    rows = []
    for name in COMPARED:
        values = {label: metrics.get(f"{label}/{name}") for label in present}
        if all(v is None for v in values.values()):
            continue
        row: dict[str, Any] = {"metric": name, **values}
        known = [v for v in values.values() if v is not None]
        if len(known) >= 2:
            row["change"] = known[-1] - known[0]
        rows.append(row)
    return rows


def comparison_table(rows: Sequence[Mapping[str, Any]], title: str) -> Table:
    """The before → after comparison as a rich table (figures to 3 decimals)."""
    columns = [c for c in rows[0] if c != "metric"] if rows else []
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for column in columns:
        table.add_column(column, justify="right")
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column)
            if value is None:
                cells.append("–")
            elif column == "change":
                cells.append(f"{value:+.3f}")
            else:
                cells.append(f"{value:.3f}")
        table.add_row(str(row["metric"]), *cells)
    return table
