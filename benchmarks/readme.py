"""The documents' figures, rendered from committed output files: none is typed by hand.

    .venv/bin/python benchmarks/readme.py            # rewrite every region from its file
    .venv/bin/python benchmarks/readme.py --check    # exit 1 with a diff if a document disagrees

The documents are README.md and every page under docs/ (`DOCUMENTS`). A region is a document's
text between two marker comments, on lines of their own (a block) or inside one line (inline,
for a figure in a sentence):

    <!-- figures:NAME:begin -->
    (generated: edit the source file or the renderer, not this)
    <!-- figures:NAME:end -->

NAME is a key of REGIONS, which gives the region's source (a committed file, by its path from
the repository root) and the function that renders the region's text from it. The renderers
live beside this script by the results they read: figures_pipeline (benchmarks/results.json),
figures_judge_demos, figures_policy_demos, and figures_inline for the one-line regions. To add a
region: write `def render_x(source: Path) -> str` in one of them, add
`"x": Region("path/to/file", render_x)` to REGIONS, put the two markers in a document and run
this script. A region may appear in several documents (the README's quickstart and the demo page
show the same table); each is rendered from the one source. `fenced` renders a committed text file (a command's output) as a code block.
tests/benchmarks/test_readme_figures.py fails when a region differs from what its file renders,
when a registered region is in no document, or when a marked region is not registered. Nothing
is measured here:
`benchmarks/run.py` writes benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from figures_format import REPO
from figures_inline import (
    demo_machine,
    gpu_check_run,
    gpu_check_torch,
    pairwise_minutes,
    stamped,
    tables_meta,
)
from figures_judge_demos import (
    demo_rules_table,
    demo_seeds_table,
    grrm_seeds_table,
    lora_table,
    zero_variance_table,
)
from figures_pipeline import benchmarks_table, cached_rerun, demo_minutes, fresh_demo
from figures_policy_demos import (
    gpu_policy_examples,
    judge_throughput_table,
    judged_examples,
    judged_seed_examples,
    judged_seeds_table,
    rlvr_rules_table,
    rlvr_seeds_table,
)


def documents(root: Path = REPO) -> list[Path]:
    """README.md and the docs site's pages: every file that may hold a region."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


_MARKER = re.compile(r"<!-- figures:([a-z0-9][a-z0-9-]*):(begin|end) -->")
_REGION = re.compile(
    r"(<!-- figures:([a-z0-9][a-z0-9-]*):begin -->)(.*?)(<!-- figures:\2:end -->)", re.DOTALL
)


@dataclass(frozen=True)
class Region:
    """A generated part of the README: `render(REPO / source)` is its text."""

    source: str
    render: Callable[[Path], str]


class RegionError(ValueError):
    """The README's markers do not match REGIONS (missing, unknown, unpaired, repeated)."""


def fenced(source: Path) -> str:
    """A committed text file (a command's output), as a Markdown code block."""
    return "```\n" + source.read_text(encoding="utf-8").strip("\n") + "\n```"


