"""Where a committed figure comes from: every results file carries the same stamp.

A stamp is five top-level keys of a results file (`benchmarks/results.json` and every
`benchmarks/results/*.json`):

    date      ISO 8601, when the run started
    command   what was run, as typed
    machine   CPU (or GPU), cores, memory, OS, Python
    packages  the versions of the packages that produced the figures
    git       {"commit": the commit checked out, "modified": tracked files that differed from it}

`stamp(command)` makes one for a run starting now. A file written before stamps were complete
may carry `"reconstructed": {field: how it was recovered}` for the fields its run did not record
(`modified` may then be null: unknown); `describe` says so wherever the file is quoted.
tests/benchmarks/test_results_stamps.py checks every results file against this.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: What a figure of judgeflow's depends on; each is recorded when installed.
PACKAGES = ("torch", "transformers", "trl", "llamafactory", "peft", "accelerate", "datasets",
            "pyarrow", "mlflow", "prefect", "ray", "submitit", "verl", "vllm")  # fmt: skip
KEYS = ("date", "command", "machine", "packages", "git")


def _proc_field(path: str, key: str) -> str | None:
    """The value of the first `key:` (or `key=`) line of a /proc-style file, if any."""
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            name, sep, value = line.partition(":" if ":" in line else "=")
            if sep and name.strip() == key:
                return value.strip().strip('"')
    return None


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    memory = _proc_field("/proc/meminfo", "MemTotal")  # "16384256 kB"
    distribution = _proc_field("/etc/os-release", "PRETTY_NAME")
    return {
        "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory_gib": round(int(memory.split()[0]) / 2**20, 1) if memory else None,
        "os": f"{distribution}, {platform.platform()}" if distribution else platform.platform(),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def packages() -> dict[str, str]:
    """The installed versions of `PACKAGES` (those not installed are left out)."""
    out = {}
    for name in PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[name] = importlib.metadata.version(name)
    return out


def git_state() -> dict[str, Any]:
    """The commit measured, and the tracked files that differed from it."""
    command = ["git", "-C", str(REPO), "status", "--porcelain=v2", "--branch",
               "--untracked-files=no"]  # fmt: skip
    try:
        lines = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "modified": []}
    heads = [ln.split()[2] for ln in lines.splitlines() if ln.startswith("# branch.oid ")]
    return {
        "commit": heads[0] if heads else None,
        "modified": [_path(ln) for ln in lines.splitlines() if not ln.startswith("#")],
    }


#: porcelain v2: how many fields come before the path, by the entry's first character.
_FIELDS_BEFORE_PATH = {"1": 8, "2": 9, "u": 10}


def _path(line: str) -> str:
    """The path of one `git status --porcelain=v2` entry (a rename's new path)."""
    return line.split("\t")[0].split(" ", _FIELDS_BEFORE_PATH.get(line[0], 8))[-1]


def stamp(command: str) -> dict[str, Any]:
    """The stamp of a run starting now (the first keys of its results file)."""
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": command,
        "machine": machine(),
        "packages": packages(),
        "git": git_state(),
    }


def describe(results: Mapping[str, Any]) -> str:
    """One sentence for the docs: when, which commit, whether the tree was modified, and
    which fields were reconstructed after the run."""
    git = results["git"]
    text = f"{results['date'][:10]}, commit `{(git['commit'] or 'unknown')[:10]}`"
    modified = git.get("modified")
    if modified is None:
        text += " (modified files not recorded)"
    elif len(modified) > 4:
        text += f" with {len(modified)} modified files (listed in the file)"
    elif modified:
        files = "a modified file" if len(modified) == 1 else f"{len(modified)} modified files"
        text += f" with {files} ({', '.join(f'`{m}`' for m in modified)})"
    if results.get("reconstructed"):
        text += "; " + ", ".join(sorted(results["reconstructed"])) + " reconstructed after the run"
    return text
