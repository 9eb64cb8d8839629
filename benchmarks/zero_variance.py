"""Zero-variance filtering (`grpo.filter_zero_std_samples`) on the tiny judge demos: what it saves
per GRPO step and what the judge reaches, with and without, per mode and seed.

    .venv/bin/python benchmarks/zero_variance.py      # 2 modes x 3 seeds x off/on (about 15 min)

Every run is `judgeflow run grpo-<mode> --profile tiny --set data.seed=S --set
grpo.filter_zero_std_samples=B` in a fresh JUDGEFLOW_HOME (benchmarks/demo.py's `run_tiny`).
Per run it records TRL's training time over the steps (`train/summary/runtime` / steps: seconds
per GRPO step, generation included), the share of completions in groups with reward variance
averaged over the steps (`train/real_batch_size_ratio`, from the run's MLflow history), and the
judge after GRPO on the validation split
(its primary metric: pointwise `exact_match`, pairwise `consistent_accuracy`; `reward_mean`).
Writes benchmarks/results/zero-variance.json, again after every run (a failure keeps what ran).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from demo import _RUN_ID, _STAMP, SEEDS, _write, run_tiny
from stamp import stamp

MODES = ("pointwise", "pairwise")
#: Each mode's primary metric, as benchmarks/readme.py's demo-seeds table uses it.
PRIMARY = {"pointwise": "exact_match", "pairwise": "consistent_accuracy"}


def _history(home: Path, output: str, key: str) -> list[float]:
    """Every step's value of metric `key` in the run `output` names, from its MLflow store."""
    run_id = _RUN_ID.search(output)
    assert run_id is not None  # run_tiny checked it
    db = sqlite3.connect(f"file:{home / 'mlflow.db'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT value FROM metrics WHERE run_uuid = ? AND key = ? ORDER BY step",
            (run_id.group(1), key),
        ).fetchall()
    finally:
        db.close()
    return [value for (value,) in rows]


def one(mode: str, seed: int, filtered: bool) -> dict[str, Any]:
    sets = [f"data.seed={seed}", f"grpo.filter_zero_std_samples={str(filtered).lower()}"]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jf-zv-") as tmp:
        output, metrics = run_tiny(Path(tmp), mode, sets)
        ratios = _history(Path(tmp), output, "train/real_batch_size_ratio")
    steps = len(ratios)  # one value per optimizer step (logging_steps=1)
    return {
        "mode": mode,
        "seed": seed,
        "filter_zero_std_samples": filtered,
        "steps": steps,  # each recipe's tiny profile sets its own grpo.max_steps
        "seconds_per_step": metrics["train/summary/runtime"] / steps,
        "mean_real_batch_size_ratio": sum(ratios) / len(ratios),
        "metric": PRIMARY[mode],
        "sft": metrics[f"sft/{PRIMARY[mode]}"],
        "after": metrics[f"after/{PRIMARY[mode]}"],
        "after_reward_mean": metrics["after/reward_mean"],
        "after_format_failure_rate": metrics["after/format_failure_rate"],
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    args = parser.parse_args(argv)
    _STAMP.update(
        stamp(" ".join(["benchmarks/zero_variance.py", *(sys.argv[1:] if argv is None else argv)]))
    )
    runs = []
    for mode in args.modes:
        for seed in args.seeds:
            for filtered in (False, True):
                run = one(mode, seed, filtered)
                runs.append(run)
                print(f"{mode} seed {seed} filter={filtered}: {run['seconds_per_step']:.2f} s/step, "
                      f"{run['metric']} {run['sft']:.3f} -> {run['after']:.3f}",
                      flush=True)  # fmt: skip
                done = len(runs) == len(args.modes) * len(args.seeds) * 2
                _write("zero-variance.json", {"complete": done, "runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
