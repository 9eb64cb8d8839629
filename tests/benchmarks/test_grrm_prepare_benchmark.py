"""The preparation benchmark keeps working, and its baselines agree with judgeflow.

`benchmarks/grrm_prepare.py` compares judgeflow's GRRM preparation with a straightforward
pandas `iterrows` implementation and a plain batched-pyarrow one, both written independently of
it; on a small input all three must write the same rows for SFT and RL. No timing is asserted
(figures are the benchmark's output).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "grrm_prepare.py"


def test_benchmark_runs_and_all_three_implementations_write_the_same_rows() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--groups", "300", "--repeat", "1"],
        check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    out = done.stdout
    assert re.search(r"input: 300 groups", out)
    for kind in ("sft", "rl"):
        for impl in ("ours", "pandas", "pyarrow"):
            line = re.search(
                rf"{kind}\s+{impl}\s*:\s+(\d+) rows .* rows/s; peak RSS\s+\d+ MiB", out
            )
            assert line, f"no {kind} {impl} line in:\n{out}"
        for impl in ("pandas", "pyarrow"):
            assert re.search(
                rf"{kind}\s+vs {impl}\s*: speed-up x[\d.]+ .*identical rows: True", out
            ), out
    sft_rows = re.search(r"sft\s+ours\s*:\s+(\d+) rows", out)
    rl_rows = re.search(r"rl\s+ours\s*:\s+(\d+) rows", out)
    assert sft_rows and int(sft_rows.group(1)) == 300
    assert rl_rows and int(rl_rows.group(1)) > 300  # augmented (M=4, K=4)
