"""The regions rendered from benchmarks/results.json (`benchmarks/run.py`): the benchmarks table,
and the fresh-clone and cached runs of the demo pipeline."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from figures_format import cell, minutes, read_json
from stamp import describe


def measured_on(results: Mapping[str, Any]) -> str:
    """One sentence: when, at which commit, on what, and how busy the machine was."""
    m = results["machine"]
    minutes_in_all = sum(results["seconds"].values()) / 60
    load = m["load_average_at_start"][0]
    return (
        f"{describe(results)}, {minutes_in_all:.0f} min in all, on {m['cpu']} "
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
        textwrap.fill(intro + measured_on(results), width=100, break_on_hyphens=False),
        "",
        "| benchmark | case | metric | judgeflow | baseline | vs baseline | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        "| " + " | ".join(cell(row[k]) for k in ("benchmark", "case", "metric", "ours",
                                                  "baseline", "vs", "note")) + " |"
        for row in results["rows"]
    ]  # fmt: skip
    if results["failed"]:
        lines += ["", "Failed: " + ", ".join(sorted(results["failed"])) + "."]
    return "\n".join(lines)


def pipeline_raw(source: Path) -> Mapping[str, Any]:
    raw = read_json(source)["raw"]
    return {"first": raw["demo-stages"], "second": raw["cached-retrain"]["second"]}


def cached_rerun(source: Path) -> str:
    """The cached second run's wall time and where it goes, in one sentence."""
    second = pipeline_raw(source)["second"]["phases"]
    return (
        f"{second['wall_s']:.1f} s from the command to the prompt (the Prefect server's start-up, "
        f"{second['server_start_s']:.1f} s, while the command imports; then "
        f"{second['flow_s']:.1f} s of flow and {second['exit_s']:.1f} s to exit)"
    )


def fresh_demo(source: Path) -> str:
    """`make demo` in a fresh clone, phase by phase: a bullet list."""
    demo = pipeline_raw(source)["first"]
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


def demo_minutes(source: Path) -> str:
    """The demo's first run in a fresh clone, set-up apart (demo-stages), in minutes."""
    return minutes(pipeline_raw(source)["first"]["first"]["phases"]["wall_s"])
