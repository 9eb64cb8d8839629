"""PNG figures for the MLflow run: training curves, the before → after comparison, and what
one evaluation found (confusion matrix, calibration, per-subset quality).

matplotlib with the Agg backend (no display needed); each function writes one file and returns
its path. Only the entry points that record a run call these; `write_evaluation_artifacts` is
the one call that turns a `JudgeEvaluation` into files for a folder of artifacts.

A figure is drawn once per content: each function's inputs (and this module's code and
matplotlib's version) name a PNG kept under `$JUDGEFLOW_HOME/cache/figures/`, and the same
inputs copy it instead of drawing again. A cached rerun logs the same pictures to its MLflow run
without importing matplotlib (drawing them took most of such a run's flow time).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from judgeflow.evaluation.judge import JudgeEvaluation

__all__ = [
    "SUBSET_METRICS",
    "plot_comparison",
    "plot_confusion_calibration",
    "plot_curves",
    "plot_subsets",
    "write_evaluation_artifacts",
]

Series = Sequence[tuple[int, float]]
Plot = TypeVar("Plot", bound=Callable[..., Path])

#: Figures kept in the cache; beyond this, the least recently written go first.
CACHED_FIGURES = 512


@functools.cache
def _fingerprint() -> str:
    """This module's code and matplotlib's version: a change to either draws anew."""
    try:
        mpl = version("matplotlib")
    except PackageNotFoundError:  # pragma: no cover - a dependency of judgeflow
        mpl = "?"
    return hashlib.sha256(Path(__file__).read_bytes() + mpl.encode()).hexdigest()


def _figure_cache() -> Path:
    from judgeflow.home import judgeflow_home

    return judgeflow_home() / "cache" / "figures"


def _remembered(draw: Plot) -> Plot:
    """`draw(data, path, **options)` drawn once per (function, data, options): later calls copy
    the PNG it wrote. The cache is a speed-up only: a file that cannot be read or written there
    falls back to drawing."""

    @functools.wraps(draw)
    def wrapper(data: Any, path: str | Path, **options: Any) -> Path:
        from judgeflow.data.io import atomic_write_bytes

        text = json.dumps([draw.__name__, data, options, _fingerprint()], sort_keys=True,
                          default=str, allow_nan=True)  # fmt: skip
        cached = _figure_cache() / f"{hashlib.sha256(text.encode()).hexdigest()}.png"
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            if cached.is_file():
                atomic_write_bytes(out, cached.read_bytes())
                return out
        except OSError:
            pass
        draw(data, out, **options)
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(cached, out.read_bytes())
            _prune(cached.parent)
        except OSError:
            pass
        return out

    return wrapper  # type: ignore[return-value]


def _prune(folder: Path) -> None:
    figures = sorted(folder.glob("*.png"), key=lambda p: p.stat().st_mtime)
    for old in figures[:-CACHED_FIGURES]:
        old.unlink(missing_ok=True)


@_remembered
def plot_curves(curves: Mapping[str, Series], path: str | Path, *, title: str) -> Path:
    """One panel per named series (step on x): reward, format-failure rate, SFT loss, …"""
    plt = _pyplot()
    shown = {name: points for name, points in curves.items() if points}
    fig, axes = plt.subplots(1, max(1, len(shown)), figsize=(4.2 * max(1, len(shown)), 3.4))
    axes = list(axes) if len(shown) > 1 else [axes]
    for ax, (name, points) in zip(axes, shown.items(), strict=False):
        steps, values = zip(*points, strict=True)
        ax.plot(steps, values, marker="o", markersize=2.5, linewidth=1.2)
        if len(values) >= 6:  # a moving mean makes a noisy RL curve readable
            window = max(3, len(values) // 8)
            smooth = [
                sum(values[max(0, i - window + 1) : i + 1])
                / len(values[max(0, i - window + 1) : i + 1])
                for i in range(len(values))
            ]
            ax.plot(steps, smooth, linewidth=2.2, label=f"mean of {window}")
            ax.legend(fontsize=8)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return _save(fig, plt, path)


@_remembered
def plot_comparison(rows: Sequence[Mapping[str, Any]], path: str | Path, *, title: str) -> Path:
    """Grouped bars: one group per metric, one bar per evaluation (before, sft, after)."""
    plt = _pyplot()
    labels = [c for c in (rows[0] if rows else {}) if c not in ("metric", "change")]
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * max(1, len(rows)), 3.6))
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        xs = [j + i * width for j in range(len(rows))]
        values = [row.get(label) for row in rows]
        bars = ax.bar(xs, [v if v is not None else 0.0 for v in values], width, label=label)
        names = [f"{v:.2f}" if v is not None else "–" for v in values]  # – : not measured
        ax.bar_label(bars, labels=names, fontsize=7)
    ax.set_xticks([j + width * (len(labels) - 1) / 2 for j in range(len(rows))])
    ax.set_xticklabels([str(row["metric"]) for row in rows], fontsize=8)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _save(fig, plt, path)


# ------------------------------------------------------------------------------ evaluation

#: The per-subset bars of each mode: its primary metric first, then what explains it.
SUBSET_METRICS: dict[str, tuple[str, ...]] = {
    "pointwise": ("exact_match", "format_failure_rate"),
    "pairwise": ("consistent_accuracy", "consistency", "position_bias"),
    "grrm": ("ranking_accuracy", "score_agreement", "validity"),
    "rlvr": ("verifiable_correct_rate", "format_failure_rate"),
}


def write_evaluation_artifacts(
    evaluation: JudgeEvaluation,
    mode: str,
    label: str,
    out_dir: str | Path,
    *,
    title: str | None = None,
) -> list[Path]:
    """Write one evaluation's files into `out_dir`, for logging as a folder of artifacts:
    `<label>_details.json` (`evaluation.details`), `<label>_subsets.png` (every mode) and, for
    pointwise, `<label>_confusion.png` (confusion matrix and calibration). `title` names the
    model in the figures (default: `label`). Returns the paths written."""
    from judgeflow.data.io import atomic_write_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^\w.-]", "_", label) or "evaluation"  # a file name, whatever the label
    details = evaluation.details
    written = [out / f"{stem}_details.json"]
    text = json.dumps(details, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    atomic_write_text(written[0], text)  # strict JSON: a NaN fails here, not in a reader
    heading = f"{title or label} — {mode} judge"
    n = int(details.get("metrics", {}).get("n", 0))
    if n and details.get("confusion"):
        written.append(
            plot_confusion_calibration(details, out / f"{stem}_confusion.png", title=heading)
        )
    if n and details.get("subsets"):
        written.append(
            plot_subsets(
                details["subsets"],
                out / f"{stem}_subsets.png",
                metrics=SUBSET_METRICS[mode],
                title=f"{heading}: quality per subset",
            )
        )
    return written


@_remembered
def plot_confusion_calibration(details: Mapping[str, Any], path: str | Path, *, title: str) -> Path:
    """Pointwise, two panels: the confusion matrix (true label × predicted score, plus format
    failures) with its counts, and calibration (mean true label per predicted score against the
    diagonal, with how often each score was given and how often it was exact)."""
    plt = _pyplot()
    confusion, table = details["confusion"], details["calibration"]
    counts = confusion["counts"]
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(11.0, 4.6), gridspec_kw={"width_ratios": [1.3, 1.0]}
    )
    image = left.imshow(counts, cmap="Blues", aspect="auto")
    top = max((c for row in counts for c in row), default=0)
    for i, row in enumerate(counts):
        for j, count in enumerate(row):
            colour = "white" if top and count > top / 2 else "black"
            left.text(j, i, str(count), ha="center", va="center", fontsize=10, color=colour)
    columns = [c.replace("_", "\n") for c in confusion["pred"]]
    left.set_xticks(range(len(columns)), labels=columns, fontsize=9)
    left.set_yticks(range(len(confusion["true"])), labels=[str(t) for t in confusion["true"]])
    left.axvline(len(columns) - 1.5, color="grey", linewidth=1)  # scores | failures
    left.set_xlabel("predicted score")
    left.set_ylabel("true label")
    left.set_title("confusion matrix (counts)", fontsize=10)
    fig.colorbar(image, ax=left, fraction=0.046, pad=0.03)

    given = [r for r in table if r["n"]]
    right.plot([0, 4], [0, 4], linestyle="--", color="grey", linewidth=1, label="calibrated")
    if given:
        largest = max(r["n"] for r in given)
        xs, ys = [r["pred"] for r in given], [r["mean_label"] for r in given]
        right.plot(xs, ys, color="tab:blue", linewidth=1.2)
        right.scatter(xs, ys, s=[40 + 260 * r["n"] / largest for r in given], zorder=3,
                      color="tab:blue", label="mean true label")  # fmt: skip
        for r in given:
            note = f"n={r['n']}\nexact {r['exact']:.0%}"
            right.annotate(note, (r["pred"], r["mean_label"]), textcoords="offset points",
                           xytext=(9, -4), fontsize=8, va="top")  # fmt: skip
    error = details.get("metrics", {}).get("calibration_error")
    right.set_title(
        "calibration" + (f" (error {error:.2f})" if error is not None else ""), fontsize=10
    )
    right.set_xlim(-0.5, 4.9)
    right.set_ylim(-0.5, 4.5)
    right.set_xticks(range(5))
    right.set_yticks(range(5))
    right.set_xlabel("predicted score")
    right.set_ylabel("mean true label")
    right.grid(alpha=0.3)
    right.legend(fontsize=8, loc="upper left", markerscale=0.4)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return _save(fig, plt, path)


@_remembered
def plot_subsets(
    subsets: Sequence[Mapping[str, Any]],
    path: str | Path,
    *,
    metrics: Sequence[str],
    title: str,
) -> Path:
    """Horizontal grouped bars: one group per subset (named with its size: rows, or pairs for
    pairwise), one bar per metric (0-1); a dashed line at 0.5 when position bias is shown (0.5
    is unbiased)."""
    plt = _pyplot()
    height = 0.8 / max(1, len(metrics))
    fig, ax = plt.subplots(figsize=(8.0, 1.6 + 0.32 * len(subsets) * len(metrics)))
    for k, metric in enumerate(metrics):
        values = [row.get(metric) for row in subsets]
        ys = [i + (k - (len(metrics) - 1) / 2) * height for i in range(len(subsets))]
        bars = ax.barh(ys, [v or 0.0 for v in values], height, label=metric.replace("_", " "))
        names = [f"{v:.2f}" if v is not None else "–" for v in values]  # – : not defined
        ax.bar_label(bars, labels=names, fontsize=7, padding=2)
    if "position_bias" in metrics:
        ax.axvline(0.5, color="grey", linestyle="--", linewidth=1, label="no position bias")
    ax.set_yticks(range(len(subsets)))
    ax.set_yticklabels([_subset_label(row) for row in subsets])
    ax.invert_yaxis()  # first subset on top, as in the table
    ax.set_xlim(0, 1.1)
    ax.set_xlabel("share (0–1)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=len(metrics) + 1)
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return _save(fig, plt, path)


def _subset_label(row: Mapping[str, Any]) -> str:
    name = row["subset"] or "(none)"
    return f"{name}  ({row['pairs']:g} pairs)" if "pairs" in row else f"{name}  (n={row['n']:g})"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, plt: Any, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(out)
    return out
