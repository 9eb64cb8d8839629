"""PNG figures for the MLflow run: training curves and the before → after comparison.

matplotlib with the Agg backend (no display needed); each function writes one file and returns
its path. Only the entry points that record a run call these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_comparison", "plot_curves"]

Series = Sequence[tuple[int, float]]


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
