"""open-instruct's ``code`` and ``code_stdio`` verifiers, run here instead of behind its code API.

open-instruct sends the program and the row's tests to a separate service (``code_api_url``,
``/test_program`` and ``/test_program_stdio``) and pays the pass rate. judgeflow runs the same
tests on the machine that computes the reward, in a child process of their own
(:mod:`judgeflow.rewards.rlvr.code_runner`: a fresh empty folder, no network, capped memory,
CPU time and output, killed past their time), and pays as open-instruct's ``CodeVerifier``:

- the program is the last fenced block of the response (```` ```python ```` or ```` ``` ````),
  or the whole response when it has none;
- a program that mentions ``threading``, ``multiprocess``, ``import os``, ``from os``,
  ``shutil``, ``import torch``, ``from torch``, ``import sklearn`` or ``from sklearn`` is not
  run: every test fails;
- the score is the pass rate, 0 below ``code_pass_rate_reward_threshold``; with
  ``code_apply_perf_penalty`` each passed test counts ``(T - runtime) / T`` instead of 1
  (``T = code_max_execution_time``).

Labels are the row's tests as open-instruct stores them: a list, its JSON text, or the
base64 of a zlib-compressed pickle of the list (read here by an unpickler that builds lists,
dicts, strings and numbers only: a pickle naming anything else is refused, not run). ``code``:
``assert`` statements; ``code_stdio``: ``{"input": …, "output": …}`` objects.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CODE_VERIFIERS",
    "CodeRun",
    "code_score",
    "decode_tests",
    "extract_python_code",
    "run_code_tests",
    "should_execute",
]

#: open-instruct's defaults (``code_max_execution_time``, ``…_threshold``, ``…_penalty``).
MAX_EXECUTION_TIME = 1.0
PASS_RATE_REWARD_THRESHOLD = 0.0
CODE_MEMORY_MB = 2048
CODE_VERIFIERS = ("code", "code_stdio")
RUNNER = Path(__file__).with_name("code_runner.py")
#: How long the runner may take to start, on top of the tests' own time.
STARTUP_S = 30.0

_FENCED = re.compile(r"```(?:python)?(.*?)```", re.DOTALL)
_NOT_RUN = ("threading", "multiprocess", "multiprocessing", "import os", "from os", "shutil",
            "import torch", "from torch", "import sklearn", "from sklearn")  # fmt: skip
_MAX_DECOMPRESSED = 256 * 2**20


def extract_python_code(response: str) -> str:
    """The last fenced block's content, stripped; the whole response when it has none."""
    blocks = _FENCED.findall(response)
    return blocks[-1].strip() if blocks else response


def should_execute(program: str) -> bool:
    """open-instruct does not run a program that names one of these."""
    return not any(word in program for word in _NOT_RUN)


class _DataOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"the tests' pickle names {module}.{name}: not read")


def decode_tests(label: Any) -> list[Any]:
    """The tests a label holds (see the module); ValueError when it holds none readable."""
    if isinstance(label, list):
        return label
    if not isinstance(label, str) or not label.strip():
        raise ValueError(f"the tests must be a list, its JSON, or open-instruct's compressed form, "
                         f"got {type(label).__name__}")  # fmt: skip
    try:
        decoded = json.loads(label)
    except json.JSONDecodeError:
        try:
            packed = zlib.decompressobj().decompress(
                base64.b64decode(label.encode(), validate=True), _MAX_DECOMPRESSED
            )
            decoded = _DataOnly(io.BytesIO(packed)).load()
        except Exception as exc:
            raise ValueError(f"the tests are neither JSON nor open-instruct's compressed form "
                             f"({type(exc).__name__}: {exc})") from exc  # fmt: skip
    if not isinstance(decoded, list):
        raise ValueError(f"the tests must be a list, got {type(decoded).__name__}")
    _bounded(decoded)
    return decoded


def _bounded(tests: list[Any], limit: int = 1_000_000) -> None:
    """Refuse tests with more than `limit` values in all (a pickle can nest one list in itself
    many times over: small to store, and exponential to walk or to write as JSON)."""
    stack: list[Any] = [tests]
    seen = 0
    while stack:
        value = stack.pop()
        seen += 1
        if seen > limit:
            raise ValueError(f"the tests hold more than {limit:,} values")
        if isinstance(value, list | tuple):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())


@dataclass
class CodeRun:
    """Per test: passed (1/0) and its runtime in seconds (-1: failed); how each ended
    (``ok``, or cut short: ``timeout``, ``memory``, ``output``)."""

    results: list[int]
    runtimes: list[float]
    cut_short: Counter[str] = field(default_factory=Counter)


def run_code_tests(
    program: str,
    tests: list[Any],
    *,
    stdio: bool,
    max_execution_time: float = MAX_EXECUTION_TIME,
    memory_mb: int = CODE_MEMORY_MB,
) -> CodeRun:
    """Run ``program`` against ``tests`` in a confined child (see the module)."""
    n = len(tests)
    if n == 0:
        return CodeRun([], [])
    if not should_execute(program):
        return CodeRun([0] * n, [-1.0] * n)
    request = {"program": program, "tests": tests, "stdio": stdio,
               "max_execution_time": max_execution_time, "memory_mb": memory_mb}  # fmt: skip
    budget = max_execution_time * n + 5.0 if stdio else (max_execution_time + 1.0) * n
    workdir = tempfile.mkdtemp(prefix="jf-code-")
    try:
        proc = subprocess.run(
            [sys.executable, "-I", str(RUNNER)], input=json.dumps(request), cwd=workdir,
            capture_output=True, text=True, timeout=budget + STARTUP_S,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
                 "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},  # no per-thread buffers
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return CodeRun([0] * n, [-1.0] * n, Counter(timeout=n))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    try:
        answer = json.loads(proc.stdout)
    except ValueError as exc:
        raise RuntimeError(f"the code runner failed: {proc.stderr[-500:]}") from exc
    cut = Counter(end for end in answer["ends"] if end in ("timeout", "memory", "output"))
    return CodeRun([int(r) for r in answer["results"]], [float(t) for t in answer["runtimes"]], cut)


def code_score(
    name: str,
    prediction: str,
    label: Any,
    *,
    max_execution_time: float = MAX_EXECUTION_TIME,
    pass_rate_reward_threshold: float = PASS_RATE_REWARD_THRESHOLD,
    apply_perf_penalty: bool = False,
    memory_mb: int = CODE_MEMORY_MB,
) -> tuple[float, CodeRun]:
    """open-instruct's ``CodeVerifier`` score of ``prediction`` (``name``: ``code`` or
    ``code_stdio``), and the run it comes from."""
    tests = decode_tests(label)
    run = run_code_tests(
        extract_python_code(prediction), tests, stdio=name == "code_stdio",
        max_execution_time=max_execution_time, memory_mb=memory_mb,
    )  # fmt: skip
    passes = run.results
    rate = sum(passes) / len(passes) if passes else 0.0
    score = 0.0 if rate < pass_rate_reward_threshold else rate
    if apply_perf_penalty and score > 0.0:
        t = max_execution_time
        score = sum(p * (t - r) / t for p, r in zip(passes, run.runtimes, strict=True)) / len(
            passes
        )
    return score, run
