"""Every committed results file says where its figures come from (benchmarks/stamp.py): date,
command, machine, package versions, the commit and the files that differed from it; a field
recovered after the run says how. Every committed text output is tied to its results file.
Nothing is measured here."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import gpu_check
import gpu_policy
import pytest
import stamp

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
FILES = [REPO / "benchmarks" / "results.json", *sorted(RESULTS.glob("*.json"))]


def _load(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path.name}: a results file is an object with its stamp"
    return data


def test_the_results_files_are_found() -> None:
    names = {p.name for p in FILES}
    assert {"results.json", "demo-seeds.json", "demo-tables.json", "gpu-check.json"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_results_file_is_stamped(path: Path) -> None:
    results = _load(path)
    missing = [key for key in stamp.KEYS if key not in results]
    assert not missing, f"{path.name}: no {missing} (benchmarks/stamp.py)"
    dt.date.fromisoformat(results["date"][:10])
    assert isinstance(results["command"], str) and results["command"].strip()
    assert isinstance(results["machine"], dict) and results["machine"], path.name
    assert results["packages"].get("torch"), f"{path.name}: no torch version"
    git = results["git"]
    commit = git["commit"]
    assert isinstance(commit, str) and len(commit) == 40, f"{path.name}: commit {commit!r}"
    ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=REPO)
    assert ancestor.returncode == 0, f"{path.name}: {commit[:10]} is not in this history"
    reconstructed = results.get("reconstructed", {})
    if git["modified"] is None:
        assert "git" in reconstructed, f"{path.name}: modified files unknown, and not said why"
    else:
        assert all(isinstance(m, str) and m for m in git["modified"]), path.name
    for key, how in reconstructed.items():
        assert key in results and isinstance(how, str) and how.strip(), f"{path.name}: {key}"


def _tables_hash(name: str, folder: Path = RESULTS) -> None:
    outputs = _load(folder / "demo-tables.json")["outputs"]
    digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    assert outputs[name] == digest, (
        f"{name} is not the output demo-tables.json recorded: run benchmarks/demo.py tables"
    )


def _gpu_check(name: str, folder: Path = RESULTS) -> None:
    rendered = gpu_check.render(_load(folder / "gpu-check.json"))
    assert (folder / name).read_text(encoding="utf-8") == rendered, (
        f"{name} is not what gpu-check.json renders: "
        "benchmarks/gpu_check.py --render benchmarks/results/gpu-check.json --table …"
    )


def _gpu_policy(name: str, folder: Path = RESULTS) -> None:
    rendered = gpu_policy.render(_load(folder / "gpu-policy.json"))
    assert (folder / name).read_text(encoding="utf-8") == rendered, (
        f"{name} is not what gpu-policy.json renders: "
        "benchmarks/gpu_policy.py --render benchmarks/results/gpu-policy.json --table …"
    )


#: Each committed text output, and the check that ties it to its results file.
TIED = {
    "demo-pointwise.txt": _tables_hash,
    "demo-pairwise.txt": _tables_hash,
    "gpu-check.txt": _gpu_check,
    "gpu-policy.txt": _gpu_policy,
}


def test_every_text_output_has_a_tie_to_its_results_file() -> None:
    assert sorted(p.name for p in RESULTS.glob("*.txt")) == sorted(TIED)


@pytest.mark.parametrize("name", sorted(TIED))
def test_each_text_output_is_what_its_results_file_recorded(name: str) -> None:
    TIED[name](name)


@pytest.mark.parametrize("name", sorted(TIED))
def test_a_text_output_edited_by_hand_is_caught(tmp_path: Path, name: str) -> None:
    for path in RESULTS.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    TIED[name](name, tmp_path)  # the copies tie as the originals do
    edited = tmp_path / name
    edited.write_text(edited.read_text(encoding="utf-8").replace("0", "9", 1), encoding="utf-8")
    with pytest.raises(AssertionError, match="is not"):
        TIED[name](name, tmp_path)


def test_describe_says_when_the_tree_was_modified_or_unknown() -> None:
    base = {"date": "2026-11-27T00:00:00+00:00", "git": {"commit": "a" * 40, "modified": []}}
    assert stamp.describe(base) == "2026-11-27, commit `aaaaaaaaaa`"
    base["git"]["modified"] = ["README.md"]
    assert "with a modified file (`README.md`)" in stamp.describe(base)
    base["git"]["modified"] = None
    base["reconstructed"] = {"git": "not recorded"}
    text = stamp.describe(base)
    assert "modified files not recorded" in text and "git reconstructed" in text


def test_a_new_stamp_has_every_field() -> None:
    new = stamp.stamp("benchmarks/x.py")
    assert set(stamp.KEYS) <= set(new) and new["packages"]["torch"]
    assert new["git"]["commit"] and isinstance(new["git"]["modified"], list)
