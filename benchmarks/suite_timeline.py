"""Where the test suite's time goes: `benchmarks/suite_timeline.py TIMELINE [--top N]`.

TIMELINE is what `TEST_TIMELINE=TIMELINE scripts/test` (or `CI=true bash .ci/run`) wrote: one
JSON line per test phase (setup, call, teardown) with its worker, start and stop
(`tests/conftest.py`). Printed: the span from the first test's start to the last one's stop,
the test-seconds summed over every test (what the workers had to get through), each worker's
busy time and end, and the modules and tests that took the most. A test-second on a busy
two-core machine is not a CPU-second; the figures say where to look, not what a test costs alone.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def summary(phases: list[dict[str, Any]], top: int = 25) -> str:
    """The report, as text: span, test-seconds, workers, the costliest modules and tests."""
    if not phases:
        raise SystemExit("the timeline is empty: was TEST_TIMELINE set for the run?")
    t0 = min(p["start"] for p in phases)
    seconds: Counter[str] = Counter()
    span: dict[str, tuple[float, float]] = {}
    worker_of: dict[str, str] = {}
    for p in phases:
        test = p["test"]
        seconds[test] += p["stop"] - p["start"]
        first, last = span.get(test, (p["start"], p["stop"]))
        span[test] = (min(first, p["start"]), max(last, p["stop"]))
        worker_of[test] = p["worker"]
    end = max(stop for _, stop in span.values()) - t0
    total = sum(seconds.values())
    lines = [
        f"{len(seconds)} tests, {end:.0f} s from the first start to the last stop, "
        f"{total:.0f} test-seconds in all ({total / max(end, 1e-9):.2f} tests at once on average)"
    ]
    busy: defaultdict[str, float] = defaultdict(float)
    ends: defaultdict[str, float] = defaultdict(float)
    for test, s in seconds.items():
        busy[worker_of[test]] += s
        ends[worker_of[test]] = max(ends[worker_of[test]], span[test][1] - t0)
    for worker in sorted(busy):
        lines.append(
            f"  worker {worker}: busy {busy[worker]:.0f} s, last test ends at {ends[worker]:.0f} s"
        )
    quick = [s for s in seconds.values() if s < 15]
    lines.append(f"  tests under 15 s: {len(quick)}, {sum(quick):.0f} test-seconds")
    modules: Counter[str] = Counter()
    for test, s in seconds.items():
        modules[test.split("::")[0]] += s
    lines.append(f"modules by test-seconds (top {top}):")
    lines += [f"  {s:6.0f}  {module}" for module, s in modules.most_common(top)]
    lines.append(f"tests by test-seconds (top {top}; start and stop from the first start):")
    for test, s in seconds.most_common(top):
        first, last = span[test]
        lines.append(f"  {s:6.0f}  [{first - t0:5.0f}, {last - t0:5.0f}] {worker_of[test]}  {test}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    print(summary(load(args.timeline), args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
