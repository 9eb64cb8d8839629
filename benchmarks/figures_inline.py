"""The one-line regions, quoted inside a sentence: where a results file comes from, the machine
and build a demo or the GPU check ran on, a count or a duration."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from figures_format import REPO, minutes, read_json
from stamp import describe


def tables_meta(field: str, fmt: str) -> Callable[[Path], str]:
    def render(source: Path) -> str:
        return fmt.format(read_json(source)[field])

    return render


def stamped(source: Path) -> str:
    """Where a results file's figures come from, in one sentence (`stamp.describe`)."""
    return f"`{source.relative_to(REPO)}`: {describe(read_json(source))}."


def demo_machine(source: Path) -> str:
    """The CPU the demo's tables were made on, and its cores: 'AMD EPYC, 2 cores'."""
    machine = read_json(source)["machine"]
    return f"{machine['cpu']}, {machine['cores']} cores"


def gpu_check_run(source: Path) -> str:
    """When and on what the GPU check ran: '2026-11-26, one NVIDIA H100 80GB HBM3'."""
    results = read_json(source)
    gpus = results["machine"]["gpus"]
    return f"{results['date'][:10]}, {'one' if gpus == 1 else gpus} {results['machine']['gpu']}"


def gpu_check_torch(source: Path) -> str:
    """The torch build the GPU check ran with: 'torch 2.11.0+cu130'."""
    return f"torch {read_json(source)['packages']['torch']}"


def pairwise_minutes(source: Path) -> str:
    """The pairwise demo's minutes, from the demo tables' run."""
    return minutes(read_json(source)["seconds"]["pairwise"])
