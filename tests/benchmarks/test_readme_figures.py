"""The README and the docs quote what the committed results say: every generated region
(benchmarks/readme.py) is re-rendered from its committed file and compared with the document.
Nothing is measured here.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    """benchmarks/readme.py, loaded by path (benchmarks/ is a folder of scripts)."""
    spec = importlib.util.spec_from_file_location("readme_figures", REPO / "benchmarks/readme.py")
    assert spec and spec.loader
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


readme = _load()


def test_every_region_of_every_document_is_what_its_committed_file_renders() -> None:
    paths = readme.documents()
    assert REPO / "README.md" in paths and len(paths) > 10
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert readme.rewrite(text, complete=False) == text, (
            f"{path.relative_to(REPO)}: its generated figures disagree with their committed "
            "files; run .venv/bin/python benchmarks/readme.py (`--check` shows the diff)"
        )
    assert readme.unmarked(paths) == [], "a registered region is in no document"


def test_a_region_may_be_shown_in_several_documents_but_must_be_in_one(tmp_path: Path) -> None:
    regions = _regions(tmp_path)
    one, two = tmp_path / "one.md", tmp_path / "two.md"
    one.write_text("<!-- figures:answer:begin -->1<!-- figures:answer:end -->\n")
    two.write_text("x <!-- figures:answer:begin -->1<!-- figures:answer:end --> y\n")
    assert readme.unmarked([one, two], regions) == ["demo-table"]
    for path in (one, two):
        assert "42" in readme.rewrite(path.read_text(), regions, tmp_path, complete=False)


def test_every_registered_source_is_committed_and_the_results_say_where_they_come_from() -> None:
    for name, region in readme.REGIONS.items():
        assert (REPO / region.source).is_file(), f"{name}: {region.source} is missing"
    results = json.loads((REPO / "benchmarks/results.json").read_text(encoding="utf-8"))
    assert isinstance(results["quick"], bool)
    assert {"cpu", "cores", "memory_gib", "os", "python"} <= set(results["machine"])
    assert len(results["git"]["commit"]) == 40
    assert results["rows"] and results["date"]


def _regions(tmp_path: Path) -> dict[str, object]:
    (tmp_path / "out.txt").write_text("a | b\n1 | 2\n")
    (tmp_path / "n.txt").write_text("42\n")
    return {
        "demo-table": readme.Region("out.txt", readme.fenced),
        "answer": readme.Region("n.txt", lambda p: p.read_text()),
    }


def test_block_and_inline_regions_are_rewritten_and_nothing_else(tmp_path: Path) -> None:
    text = (
        "# Title\n<!-- figures:demo-table:begin -->\nold\ntable\n<!-- figures:demo-table:end -->\n"
        "It took <!-- figures:answer:begin -->7<!-- figures:answer:end --> s.\n"
    )
    new = readme.rewrite(text, _regions(tmp_path), tmp_path)
    assert new == (
        "# Title\n<!-- figures:demo-table:begin -->\n```\na | b\n1 | 2\n```\n"
        "<!-- figures:demo-table:end -->\n"
        "It took <!-- figures:answer:begin -->42<!-- figures:answer:end --> s.\n"
    )
    assert readme.rewrite(new, _regions(tmp_path), tmp_path) == new


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("<!-- figures:answer:begin -->1<!-- figures:answer:end -->", "demo-table: no markers"),
        ("<!-- figures:demo-table:begin -->\n<!-- figures:demo-table:end -->\n"
         "<!-- figures:answer:begin -->1<!-- figures:answer:end -->"
         "<!-- figures:other:begin -->1<!-- figures:other:end -->", "other: not in REGIONS"),
        ("<!-- figures:demo-table:begin -->\n<!-- figures:demo-table:end -->\n"
         "<!-- figures:answer:begin -->1", "answer: 0 end markers"),
        ("<!-- figures:demo-table:begin -->\n<!-- figures:demo-table:end -->\n"
         "<!-- figures:answer:end -->1<!-- figures:answer:begin -->", "answer: end marker before"),
        ("<!-- figures:demo-table:begin -->1<!-- figures:demo-table:end -->\n"
         "<!-- figures:answer:begin -->1<!-- figures:answer:end -->", "inline, but renders"),
    ],
)  # fmt: skip
def test_markers_that_do_not_match_the_registry_are_refused(
    tmp_path: Path, text: str, problem: str
) -> None:
    with pytest.raises(readme.RegionError, match=problem):
        readme.rewrite(text, _regions(tmp_path), tmp_path)
