"""`benchmarks/run.py --quick` keeps working: every benchmark runs and prints its rows, judgeflow
and the baselines (pandas and batched pyarrow) write identical rows, and the results file says
what was measured where. No timing is asserted (figures are the benchmarks' output); `--quick`
runs ray-startup as two local ranks, without Slurm.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "run.py"


def _run(tmp_path: Path, *names: str) -> tuple[str, dict[str, Any]]:
    """Run the named benchmarks quickly; the table, the JSON, and no temp dir left behind.

    The run gets a temporary directory of its own (TMPDIR; short, for Ray's socket paths), so
    that what it leaves there is its own, whatever else runs beside it."""
    out = tmp_path / "results.json"
    own_tmp = Path(tempfile.mkdtemp(prefix="jfb-"))
    try:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), "--quick", "--only", *names, "--json", str(out)],
            capture_output=True, text=True, timeout=900, env={**os.environ, "TMPDIR": str(own_tmp)},
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        left = sorted(p.name for p in own_tmp.iterdir())
    finally:
        shutil.rmtree(own_tmp, ignore_errors=True)
    assert not [name for name in left if name.startswith("jfbench-")], f"left behind: {left}"
    return done.stdout, json.loads(out.read_text())


def _rows(table: str, benchmark: str) -> list[list[str]]:
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()]
    return [row for row in cells if row and row[0] == benchmark]


def test_data_and_reward_benchmarks_run_and_baselines_write_the_same_rows(
    tmp_path: Path,
) -> None:
    table, results = _run(tmp_path, "prepare-judge", "prepare-grrm", "rewards")
    assert not results["failed"]
    assert results["quick"] is True
    assert results["machine"]["cores"] and results["machine"]["python"]
    assert len(results["git"]["commit"]) == 40
    assert set(results["seconds"]) == {"prepare-judge", "prepare-grrm", "rewards"}
    raw = results["raw"]
    judge, grrm = raw["prepare-judge"], raw["prepare-grrm"]
    for res in (judge, grrm["sft"], grrm["rl"]):
        assert res["identical"] == {"pandas": True, "pyarrow": True}
    assert judge["ours"]["rows"] == judge["pandas"]["rows"] == judge["pyarrow"]["rows"] == 300
    assert grrm["rl"]["ours"]["rows"] == grrm["rl"]["pyarrow"]["rows"] > 300  # augmented
    for bench, count in (("prepare-judge", 5), ("prepare-grrm", 10), ("rewards", 9)):
        rows = _rows(table, bench)
        assert len(rows) == count, table
        assert all(row[3] and row[3] != "–" for row in rows), table
    speed = [r for r in _rows(table, "prepare-judge") + _rows(table, "prepare-grrm")
             if r[2].startswith("rows/s")]  # fmt: skip
    assert len(speed) == 6 and all("identical rows: True" in r[6] for r in speed), table
    assert {r[4].split("(")[-1] for r in speed} == {"pandas iterrows)", "batched pyarrow)"}
    growth = [r for r in _rows(table, "prepare-grrm") if r[2] == "peak RSS as the input grows"]
    assert [r[1].split(",")[0] for r in growth] == ["SFT", "RL"], table
    judge_growth = [g["rows"] for g in judge["growth"]]
    assert judge_growth == [300, 6000], judge["growth"]


@pytest.mark.slow(seconds=110)
@pytest.mark.timeout(900)
def test_ray_and_pipeline_benchmarks_run_and_leave_nothing_behind(tmp_path: Path) -> None:
    table, results = _run(tmp_path, "ray-startup", "cached-retrain", "demo-stages")
    assert not results["failed"], results["failed"]
    raw = results["raw"]
    assert raw["ray-startup"]["mode"] == "local" and raw["ray-startup"]["left_behind"] == []
    assert len(raw["ray-startup"]["results"]) == 1
    assert {s["status"] for s in raw["cached-retrain"]["second"]["stages"]} == {"cached"}
    assert {s["status"] for s in raw["demo-stages"]["first"]["stages"]} == {"ran"}
    assert raw["demo-stages"]["prepare_40_rows"]["identical"] is True
    assert raw["demo-stages"]["prepare_40_rows"]["ours"]["rows"] == 40
    assert len(_rows(table, "ray-startup")) == 3
    assert len(_rows(table, "cached-retrain")) == 4
    second = raw["cached-retrain"]["second"]["phases"]
    assert second["server_start_s"] > 0 and second["until_flow_s"] < second["wall_s"]
    stages = {row[2]: row for row in _rows(table, "demo-stages")}
    assert {"stage download", "stage prepare", "stage train"} <= set(stages), table
    assert raw["demo-stages"]["first"]["training_loop_s"]["train"] > 0  # --quick: no SFT
    assert "training loop" in stages["stage train"][6], table
