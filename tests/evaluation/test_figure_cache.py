"""A figure is drawn once per content (judgeflow.evaluation.plots): a cached rerun logs the same
PNGs without drawing them again, and a change to the data draws anew."""

from __future__ import annotations

from pathlib import Path

import pytest

from judgeflow.evaluation import plots

ROWS = [{"metric": "exact_match", "before": 0.0, "after": 0.9, "change": 0.9}]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_same_figure_is_copied_not_drawn(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = plots.plot_comparison(ROWS, tmp_path / "a" / "before_after.png", title="t")
    assert len(list((home / "cache" / "figures").glob("*.png"))) == 1

    def no_drawing() -> None:
        raise AssertionError("drawn again although the same figure is cached")

    monkeypatch.setattr(plots, "_pyplot", no_drawing)
    again = plots.plot_comparison(ROWS, tmp_path / "b" / "before_after.png", title="t")
    assert again.read_bytes() == first.read_bytes()
    with pytest.raises(AssertionError, match="drawn again"):  # other data: drawn
        plots.plot_comparison(ROWS, tmp_path / "c.png", title="another title")


def test_the_cache_keeps_the_newest_figures(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plots, "CACHED_FIGURES", 2)
    for n in range(3):
        plots.plot_comparison(ROWS, tmp_path / f"{n}.png", title=f"run {n}")
    assert len(list((home / "cache" / "figures").glob("*.png"))) == 2
    assert all((tmp_path / f"{n}.png").stat().st_size > 0 for n in range(3))
