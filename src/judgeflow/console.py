"""What a person sees on a terminal while `judgeflow run` works, the table it ends with, and
the tables of one evaluation (`evaluation_tables`).

The CLI installs a `TerminalView` for the length of a run; the flow's tasks report to it through
`report_progress` / `report_stage`, which do nothing when no view is installed (a Prefect
worker, a test). One progress bar per training stage shows step/total, reward (or loss) and
elapsed time; finished stages print one line each.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

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
    "Evaluated",
    "TerminalView",
    "comparison_rows",
    "comparison_table",
    "evaluation_tables",
    "plain_text",
    "report_progress",
    "report_stage",
    "subset_comparison_rows",
    "summary_tables",
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

#: Metrics compared across evaluations, in display order: the modes' primary metrics first
#: (a run has one mode, so its primary metric comes right after the format-failure rate).
COMPARED = ("reward_mean", "format_failure_rate",
            "exact_match", "consistent_accuracy", "ranking_accuracy", "verifiable_correct_rate",
            "reference_f1", "judge_reward_mean", "judge_format_failure_rate",
            "judge_inconsistent_rate",
            "mae", "calibration_error",
            "accuracy", "consistency", "position_bias",
            "score_agreement", "validity")  # fmt: skip


def comparison_rows(metrics: Mapping[str, float], labels: Sequence[str]) -> list[dict[str, Any]]:
    """One row per compared metric with a column per evaluation label (`before`, `sft`, …) that
    has it, and `change` = last − first of this run's own models (a `champion…` column, the
    registry's current champion measured for the gate, is shown but not part of the change).
    `metrics` holds `<label>/<metric>` keys."""
    present = [label for label in labels if any(k.startswith(f"{label}/") for k in metrics)]
    rows = []
    for name in COMPARED:
        values = {label: metrics.get(f"{label}/{name}") for label in present}
        if all(v is None for v in values.values()):
            continue
        row: dict[str, Any] = {"metric": name, **values}
        known = [v for k, v in values.items() if v is not None and not k.startswith("champion")]
        if len(known) >= 2:
            row["change"] = known[-1] - known[0]
        rows.append(row)
    return rows


def subset_comparison_rows(
    metrics: Mapping[str, float], labels: Sequence[str], metric: str
) -> list[dict[str, Any]]:
    """`comparison_rows` for one metric per subset (`<label>/subset/<key>/<metric>` keys): a
    row per subset, in the row's `metric` field, so a run shows where its judge got better
    (RewardBench2's subsets, the tiny demo's unseen non-answers)."""
    suffix = f"/{metric}"
    subsets = sorted(
        {
            parts[2]
            for key in metrics
            if key.endswith(suffix) and len(parts := key.split("/")) == 4 and parts[1] == "subset"
        }
    )
    rows = []
    for subset in subsets:
        values = {
            label: metrics[key]
            for label in labels
            if (key := f"{label}/subset/{subset}/{metric}") in metrics
        }
        row: dict[str, Any] = {"metric": subset, **values}
        known = [v for k, v in values.items() if not k.startswith("champion")]
        if len(known) >= 2:
            row["change"] = known[-1] - known[0]
        rows.append(row)
    return rows


def summary_tables(summary: Mapping[str, Any]) -> list[Table]:
    """What `judgeflow run` prints at the end of a run (a flow's returned summary): the before →
    after comparison, and the mode's primary metric per subset when there are several."""
    from judgeflow.evaluation.metrics import PRIMARY_METRIC

    rows = summary.get("comparison") or []
    if not rows:
        return []
    shown = [row["metric"] for row in rows]
    policy = PRIMARY_METRIC["rlvr"] in shown  # an rlvr run: a policy, on held-out prompts
    title = "Policy on the held-out prompts" if policy else "Judge on the validation split"
    tables = [comparison_table(rows, f"{title} (before → after)")]
    metric = next((m for m in PRIMARY_METRIC.values() if m in shown), "")
    labels = [c for c in rows[0] if c not in ("metric", "change")]
    by_subset = subset_comparison_rows(summary.get("metrics", {}), labels, metric)
    if len(by_subset) > 1:
        tables.append(comparison_table(by_subset, f"{metric} by subset", first_column="subset"))
    return tables


def plain_text(tables: Sequence[Table], width: int = 80) -> str:
    """Tables as `judgeflow run` prints them to a file or pipe (no colour, 80 columns): what
    the README quotes of a run and what the tests compare with it."""
    import io

    buffer = io.StringIO()
    out = Console(file=buffer, width=width, color_system=None, soft_wrap=True)
    for table in tables:
        out.print(table)
    return buffer.getvalue()


def comparison_table(
    rows: Sequence[Mapping[str, Any]], title: str, first_column: str = "metric"
) -> Table:
    """The before → after comparison as a rich table (figures to 3 decimals)."""
    columns = [c for c in rows[0] if c != "metric"] if rows else []
    table = Table(title=title, title_justify="left")
    table.add_column(first_column)
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


# ---------------------------------------------------------------------------- one evaluation


class Evaluated(Protocol):
    """What the evaluation tables read: a `JudgeEvaluation`, or any result carrying its
    `metrics` (`eval/…`) and `details` (e.g. the `judgeflow evaluate` command's result)."""

    @property
    def metrics(self) -> Mapping[str, float]: ...

    @property
    def details(self) -> Mapping[str, Any]: ...


#: Overall metrics shown per mode, primary first (`eval/<name>`, with `± <name>_std`).
_HEADLINE = {
    "pointwise": ("exact_match", "mae", "calibration_error", "n_valid"),
    "pairwise": ("consistent_accuracy", "accuracy", "consistency", "position_bias", "pairs"),
    "grrm": ("ranking_accuracy", "score_agreement", "validity"),
    "rlvr": ("verifiable_correct_rate", "verifiable_reward_mean", "verifier_cut_short",
             "reference_f1", "judge_reward_mean", "judge_format_failure_rate",
             "judge_inconsistent_rate", "judged_n"),
}  # fmt: skip
_COMMON = ("reward_mean", "format_failure_rate", "n", "samples")
#: Per-subset columns besides n and the format-failure rate, primary first.
_SUBSET_COLUMNS = {
    "pointwise": ("exact_match", "mae"),
    "pairwise": ("consistent_accuracy", "accuracy", "consistency", "position_bias"),
    "grrm": ("ranking_accuracy", "score_agreement", "validity"),
    "rlvr": ("verifiable_correct_rate",),
}
#: Short column headers, so the per-subset table fits a terminal.
_SHORT = {
    "consistent_accuracy": "consistent acc.",
    "format_failure_rate": "format fail",
    "position_bias": "pos. bias",
    "ranking_accuracy": "ranking acc.",
    "score_agreement": "score agr.",
    "verifiable_correct_rate": "correct",
}
_SWAP_OUTCOMES = (
    ("correct_both", "right in both orders"),
    ("wrong_both", "wrong in both orders (consistent)"),
    ("always_A", "A in both orders"),
    ("always_B", "B in both orders"),
    ("format_failure", "a format failure in either order"),
)


def evaluation_tables(evaluation: Evaluated, mode: str) -> list[Table]:
    """One evaluation for the terminal: the headline metrics, the per-subset breakdown, and the
    confusion matrix and calibration (pointwise) or the swap outcomes (pairwise)."""
    details = evaluation.details
    tables = [_headline_table(evaluation.metrics, mode), _subset_table(details, mode)]
    if details.get("confusion"):
        tables.append(_confusion_table(details["confusion"]))
    if details.get("calibration"):
        tables.append(_calibration_table(details["calibration"]))
    if details.get("swaps"):
        tables.append(_swap_table(details["swaps"], int(details.get("samples", 1))))
    return tables


def _headline_table(metrics: Mapping[str, float], mode: str) -> Table:
    what = "Policy" if mode == "rlvr" else "Judge"
    table = Table(title=f"{what} quality ({mode})", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    spread = any(k.endswith("_std") and not k.startswith("eval/subset/") for k in metrics)
    if spread:
        table.add_column("± std (samples)", justify="right")
    for name in (*_HEADLINE.get(mode, ()), *_COMMON):
        value = metrics.get(f"eval/{name}")
        if value is None:
            continue
        std = metrics.get(f"eval/{name}_std")
        cells = [_figure(name, value)] + ([_figure(name, std)] if spread else [])
        table.add_row(name, *cells)
    return table


def _subset_table(details: Mapping[str, Any], mode: str) -> Table:
    columns = _SUBSET_COLUMNS.get(mode, ())
    table = Table(title="Per subset (samples pooled)", title_justify="left")
    table.add_column("subset")
    table.add_column("n", justify="right")
    for column in (*columns, "format_failure_rate"):
        table.add_column(_SHORT.get(column, column), justify="right")
    for row in details.get("subsets", []):
        cells = [_figure(c, row.get(c)) for c in (*columns, "format_failure_rate")]
        table.add_row(escape(str(row["subset"]) or "(none)"), _figure("n", row["n"]), *cells)
    return table


def _confusion_table(confusion: Mapping[str, Any]) -> Table:
    table = Table(title="Confusion (true label × predicted)", title_justify="left")
    table.add_column("true")
    for column in confusion["pred"]:
        table.add_column("fail" if column == "format_failure" else column, justify="right")
    table.add_column("total", justify="right")
    for label, counts in zip(confusion["true"], confusion["counts"], strict=True):
        table.add_row(str(label), *(str(c) for c in counts), str(sum(counts)))
    return table


def _calibration_table(calibration: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="Calibration (well-formed verdicts)", title_justify="left")
    for column in ("predicted", "n", "mean true label", "exact"):
        table.add_column(column, justify="right")
    for row in calibration:
        table.add_row(
            str(row["pred"]),
            str(row["n"]),
            _figure("mean_label", row["mean_label"]),
            _figure("exact", row["exact"]),
        )
    return table


def _swap_table(swaps: Mapping[str, int], samples: int) -> Table:
    pairs = swaps.get("pairs", 0)
    pooled = f" over {samples} samples" if samples > 1 else ""
    table = Table(title=f"Both orders of each pair ({pairs} pairs{pooled})", title_justify="left")
    table.add_column("verdicts")
    table.add_column("pairs", justify="right")
    table.add_column("share", justify="right")
    for key, text in _SWAP_OUTCOMES:
        count = swaps.get(key, 0)
        table.add_row(text, str(count), f"{count / pairs:.3f}" if pairs else "–")
    if swaps.get("incomplete"):
        table.add_row("only one order judged (left out)", str(swaps["incomplete"]), "–")
    return table


def _figure(name: str, value: Any) -> str:
    """Counts as integers, everything else to 3 decimals, – for not defined."""
    if value is None:
        return "–"
    if name in ("n", "n_valid", "pairs", "samples", "judged_n"):
        return f"{value:g}"
    return f"{value:.3f}"
