"""How fast a judge pays a policy: rollouts scored per second, batched per step against one
generation call per rollout.

    .venv/bin/python benchmarks/judge_reward.py     # writes benchmarks/results/judge-reward.json

One GRPO step of the tiny profile's shape (`PROMPTS` prompts x `ROLLOUTS` completions each) is
scored through judgeflow's judge-paid reward (`judgeflow.inference.judge_reward.compute_score`, the
function TRL and verl call), by the tiny model as the judge, in this process on CPU (HF
generation, `MAX_NEW_TOKENS` tokens a reply, greedy): once with every rollout of the step in
calls of `reward.judge_batch_size` rollouts, once with a call per rollout (batch size 1), as a
reward function that scores one response at a time would. Pointwise judges one prompt per
rollout, pairwise two (both orders against the reference). The tiny model is untrained: its
replies do not parse, which costs the same generation as a verdict. Each figure is the best of
`REPEATS` timings after one warm-up.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stamp import stamp

from judgeflow.inference.judge_reward import compute_score

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "judge-reward.json"
PROMPTS, ROLLOUTS = 4, 16
MAX_NEW_TOKENS = 24
BATCH_SIZES = (16, 64)
REPEATS = 3
RULES = {"verification_reward": 1.0, "r1_style_format": "off", "non_stop_penalty": False}


def _step() -> tuple[list[str], list[str], list[Any], list[dict[str, Any]]]:
    questions = [f"What is the capital of country number {i}?" for i in range(PROMPTS)]
    answers, truths, extras = [], [], []
    for i, question in enumerate(questions):
        for k in range(ROLLOUTS):
            answers.append(f"The capital of country number {i} is city {k}.")
            truths.append([f"The capital of country number {i} is city 0."])
            extras.append({"dataset": ["judge"], "query": question, "index": i})
    return ["judge"] * len(answers), answers, truths, extras


def _per_second(model: str, mode: str, batch_size: int) -> float:
    sources, answers, truths, extras = _step()
    settings = {
        **RULES,
        "judge_weights": model,
        "judge_mode": mode,
        "judge_datasets": ["judge"],
        "judge_max_new_tokens": MAX_NEW_TOKENS,
        "judge_batch_size": batch_size,
    }
    compute_score(sources[:2], answers[:2], truths[:2], extras[:2], **settings)  # load, warm up
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        compute_score(sources, answers, truths, extras, **settings)
        best = min(best, time.perf_counter() - start)
    return len(answers) / best


def main() -> int:
    from judgeflow.dev.tiny_model import build_tiny_model

    record = stamp("benchmarks/judge_reward.py")
    rows = []
    with tempfile.TemporaryDirectory(prefix="jf-judge-reward-") as tmp:
        model = str(build_tiny_model(Path(tmp) / "tiny-model", seed=0))
        for mode in ("pointwise", "pairwise"):
            one = _per_second(model, mode, 1)
            for batch in BATCH_SIZES:
                batched = _per_second(model, mode, batch)
                rows.append({"judge": f"tiny {mode}", "rollouts": PROMPTS * ROLLOUTS,
                             "batch_size": batch, "one_by_one_per_s": one,
                             "batched_per_s": batched})  # fmt: skip
                print(f"{mode}: {one:.1f}/s one by one, {batched:.1f}/s in calls of {batch}",
                      flush=True)  # fmt: skip
    payload = {**record, "max_new_tokens": MAX_NEW_TOKENS, "repeats": REPEATS, "rows": rows}
    tmp_out = OUT.with_name(OUT.name + ".tmp")
    tmp_out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    tmp_out.replace(OUT)
    print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
