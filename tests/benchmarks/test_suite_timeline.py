"""`TEST_TIMELINE=FILE` makes the suite write each test phase's worker, start and stop, and
`benchmarks/suite_timeline.py` sums them into where the time went."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import suite_timeline

REPO = Path(__file__).resolve().parents[2]


def test_a_run_with_test_timeline_writes_each_phase_of_each_test(tmp_path: Path) -> None:
    timeline = tmp_path / "timeline.jsonl"
    chosen = [
        "tests/benchmarks/test_demo_champion.py::test_the_policys_first_version_is_champion",
        "tests/benchmarks/test_demo_champion.py::test_the_sft_models_line_is_not_the_policys",
    ]
    env = {**os.environ, "TEST_TIMELINE": str(timeline)}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider", *chosen],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    phases = [json.loads(line) for line in timeline.read_text().splitlines()]
    assert [(p["test"], p["when"]) for p in phases] == [
        (test, when) for test in chosen for when in ("setup", "call", "teardown")
    ]
    assert all(p["worker"] == "main" and p["stop"] >= p["start"] for p in phases)
    assert all(p["outcome"] == "passed" for p in phases)


def test_the_summary_sums_test_seconds_by_worker_module_and_test() -> None:
    def phase(worker: str, test: str, when: str, start: float, stop: float) -> dict[str, object]:
        return {"worker": worker, "test": test, "when": when, "start": start, "stop": stop,
                "outcome": "passed"}  # fmt: skip

    phases = [
        phase("gw0", "tests/a.py::slow", "setup", 100.0, 110.0),
        phase("gw0", "tests/a.py::slow", "call", 110.0, 160.0),
        phase("gw1", "tests/b.py::quick", "call", 100.0, 102.0),
        phase("gw1", "tests/b.py::other", "call", 102.0, 200.0),
    ]
    report = suite_timeline.summary(phases, top=2)
    assert report.splitlines()[0] == (
        "3 tests, 100 s from the first start to the last stop, 160 test-seconds in all "
        "(1.60 tests at once on average)"
    )
    assert "worker gw0: busy 60 s, last test ends at 60 s" in report
    assert "worker gw1: busy 100 s, last test ends at 100 s" in report
    assert "tests under 15 s: 1, 2 test-seconds" in report
    assert "     100  tests/b.py" in report and "      60  tests/a.py" in report
    assert "      60  [    0,    60] gw0  tests/a.py::slow" in report
