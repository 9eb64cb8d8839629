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
the repository root) and the function that renders the region's text from it. To add a region:
write `def render_x(source: Path) -> str`, add `"x": Region("path/to/file", render_x)` to
REGIONS, put the two markers in a document and run this script. A region may appear in several
documents (the README's quickstart and the demo page show the same table); each is rendered from
the one source. `fenced` renders a committed text file (a command's output) as a code block.
tests/benchmarks/test_readme_figures.py fails when a region differs from what its file renders,
when a registered region is in no document, or when a marked region is not registered. Nothing
is measured here:
`benchmarks/run.py` writes benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stamp import describe

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


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


# --------------------------------------------------------------------------- renderers


def fenced(source: Path) -> str:
    """A committed text file (a command's output), as a Markdown code block."""
    return "```\n" + source.read_text(encoding="utf-8").strip("\n") + "\n```"


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _measured_on(results: Mapping[str, Any]) -> str:
    """One sentence: when, at which commit, on what, and how busy the machine was."""
    m = results["machine"]
    minutes = sum(results["seconds"].values()) / 60
    load = m["load_average_at_start"][0]
    return (
        f"{describe(results)}, {minutes:.0f} min in all, on {m['cpu']} "
        f"({m['cores_usable']} of {m['cores']} cores usable), {m['memory_gib']} GiB, {m['os']}, "
        f"Python {m['python']}; load average {load:.1f} at the start."
    )


def benchmarks_table(source: Path) -> str:
    """What the results file was measured on, then its rows as one Markdown table."""
    results = json.loads(source.read_text(encoding="utf-8"))
    if results["quick"]:
        intro = (
            "**Provisional figures from a `--quick` run** (tiny sizes; ray-startup as two local "
            "ranks without Slurm; the demo without SFT or evaluation, one GRPO step): they check "
            "the code and are not to be quoted; a full run (`benchmarks/run.py --update-readme`) "
            "replaces them. `benchmarks/results.json`: "
        )
    else:
        intro = "Figures from one full run of `benchmarks/run.py` (`benchmarks/results.json`): "
    lines = [
        textwrap.fill(intro + _measured_on(results), width=100, break_on_hyphens=False),
        "",
        "| benchmark | case | metric | judgeflow | baseline | vs baseline | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        "| " + " | ".join(_cell(row[k]) for k in ("benchmark", "case", "metric", "ours",
                                                  "baseline", "vs", "note")) + " |"
        for row in results["rows"]
    ]  # fmt: skip
    if results["failed"]:
        lines += ["", "Failed: " + ", ".join(sorted(results["failed"])) + "."]
    return "\n".join(lines)


def _json(source: Path) -> Any:
    return json.loads(source.read_text(encoding="utf-8"))


#: The tiny demo's validation subset of non-answers phrased as in no training row, as the
#: evaluation's metric keys spell it (`subset_key`).
UNSEEN_KEY = "tinyjudge_unseen-non-answer"


def _raised(changes: list[float], joint: str = " and") -> str:
    """'X of N runs and lowered it in Y': how many per-run changes went up, and down."""
    up, down = sum(d > 0 for d in changes), sum(d < 0 for d in changes)
    return f"{up} of {len(changes)} runs{joint} lowered it in {down}"


