"""Benchmark: reward functions' calls per second on realistic completions.

    .venv/bin/python benchmarks/rewards.py [--calls 2000] [--repeat 5]

verl calls `compute_score` once per completion (96 prompts x 4 rollouts = 384 per step in the
pointwise preset), in its reward workers, so a slow reward slows every step. The modules are
loaded by file path as verl loads them. Completions are generated with a seeded RNG in three
kinds: well-formed, malformed (each recipe's ways of failing, cycled) and long reasoning
(think sections / analyses of about 2,000 tokens, ~8,000 characters). Every call's
`valid_answer` is checked against its kind, so the figures are for what they say they are.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import random
import statistics
import string
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from grrm_prepare import WORDS

RECIPES = ("pointwise", "pairwise", "grrm")
KINDS = ("well-formed", "malformed", "long reasoning")
LONG_CHARS = 8000  # ~2,000 tokens of English at ~4 characters per token
Case = tuple[str, Any]  # (completion, ground truth)


def _words(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def _reasoning(rng: random.Random, long: bool) -> str:
    return _words(rng, LONG_CHARS if long else rng.randint(200, 1200))


# --------------------------------------------------------------------------- pointwise / pairwise


def _pointwise(rng: random.Random, kind: str, i: int) -> Case:
    truth = {"helpfulness": rng.randint(0, 4)}
    think = _reasoning(rng, kind == "long reasoning")
    if kind != "malformed":
        return f"<think>{think}</think><score>{rng.randint(0, 4)}</score>", truth
    broken = [
        f"<think>{think}</think>The score is 3.",  # no tag
        f"<think>{think}</think><score>2</score><score>3</score>",  # two verdicts
        f"<think>{think}</think><score>four</score>",  # not an integer
        f"<think>{think}</think><score>7</score>",  # out of range
        f"<think>{think}",  # truncated inside the think section
        f"<think>{think}</think><score>3",  # unclosed tag
    ]
    return broken[i % len(broken)], truth


def _pairwise(rng: random.Random, kind: str, i: int) -> Case:
    truth = {"preference": rng.choice("AB")}
    think = _reasoning(rng, kind == "long reasoning")
    if kind != "malformed":
        return f"<think>{think}</think><better>{rng.choice('AB')}</better>", truth
    broken = [
        f"<think>{think}</think>Response A is better.",
        f"<think>{think}</think><better>A</better><better>B</better>",
        f"<think>{think}</think><better>C</better>",
        f"<think>{think}</think><better>A and B</better>",
        f"<think>{think}",
        f"<think>{think}</think><better>B",
    ]
    return broken[i % len(broken)], truth


# --------------------------------------------------------------------------- grrm


def _ranking(scores: dict[str, int]) -> str:
    order = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    out = order[0][0]
    for (_, prev), (label, score) in itertools.pairwise(order):
        out += (" = " if score == prev else " > ") + label
    return out


def _grrm(rng: random.Random, kind: str, i: int) -> Case:
    n = rng.randint(2, 8)
    labels = string.ascii_uppercase[:n]
    truth = {label: rng.randint(0, 10) for label in labels}
    pred = {label: rng.randint(0, 10) for label in labels}
    size = (LONG_CHARS if kind == "long reasoning" else 400) // n
    analysis = "\n".join(f"Translation {label}: {_words(rng, size)}" for label in labels)
    ranking = _ranking(pred)
    scores = ", ".join(f"{label}: {pred[label]}" for label in ranking[::4])
    if kind != "malformed":
        text = f"{analysis}\n\n### Final Ranking:\n\n{ranking}\n\n### Scores:\n\n{scores}\n"
        return text, json.dumps(truth)
    first, second = ranking[0], labels[0] if ranking[0] != labels[0] else labels[1]
    head = f"{analysis}\n\n### Final Ranking:\n\n"
    broken = [
        f"{analysis}\n\n### Scores:\n\n{scores}",  # no ranking section
        f"{head}{ranking}\n\n### Scores:\n\n{first}: 7.5",  # not an int
        f"{head}{second} > {first}\n\n### Scores:\n\n{first}: 9, {second}: 1",  # disagrees
        f"{head}{ranking}\n\n### Scores:\n\n{scores}, Z: 3",  # unknown label
        f"### Final Ranking:\n\n{ranking}\n\n### Scores:\n\n{scores}",  # no reasoning
    ]
    return broken[i % len(broken)], json.dumps(truth)


MAKERS: dict[str, Callable[[random.Random, str, int], Case]] = {
    "pointwise": _pointwise,
    "pairwise": _pairwise,
    "grrm": _grrm,
}


def cases(recipe: str, kind: str, count: int, seed: int = 0) -> list[Case]:
    """`count` deterministic (completion, ground truth) pairs of one recipe and kind."""
    rng = random.Random(f"{seed}:{recipe}:{kind}")
    return [MAKERS[recipe](rng, kind, i) for i in range(count)]


def load(recipe: str) -> ModuleType:
    """The reward module, imported from its file as verl's `custom_reward_function.path` does."""
    from judgeflow.rewards import reward_module_path

    spec = importlib.util.spec_from_file_location(
        f"bench_reward_{recipe}", reward_module_path(recipe)
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_recipe(recipe: str, kind: str, calls: int, repeat: int) -> dict[str, Any]:
    """Median seconds for `calls` calls over `repeat` passes; fails if a verdict is misclassed."""
    compute_score = load(recipe).compute_score
    batch = cases(recipe, kind, calls)
    valid = [compute_score(recipe, text, truth)["valid_answer"] for text, truth in batch]
    want = 0 if kind == "malformed" else 1
    if set(valid) != {want}:
        raise AssertionError(f"{recipe} {kind}: valid_answer {sorted(set(valid))}, expected {want}")
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for text, truth in batch:
            compute_score(recipe, text, truth)
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    chars = statistics.mean(len(text) for text, _ in batch)
    return {"calls": calls, "seconds": seconds, "calls_per_s": calls / seconds,
            "us_per_call": seconds / calls * 1e6, "mean_chars": chars}  # fmt: skip


def run_all(calls: int, repeat: int) -> dict[str, dict[str, Any]]:
    return {f"{r}/{k}": time_recipe(r, k, calls, repeat) for r in RECIPES for k in KINDS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for name, r in run_all(args.calls, args.repeat).items():
        print(f"{name:28} {r['calls_per_s']:>10,.0f} calls/s  {r['us_per_call']:8.1f} us/call  "
              f"({r['mean_chars']:,.0f} chars)")  # fmt: skip


if __name__ == "__main__":
    main()
