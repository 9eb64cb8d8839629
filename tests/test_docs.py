"""The documentation a user navigates: the docs site builds in strict mode (a broken link, a
missing page or a stale snippet fails), every link in every document of the repository leads to
a file (and heading) that exists, nothing points outside the repository, and the README stays a
front page."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

REPO = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
_CODE = re.compile(r"`[^`\n]*`")
#: Documents beside the checkout that the project was planned from; a user's clone has none.
_OUTSIDE = re.compile(r"\.\./shared\b|\bshared/(?:seeds|" + r"DESIGN|ENVIRONMENT|STYLE)|"
                      r"\b(?:DESIGN|ENVIRONMENT|STYLE)" + r"\.md\b")  # fmt: skip


def _tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", *patterns], cwd=REPO, capture_output=True,
                         check=True).stdout.decode()  # fmt: skip
    return [REPO / p for p in out.split("\0") if p and (REPO / p).is_file()]


def _documents() -> list[Path]:
    """Every Markdown file of the repository: the README, the docs, the folders' READMEs."""
    return sorted(set(_tracked("*.md")) | set((REPO / "docs").rglob("*.md")))


_SNIPPET = re.compile(r'^--8<-- "([^":]+)(?::(\d+))?:?(\d*)"$', re.MULTILINE)


def _text(path: Path) -> str:
    """A page as mkdocs renders it: `--8<--` snippet lines replaced by the lines they include."""

    def include(m: re.Match[str]) -> str:
        lines = (REPO / m.group(1)).read_text(encoding="utf-8").splitlines(keepends=True)
        start = int(m.group(2) or 1) - 1
        return "".join(lines[start : int(m.group(3)) if m.group(3) else None])

    return _SNIPPET.sub(include, path.read_text(encoding="utf-8"))


def _headings(path: Path) -> set[str]:
    text = _FENCE.sub("", _text(path))
    ids = set()
    for m in re.finditer(r"^#+ (.+?)\s*(?:\{\s*#([\w-]+)[^}]*\})?$", text, re.M):
        ids.add(m.group(2) or slugify(m.group(1).strip(), "-"))  # attr_list's { #id } wins
    return ids


def _links(path: Path) -> list[str]:
    text = _CODE.sub("", _FENCE.sub("", path.read_text(encoding="utf-8")))
    return [m.group(1) for m in _LINK.finditer(text)]


@pytest.mark.slow(seconds=25)  # a whole mkdocs build
def test_the_docs_site_builds_in_strict_mode(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    built = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
                           cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()
    assert (tmp_path / "site" / "index.html").is_file()


def test_every_page_under_docs_is_in_the_sites_navigation() -> None:
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *_: None)
    config = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=_Loader)

    def pages(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for v in node.values() for p in pages(v)]
        if isinstance(node, list):
            return [p for v in node for p in pages(v)]
        return []

    in_nav = set(pages(config["nav"]))
    on_disk = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert on_disk - in_nav == set(), "pages no one can reach from the navigation"
    assert in_nav - on_disk == set(), "navigation entries without a page"


@pytest.mark.parametrize("path", _documents(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_link_leads_to_a_file_and_heading_that_exist(path: Path) -> None:
    broken = []
    for link in _links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", link):  # https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        if not file.exists() or REPO not in (file, *file.parents):
            broken.append(f"{link}: no such file in the repository")
        elif anchor and file.suffix == ".md" and anchor not in _headings(file):
            broken.append(f"{link}: no heading #{anchor} in {file.relative_to(REPO)}")
    assert broken == [], f"{path.relative_to(REPO)}: {broken}"


def test_no_file_of_the_repository_points_outside_it() -> None:
    found = []
    for path in _tracked():
        if path.suffix in {".png", ".parquet", ".safetensors", ".gz"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if _OUTSIDE.search(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:100]}")
    assert found == [], "documents a clone does not have:\n" + "\n".join(found)


def test_the_readme_is_a_front_page() -> None:
    """Short, and it says what judgeflow is before anything else."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 250
    first_screen = " ".join(readme.splitlines()[:12])
    assert "generative judges" in first_screen and "MLflow model" in first_screen
    assert (REPO / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_the_pictures_come_from_runs_of_the_demo_as_it_is() -> None:
    """Every picture is listed with the run it came from, shown on some page, and made from the
    recipes, profile and data of today: change those and the pictures must be made again."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location(
        "docs_pictures", REPO / "scripts/docs_pictures.py"
    )
    assert spec and spec.loader
    pictures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pictures)
    manifest = json.loads((REPO / "docs/assets/pictures.json").read_text())
    on_disk = {p.name for p in (REPO / "docs/assets").glob("*.png")}
    assert set(manifest["pictures"]) == on_disk
    assert {"prefect_flow_run.png", "mlflow_registry.png", "pointwise_training_curves.png",
            "pointwise_before_after.png", "pairwise_swap_outcomes.png"} <= on_disk  # fmt: skip
    pages = " ".join(p.read_text() for p in _documents())
    assert [n for n in sorted(on_disk) if f"assets/{n}" not in pages] == [], (
        "pictures no page shows"
    )
    for name, about in manifest["pictures"].items():
        assert len(about["run_id"]) == 32 and about["commit"] and about["date"], name
    assert manifest["inputs_sha256"] == pictures.input_hashes(), (
        "the demo's recipes, tiny profile or sample data changed since the pictures were made: "
        "make them again (scripts/docs_pictures.py says how)"
    )