def demo_seeds_table(source: Path) -> str:
    """benchmarks/demo.py seeds: per mode and seed, the SFT model and the GRPO judge."""
    results = _json(source)
    bar = results["bar"]
    primary = {"pointwise": "exact_match", "pairwise": "consistent_accuracy"}
    lines = [
        "| mode | data.seed | reward_mean SFT → GRPO | gain | format failures after | "
        "primary metric SFT → GRPO | unseen non-answers SFT → GRPO | meets the bar |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in results["runs"]:
        sft, after, metric = run["sft"], run["after"], primary[run["mode"]]
        lines.append(
            f"| {run['mode']} | {run['seed']} "
            f"| {sft['overall']['reward_mean']:.3f} → {after['overall']['reward_mean']:.3f} "
            f"| {run['reward_gain']:+.3f} | {after['overall']['format_failure_rate']:.3f} "
            f"| {metric} {sft['overall'][metric]:.3f} → {after['overall'][metric]:.3f} "
            f"| {sft['subsets'][UNSEEN_KEY][metric]:.3f} → {after['subsets'][UNSEEN_KEY][metric]:.3f} "
            f"| {'yes' if run['meets_bar'] else '**no**'} |"
        )
    met = sum(run["meets_bar"] for run in results["runs"])
    moved = [
        run["after"]["subsets"][UNSEEN_KEY][primary[run["mode"]]]
        - run["sft"]["subsets"][UNSEEN_KEY][primary[run["mode"]]]
        for run in results["runs"]
    ]
    lines += [
        "",
        f"On the unseen non-answers GRPO raised the primary metric in {_raised(moved)}.",
        "",
        f"{met} of {len(results['runs'])} runs meet the bar (reward_mean at least "
        f"{bar['min_reward_gain']} above the SFT model, format failures at most "
        f"{bar['max_format_failure_rate']}). `benchmarks/results/demo-seeds.json`: "
        f"{describe(results)}, "
        f"{results['seconds'] / 60:.0f} min on {results['machine']['cpu']} "
        f"({results['machine']['cores']} cores).",
    ]
    return "\n".join(lines)


def grrm_seeds_table(source: Path) -> str:
    """benchmarks/demo.py seeds --modes grrm: per seed, the SFT model and the RLVR model."""
    results = _json(source)
    lines = [
        "| data.seed | ranking_accuracy SFT → RLVR | format failures SFT → RLVR "
        "| reward_mean (0–2) SFT → RLVR |",
        "|---|---|---|---|",
    ]
    moved = []
    for run in results["runs"]:
        sft, after = run["sft"]["overall"], run["after"]["overall"]
        moved.append(after["ranking_accuracy"] - sft["ranking_accuracy"])
        lines.append(
            f"| {run['seed']} | {sft['ranking_accuracy']:.3f} → {after['ranking_accuracy']:.3f} "
            f"| {sft['format_failure_rate']:.3f} → {after['format_failure_rate']:.3f} "
            f"| {sft['reward_mean']:.3f} → {after['reward_mean']:.3f} |"
        )
    groups = int(results["runs"][0]["after"]["overall"]["n"])
    overrides = ", ".join(f"`{o}`" for o in results["overrides"]) or "the profile as shipped"
    lines += [
        "",
        f"With {overrides}: RLVR raised the ranking accuracy in {_raised(moved, ',')}; one test "
        f"group of {groups} is {1 / groups:.4f}. `benchmarks/results/{source.name}`: "
        f"{describe(results)}.",
    ]
    return "\n".join(lines)


def demo_rules_table(source: Path) -> str:
    """benchmarks/demo.py rules: each one-line rule's primary metric, overall and per subset."""
    results = _json(source)["rules"]
    lines = [
        "| rule | pointwise exact_match | … on unseen non-answers | "
        "pairwise consistent_accuracy | … on unseen non-answers |",
        "|---|---|---|---|---|",
    ]
    for rule, modes in results.items():
        pw, pr = modes["pointwise"], modes["pairwise"]
        unseen = "tinyjudge/unseen-non-answer"
        lines.append(
            f"| {_cell(rule)} | {pw['overall']['exact_match']:.3f} "
            f"| {pw['subsets'][unseen]['exact_match']:.3f} "
            f"| {pr['overall']['consistent_accuracy']:.3f} "
            f"| {pr['subsets'][unseen]['consistent_accuracy']:.3f} |"
        )
    return "\n".join(lines)


def rlvr_seeds_table(source: Path) -> str:
    """benchmarks/demo.py seeds --modes rlvr: per seed, the SFT policy and the GRPO policy on the
    held-out prompts, overall and per verifier."""
    results = _json(source)
    bar = results["bar"]
    metric = "verifiable_correct_rate"
    verifiers = sorted(results["runs"][0]["after"]["subsets"])
    lines = [
        f"| data.seed | {metric} SFT → GRPO | gain | "
        + " | ".join(f"{v} SFT → GRPO" for v in verifiers)
        + " | format failures SFT → GRPO | meets the bar |",
        "|---|---|---|" + "---|" * len(verifiers) + "---|---|",
    ]
    for run in results["runs"]:
        sft, after = run["sft"], run["after"]
        per = " | ".join(
            f"{sft['subsets'][v][metric]:.3f} → {after['subsets'][v][metric]:.3f}"
            for v in verifiers
        )
        lines.append(
            f"| {run['seed']} | {sft['overall'][metric]:.3f} → {after['overall'][metric]:.3f} "
            f"| {run['verifiable_correct_gain']:+.3f} | {per} "
            f"| {sft['overall']['format_failure_rate']:.3f} → "
            f"{after['overall']['format_failure_rate']:.3f} "
            f"| {'yes' if run['meets_bar'] else '**no**'} |"
        )
    met = sum(run["meets_bar"] for run in results["runs"])
    seconds = [run["seconds"] for run in results["runs"]]
    per_verifier = "; ".join(
        f"{v} ({int(results['runs'][0]['after']['subsets'][v]['n'])} held-out prompts, one is "
        f"{1 / results['runs'][0]['after']['subsets'][v]['n']:.3f}): raised it in "
        + _raised(
            [r["after"]["subsets"][v][metric] - r["sft"]["subsets"][v][metric]
             for r in results["runs"]]
        )
        for v in verifiers
    )  # fmt: skip
    lines += [
        "",
        f"Per verifier, GRPO's change on the held-out prompts: {per_verifier}.",
        "",
        f"{met} of {len(results['runs'])} runs meet the bar ({metric} at least "
        f"{bar['min_reward_gain']} above the SFT policy's, format failures at most "
        f"{bar['max_format_failure_rate']}); each run took {_minutes(min(seconds))} to "
        f"{_minutes(max(seconds))}. `benchmarks/results/{source.name}`: {describe(results)}, "
        f"on {results['machine']['cpu']} ({results['machine']['cores']} cores).",
    ]
    return "\n".join(lines)


def judged_seeds_table(source: Path) -> str:
    """benchmarks/demo.py judged: per seed, what the judge paid the SFT policy and the GRPO
    policy on the held-out prompts, and reference_f1, the measure the judge never sees."""
    results = _json(source)
    bar = results["bar"]
    lines = [
        "| data.seed | paid by | judge-paid reward_mean SFT → GRPO | gain | reference_f1 SFT → "
        "GRPO | judge format failures | hacking guard | meets the bar |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in [*results["runs"], results["hackable"]]:
        sft, after = run["sft"]["overall"], run["after"]["overall"]
        label = str(run["seed"]) if run is not results["hackable"] else (
            f"{run['seed']}, hackable settings¹"
        )  # fmt: skip
        lines.append(
            f"| {label} | `{run['paid_by']}` | {sft['reward_mean']:.3f} → "
            f"{after['reward_mean']:.3f} | {run['reward_gain']:+.3f} | "
            f"{sft['reference_f1']:.3f} → {after['reference_f1']:.3f} | "
            f"{after['judge_format_failure_rate']:.3f} | "
            f"{'**fired**' if run['hacking_guard'] else 'silent'} | "
            f"{'yes' if run['meets_bar'] else '**no**'} |"
        )
    met = sum(run["meets_bar"] for run in results["runs"])
    seconds = [run["seconds"] for run in results["runs"]]
    hackable = " ".join(f"`--set {o}`" for o in results["hackable"]["overrides"][1:])
    lines += [
        "",
        f"{met} of {len(results['runs'])} runs meet the bar (judge-paid reward_mean at least "
        f"{bar['min_reward_gain']} above the SFT policy's, reference_f1 {bar['reference_f1']}); "
        f"each took {_minutes(min(seconds))} to {_minutes(max(seconds))}, after "
        f"{_minutes(results['judge_seconds'])} training the judge. ¹ {hackable}: the judges' own "
        "tiny GRPO settings. `benchmarks/results/"
        f"{source.name}`: {describe(results)}, on {results['machine']['cpu']} "
        f"({results['machine']['cores']} cores).",
    ]
    return "\n".join(lines)


def judged_examples(source: Path) -> str:
    """benchmarks/demo.py judged: the first held-out questions, answered by the SFT policy and
    by the GRPO policy of the first seed and of the hackable settings."""
    results = _json(source)
    first, hacked = results["runs"][0], results["hackable"]
    lines = [
        "| question (reference) | SFT policy | GRPO policy (seed "
        f"{first['seed']}) | GRPO, hackable settings |",
        "|---|---|---|---|",
    ]
    for sft, after, bad in zip(
        first["examples"]["sft"], first["examples"]["after"], hacked["examples"]["after"],
        strict=True,
    ):  # fmt: skip

        def cell(a: Mapping[str, Any]) -> str:
            return f"{_cell(a['answer'])} (judge {a['judge_paid']:.2f}, F1 {a['reference_f1']:.2f})"

        lines.append(
            f"| {_cell(sft['question'])} ({_cell(sft['reference'])}) | {cell(sft)} | "
            f"{cell(after)} | {cell(bad)} |"
        )
    return "\n".join(lines)


def judge_throughput_table(source: Path) -> str:
    """benchmarks/run.py --only judge-reward: rollouts a judge scores per second, batched per
    step against one call per rollout."""
    results = _json(source)
    lines = [
        "| judge | rollouts | one by one | batched per step | speed-up |",
        "|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        lines.append(
            f"| {row['judge']} | {row['rollouts']} | {row['one_by_one_per_s']:.1f}/s | "
            f"{row['batched_per_s']:.1f}/s (batch {row['batch_size']}) | "
            f"×{row['batched_per_s'] / row['one_by_one_per_s']:.1f} |"
        )
    lines += [
        "",
        f"`benchmarks/results/{source.name}`: {describe(results)}, on "
        f"{results['machine']['cpu']} ({results['machine']['cores']} cores).",
    ]
    return "\n".join(lines)


def rlvr_rules_table(source: Path) -> str:
    """benchmarks/demo.py rlvr-rules: what one-line rules score on the held-out prompts."""
    results = _json(source)["rules"]
    metric = "verifiable_correct_rate"
    verifiers = sorted(next(iter(results.values()))["subsets"])
    lines = [
        f"| rule | {metric} | " + " | ".join(verifiers) + " |",
        "|---|---|" + "---|" * len(verifiers),
    ]
    for rule, scored in results.items():
        per = " | ".join(f"{scored['subsets'][v][metric]:.3f}" for v in verifiers)
        lines.append(f"| {_cell(rule)} | {scored['overall'][metric]:.3f} | {per} |")
    return "\n".join(lines)


def zero_variance_table(source: Path) -> str:
    """benchmarks/zero_variance.py: the tiny demos with and without zero-variance filtering."""
    results = _json(source)
    if not results.get("complete"):
        raise ValueError(f"{source}: the benchmark did not finish; run it again")
    lines = [
        "| mode | data.seed | filtering | s per GRPO step | real_batch_size_ratio (mean of steps) "
        "| primary metric SFT → GRPO | format failures after |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in results["runs"]:
        lines.append(
            f"| {run['mode']} | {run['seed']} | {'on' if run['filter_zero_std_samples'] else 'off'} "
            f"| {run['seconds_per_step']:.2f} | {run['mean_real_batch_size_ratio']:.2f} "
            f"| {run['metric']} {run['sft']:.3f} → {run['after']:.3f} "
            f"| {run['after_format_failure_rate']:.3f} |"
        )
    summary = []
    for mode in dict.fromkeys(run["mode"] for run in results["runs"]):
        runs = [r for r in results["runs"] if r["mode"] == mode]
        per = {on: [r for r in runs if r["filter_zero_std_samples"] == on] for on in (False, True)}
        step = {on: sum(r["seconds_per_step"] for r in rs) / len(rs) for on, rs in per.items()}
        match = {on: sum(r["after"] for r in rs) / len(rs) for on, rs in per.items()}
        summary.append(
            f"{mode}: {step[False]:.2f} → {step[True]:.2f} s per step on average "
            f"({(step[True] / step[False] - 1) * 100:+.0f}%), {runs[0]['metric']} after GRPO "
            f"{match[False]:.3f} → {match[True]:.3f} on average over {len(per[True])} seeds"
        )
    lines += [
        "",
        "Without → with filtering: " + "; ".join(summary) + ".",
        "",
        f"`{source.relative_to(REPO)}`: {describe(results)}.",
    ]
    return "\n".join(lines)


def _tables_meta(field: str, fmt: str) -> Callable[[Path], str]:
    def render(source: Path) -> str:
        return fmt.format(_json(source)[field])

    return render


def stamped(source: Path) -> str:
    """Where a results file's figures come from, in one sentence (`stamp.describe`)."""
    return f"`{source.relative_to(REPO)}`: {describe(_json(source))}."


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def demo_machine(source: Path) -> str:
    """The CPU the demo's tables were made on, and its cores: 'AMD EPYC, 2 cores'."""
    machine = _json(source)["machine"]
    return f"{machine['cpu']}, {machine['cores']} cores"


def gpu_check_run(source: Path) -> str:
    """When and on what the GPU check ran: '2026-11-26, one NVIDIA H100 80GB HBM3'."""
    results = _json(source)
    gpus = results["machine"]["gpus"]
    return f"{results['date'][:10]}, {'one' if gpus == 1 else gpus} {results['machine']['gpu']}"


def gpu_check_torch(source: Path) -> str:
    """The torch build the GPU check ran with: 'torch 2.11.0+cu130'."""
    return f"torch {_json(source)['packages']['torch']}"


def _pipeline_raw(source: Path) -> Mapping[str, Any]:
    raw = _json(source)["raw"]
    return {"first": raw["demo-stages"], "second": raw["cached-retrain"]["second"]}


def cached_rerun(source: Path) -> str:
    """The cached second run's wall time and where it goes, in one sentence."""
    second = _pipeline_raw(source)["second"]["phases"]
    return (
        f"{second['wall_s']:.1f} s from the command to the prompt (the Prefect server's start-up, "
        f"{second['server_start_s']:.1f} s, while the command imports; then "
        f"{second['flow_s']:.1f} s of flow and {second['exit_s']:.1f} s to exit)"
    )


def fresh_demo(source: Path) -> str:
    """`make demo` in a fresh clone, phase by phase: a bullet list."""
    demo = _pipeline_raw(source)["first"]
    first, loops = demo["first"], demo["first"].get("training_loop_s", {})
    stages = {row["stage"]: row["duration_s"] for row in first["stages"]}
    lines = []
    if clone := demo.get("fresh_clone"):
        lines.append(f"- set-up (`./scripts/bootstrap`: a new `.venv`, the tiny model): "
                     f"{clone['bootstrap_s']:.1f} s")  # fmt: skip
    phase = first["phases"]
    lines.append(
        f"- `judgeflow run grpo-pointwise --profile tiny`: {phase['wall_s']:.1f} s; the Prefect "
        f"server (a new database) answers after {phase['server_start_s']:.1f} s, started as the "
        f"command starts, and the flow begins at {phase['until_flow_s']:.1f} s"
    )
    for stage, loop in loops.items():
        if stage in stages:
            lines.append(
                f"- stage `{stage}`: {stages[stage]:.1f} s, of which the training loop "
                f"{loop:.1f} s and start-up and hand-back (job, imports, model and data "
                f"loading, saving) {stages[stage] - loop:.1f} s"
            )
    rest = sum(v for k, v in stages.items() if k not in loops)
    lines.append(f"- every other stage together (prepare, evaluations, registry): {rest:.1f} s")
    return "\n".join(lines)


REGIONS: dict[str, Region] = {
    "cached-rerun": Region("benchmarks/results.json", cached_rerun),
    "fresh-demo": Region("benchmarks/results.json", fresh_demo),
    "benchmarks": Region("benchmarks/results.json", benchmarks_table),
    "quickstart-pointwise": Region("benchmarks/results/demo-pointwise.txt", fenced),
    "quickstart-pairwise": Region("benchmarks/results/demo-pairwise.txt", fenced),
    "gpu-check": Region("benchmarks/results/gpu-check.txt", fenced),
    "demo-seeds": Region("benchmarks/results/demo-seeds.json", demo_seeds_table),
    "demo-rules": Region("benchmarks/results/demo-rules.json", demo_rules_table),
    "grrm-seeds": Region("benchmarks/results/demo-seeds-grrm.json", grrm_seeds_table),
    "zero-variance": Region("benchmarks/results/zero-variance.json", zero_variance_table),
    "rlvr-seeds": Region("benchmarks/results/demo-seeds-rlvr.json", rlvr_seeds_table),
    "rlvr-rules": Region("benchmarks/results/demo-rules-rlvr.json", rlvr_rules_table),
    "judged-seeds": Region("benchmarks/results/demo-seeds-judged.json", judged_seeds_table),
    "judged-examples": Region("benchmarks/results/demo-seeds-judged.json", judged_examples),
    "judge-throughput": Region("benchmarks/results/judge-reward.json", judge_throughput_table),
    "tiny-model-parameters": Region(
        "benchmarks/results/demo-tables.json", _tables_meta("tiny_model_parameters", "{:,}")
    ),
    "demo-tables-stamp": Region("benchmarks/results/demo-tables.json", stamped),
    "demo-rules-stamp": Region("benchmarks/results/demo-rules.json", stamped),
    "gpu-check-stamp": Region("benchmarks/results/gpu-check.json", stamped),
    "demo-minutes": Region(  # the first run in a fresh clone, set-up apart (demo-stages)
        "benchmarks/results.json",
        lambda source: _minutes(_pipeline_raw(source)["first"]["first"]["phases"]["wall_s"]),
    ),
    "pairwise-minutes": Region(
        "benchmarks/results/demo-tables.json",
        lambda source: _minutes(_json(source)["seconds"]["pairwise"]),
    ),
    "demo-machine": Region("benchmarks/results/demo-tables.json", demo_machine),
    "gpu-check-run": Region("benchmarks/results/gpu-check.json", gpu_check_run),
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