REGIONS: dict[str, Region] = {
    "cached-rerun": Region("benchmarks/results.json", cached_rerun),
    "fresh-demo": Region("benchmarks/results.json", fresh_demo),
    "benchmarks": Region("benchmarks/results.json", benchmarks_table),
    "quickstart-pointwise": Region("benchmarks/results/demo-pointwise.txt", fenced),
    "quickstart-pairwise": Region("benchmarks/results/demo-pairwise.txt", fenced),
    "gpu-check": Region("benchmarks/results/gpu-check.txt", fenced),
    "gpu-policy": Region("benchmarks/results/gpu-policy.txt", fenced),
    "gpu-policy-examples": Region("benchmarks/results/gpu-policy.json", gpu_policy_examples),
    "gpu-policy-stamp": Region("benchmarks/results/gpu-policy.json", stamped),
    "demo-seeds": Region("benchmarks/results/demo-seeds.json", demo_seeds_table),
    "demo-rules": Region("benchmarks/results/demo-rules.json", demo_rules_table),
    "grrm-seeds": Region("benchmarks/results/demo-seeds-grrm.json", grrm_seeds_table),
    "zero-variance": Region("benchmarks/results/zero-variance.json", zero_variance_table),
    "lora": Region("benchmarks/results/lora.json", lora_table),
    "rlvr-seeds": Region("benchmarks/results/demo-seeds-rlvr.json", rlvr_seeds_table),
    "rlvr-rules": Region("benchmarks/results/demo-rules-rlvr.json", rlvr_rules_table),
    "judged-seeds": Region("benchmarks/results/demo-seeds-judged.json", judged_seeds_table),
    "judged-examples": Region("benchmarks/results/demo-seeds-judged.json", judged_examples),
    "judged-animals-seeds": Region(
        "benchmarks/results/demo-seeds-judged-animals.json", judged_seeds_table
    ),
    "judged-animals-examples": Region(
        "benchmarks/results/demo-seeds-judged-animals.json", judged_seed_examples
    ),
    "judged-panel-seeds": Region(
        "benchmarks/results/demo-seeds-judged-panel.json", judged_seeds_table
    ),
    "judge-throughput": Region("benchmarks/results/judge-reward.json", judge_throughput_table),
    "tiny-model-parameters": Region(
        "benchmarks/results/demo-tables.json", tables_meta("tiny_model_parameters", "{:,}")
    ),
    "demo-tables-stamp": Region("benchmarks/results/demo-tables.json", stamped),
    "demo-rules-stamp": Region("benchmarks/results/demo-rules.json", stamped),
    "gpu-check-stamp": Region("benchmarks/results/gpu-check.json", stamped),
    "demo-minutes": Region("benchmarks/results.json", demo_minutes),
    "pairwise-minutes": Region("benchmarks/results/demo-tables.json", pairwise_minutes),
    "demo-machine": Region("benchmarks/results/demo-tables.json", demo_machine),
    "gpu-check-run": Region("benchmarks/results/gpu-check.json", gpu_check_run),
    "gpu-policy-run": Region("benchmarks/results/gpu-policy.json", gpu_check_run),
    "gpu-check-torch": Region("benchmarks/results/gpu-check.json", gpu_check_torch),
}


# --------------------------------------------------------------------------- the README


def marked(text: str) -> set[str]:
    """The regions a document marks."""
    return {name for name, _ in _MARKER.findall(text)}


def _check_markers(text: str, regions: Mapping[str, Region], complete: bool) -> None:
    marks = Counter((name, side) for name, side in _MARKER.findall(text))
    named = {name for name, _ in marks}
    problems = [f"{name}: {marks[name, side]} {side} markers" for name in sorted(named)
                for side in ("begin", "end") if marks[name, side] != 1]  # fmt: skip
    problems += [f"{name}: not in REGIONS" for name in sorted(named - set(regions))]
    if complete:
        problems += [f"{name}: no markers in the README" for name in sorted(set(regions) - named)]
    paired = {m.group(2) for m in _REGION.finditer(text)}
    problems += [f"{name}: end marker before begin" for name in sorted(named - paired)
                 if marks[name, "begin"] == marks[name, "end"] == 1]  # fmt: skip
    if problems:
        raise RegionError("README regions: " + "; ".join(problems))


def rewrite(
    text: str, regions: Mapping[str, Region] = REGIONS, root: Path = REPO, *, complete: bool = True
) -> str:
    """`text` with every region's body replaced by what its renderer makes of its source;
    `complete`: every registered region must be in `text` (False for one of several documents)."""
    _check_markers(text, regions, complete)

    def body(match: re.Match[str]) -> str:
        begin, name, old, end = match.groups()
        new = regions[name].render(root / regions[name].source).strip("\n")
        if old.startswith("\n"):  # a block: the markers on lines of their own
            return f"{begin}\n{new}\n{end}"
        if "\n" in new:
            raise RegionError(f"README regions: {name}: inline, but renders several lines")
        return f"{begin}{new}{end}"

    return _REGION.sub(body, text)


def unmarked(paths: Sequence[Path], regions: Mapping[str, Region] = REGIONS) -> list[str]:
    """The registered regions no document marks."""
    seen = set().union(*(marked(p.read_text(encoding="utf-8")) for p in paths))
    return sorted(set(regions) - seen)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 and show the diff if a document is stale")  # fmt: skip
    args = parser.parse_args(argv)
    paths = documents()
    if missing := unmarked(paths):
        raise RegionError(f"regions in no document: {', '.join(missing)}")
    stale = 0
    for path in paths:
        old = path.read_text(encoding="utf-8")
        new = rewrite(old, complete=False)
        if new == old:
            continue
        stale += 1
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(keepends=True), new.splitlines(keepends=True),
                f"{path.name} (committed)", f"{path.name} (rendered)"))  # fmt: skip
            print(f"\n{path}: stale; run .venv/bin/python benchmarks/readme.py")
        else:
            path.write_text(new, encoding="utf-8")
            print(f"{path}: regions rewritten")
    if not stale:
        print(f"every region up to date in {len(paths)} documents ({', '.join(REGIONS)})")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
