"""What LoRA changes on CPU: the tiny pointwise judge demo with full fine-tuning and with LoRA
(SFT and GRPO), per seed: seconds per step, peak memory, trainable parameters, and the judge
before (the SFT model) and after GRPO.

    .venv/bin/python benchmarks/lora.py      # 3 seeds x full/LoRA (about 15 min)

Every run is `judgeflow run grpo-pointwise --profile tiny --set data.seed=S` in a fresh
JUDGEFLOW_HOME (benchmarks/demo.py's `run_tiny`), LoRA adding `LORA_SETS` (sft.finetuning_type
lora, sft.lora.rank, grpo.lora.rank and the learning rates LoRA needs). Per run it records, from
the run's MLflow metrics: SFT's seconds (`sft/summary/runtime`), GRPO's seconds per step
(`train/summary/runtime` over the steps), the peak resident memory of the SFT trainer and of the
GRPO process (`*/summary/peak_rss_mib`), GRPO's trainable parameters
(`train/summary/trainable_params`), and the judge's `exact_match` and `reward_mean` on the
validation split for the SFT model and after GRPO. Writes benchmarks/results/lora.json, again
after every run (a failure keeps what ran).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from demo import _STAMP, SEEDS, _write, run_tiny
from stamp import stamp
from zero_variance import _history

#: What a LoRA run sets on top of the tiny profile. The adapter starts at zero and moves only
#: within rank 8: it needs larger steps than the full model's (tiny profile: SFT 1e-3, GRPO 3e-4).
LORA_SETS = (
    "sft.finetuning_type=lora",
    "sft.lora.rank=8",
    "sft.learning_rate=5.0e-3",
    "grpo.lora.rank=8",
    "grpo.learning_rate=1.0e-3",
)
MODE = "pointwise"


def one(seed: int, lora: bool) -> dict[str, Any]:
    sets = [f"data.seed={seed}", *(LORA_SETS if lora else ())]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jf-lora-") as tmp:
        output, m = run_tiny(Path(tmp), MODE, sets)
        steps = len(_history(Path(tmp), output, "train/loss"))  # one per optimizer step
    return {
        "seed": seed,
        "lora": lora,
        "sets": sets,
        "sft_seconds": m["sft/summary/runtime"],
        "grpo_steps": steps,
        "sft_peak_rss_mib": m["sft/summary/peak_rss_mib"],
        "grpo_seconds_per_step": m["train/summary/runtime"] / steps,
        "grpo_peak_rss_mib": m["train/summary/peak_rss_mib"],
        "grpo_trainable_params": m["train/summary/trainable_params"],
        "sft_exact_match": m["sft/exact_match"],
        "after_exact_match": m["after/exact_match"],
        "sft_reward_mean": m["sft/reward_mean"],
        "after_reward_mean": m["after/reward_mean"],
        "after_format_failure_rate": m["after/format_failure_rate"],
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    args = parser.parse_args(argv)
    _STAMP.update(
        stamp(" ".join(["benchmarks/lora.py", *(sys.argv[1:] if argv is None else argv)]))
    )
    runs = []
    for seed in args.seeds:
        for lora in (False, True):
            run = one(seed, lora)
            runs.append(run)
            print(f"seed {seed} lora={lora}: {run['grpo_seconds_per_step']:.2f} s/step, "
                  f"peak {run['grpo_peak_rss_mib']:.0f} MiB, exact_match "
                  f"{run['sft_exact_match']:.3f} -> {run['after_exact_match']:.3f}",
                  flush=True)  # fmt: skip
            done = len(runs) == len(args.seeds) * 2
            _write("lora.json", {"complete": done, "lora_sets": list(LORA_SETS), "runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
