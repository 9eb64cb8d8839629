"""`code` and `code_stdio`: the response's program run against the row's tests, here instead of
behind open-instruct's code API, paid as its `CodeVerifier` pays, in a confined child.

The cases marked "open-instruct's" are those of open-instruct's own tests of its code runner
(`open_instruct/code_utils/test_code_utils.py`, e6c3044), read there and written here again.
"""

from __future__ import annotations

import base64
import json
import pickle
import socket
import tempfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from judgeflow.rewards.rlvr import verify
from judgeflow.rewards.rlvr.code_tests import (
    code_score,
    decode_tests,
    extract_python_code,
    run_code_tests,
)
from judgeflow.rewards.rlvr.compose import RewardRules, Rollout, compose
from judgeflow.rewards.rlvr.score import compute_score

SLEEP = "import time\ntime.sleep(10)"


def _asserts(program: str, tests: list[str], limit: float = 3.0) -> list[int]:
    return run_code_tests(program, tests, stdio=False, max_execution_time=limit).results


def _stdio(program: str, cases: list[tuple[Any, str]], limit: float = 3.0) -> list[int]:
    tests = [{"input": i, "output": o} for i, o in cases]
    return run_code_tests(program, tests, stdio=True, max_execution_time=limit).results


def test_open_instructs_cases_pass_and_fail_as_there() -> None:
    tests = ["assert False", "assert True", "assert False", "assert True", "assert True", SLEEP,
             "assert True"]  # fmt: skip
    assert _asserts("a = 1", tests) == [0, 1, 0, 1, 1, 0, 1]
    add = "\n\ndef add(a, b):\n    return a + b\n"
    assert _asserts(add, ["assert add(1, 2) == 3", "assert add(-1, 1) == 0",
                          "assert add(0, 0) == 1"]) == [1, 1, 0]  # fmt: skip
    # A socket may be made (not used); a program naming threading or multiprocessing is not run.
    made = "import socket\ntry:\n    s = socket.socket()\n    ok = True\nexcept Exception:\n    ok = False"
    assert _asserts(made, ["assert ok"]) == [1]
    assert _asserts("import threading\nimport socket", ["assert True"]) == [0]
    assert _asserts("from multiprocessing import Pool", ["assert True"]) == [0]
    # Files in its own folder work; `import os` is never run.
    files = "with open('f.txt', 'w') as f:\n    f.write('x')\nok = open('f.txt').read() == 'x'"
    assert _asserts(files, ["assert ok"]) == [1]
    assert _asserts("import os\nos.chdir('..')", ["assert True"]) == [0]


def test_the_score_is_the_pass_rate_with_open_instructs_threshold_and_penalty() -> None:
    program = "```python\ndef add(a, b):\n    return a + b\n```"
    label = json.dumps(["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(0, 0) == 1"])
    assert verify("code", program, label, code_max_execution_time=3.0) == pytest.approx(2 / 3)
    assert verify("CODE", program, label, code_pass_rate_reward_threshold=0.7) == 0.0
    assert verify(
        "code", program, label, code_pass_rate_reward_threshold=0.6, code_max_execution_time=3.0
    ) == pytest.approx(2 / 3)
    score, run = code_score("code", program, label, apply_perf_penalty=True, max_execution_time=2.0)
    passed = [t for p, t in zip(run.results, run.runtimes, strict=True) if p]
    assert run.results == [1, 1, 0] and all(0 <= t < 2.0 for t in passed)
    assert score == pytest.approx(sum((2.0 - t) / 2.0 for t in passed) / 3)
    assert 0 < score < 2 / 3


def test_the_program_is_the_last_fenced_block_or_the_whole_response() -> None:
    assert extract_python_code("a\n```python\nx = 1\n```\nthen\n```\ny = 2\n```\n") == "y = 2"
    assert extract_python_code("x = 1") == "x = 1"
    assert verify("code", "Here:\n```\ndef f():\n    return 3\n```", ["assert f() == 3"],
                  code_max_execution_time=3.0) == 1.0  # fmt: skip


def test_stdio_compares_stripped_lines_as_text_or_decimals() -> None:
    plus_one = "n = int(input())\nprint(n + 1)"
    assert _stdio(plus_one, [("1\n", "2\n"), ("100", " 101.0 "), ("3", "5"), ("3", "4\n5")]) == [
        1, 1, 0, 0,
    ]  # fmt: skip
    # read() is the whole input; a final `if __name__ == '__main__':` block runs; the standard
    # library is there without imports (`sqrt`), as LiveCodeBench gives it.
    lines = "import sys\nfor line in sys.stdin.read().split():\n    print(int(line) * 2)"
    assert _stdio(lines, [("1\n2\n3", "2\n4\n6")]) == [1]
    main = "def go():\n    print(sqrt(16))\nif __name__ == '__main__':\n    go()"
    assert _stdio(main, [("", "4.0")]) == [1]
    assert _stdio("print(sum(map(int, input().split())))", [(["1 2", "x"], "3")]) == [1]


def test_stdio_keeps_open_instructs_quirks() -> None:
    # A program that mentions `class Solution` is never called; iterating sys.stdin fails;
    # readline() keeps the newline and gives "" at the end (an input() loop ends on EOFError);
    # a program that raises SystemExit passes on what it printed.
    assert _stdio("class Solution:\n    pass\nprint(1)", [("", "1")]) == [0]
    assert _stdio("import sys\nfor line in sys.stdin:\n    print(line)", [("a", "a")]) == [0]
    assert _stdio("import sys\nprint(repr(sys.stdin.readline()))", [("a\nb", "'a\\n'")]) == [1]
    loop = "import sys\nn = 0\nwhile sys.stdin.readline():\n    n += 1\nprint(n)"
    assert _stdio(loop, [("1\n2", "2")]) == [1]
    eof = "n = 0\ntry:\n    while True:\n        input()\n        n += 1\nexcept EOFError:\n    print(n)"
    assert _stdio(eof, [("1\n2\n3", "3")]) == [1]
    assert _stdio("print(7)\nraise SystemExit", [("", "7")]) == [1]


def test_a_test_past_its_bounds_fails_and_is_counted(tmp_path: Path) -> None:
    spin = run_code_tests(
        "while True:\n    pass", ["assert True"], stdio=False, max_execution_time=0.3
    )
    assert (spin.results, dict(spin.cut_short)) == ([0], {"timeout": 1})
    hog = run_code_tests("x = bytearray(8 * 2**30)", ["assert True"], stdio=False, memory_mb=512)
    assert (hog.results, dict(hog.cut_short)) == ([0], {"memory": 1})
    flood = run_code_tests("print('x' * 2_000_000)", [{"input": "", "output": "x"}], stdio=True)
    assert (flood.results, dict(flood.cut_short)) == ([0], {"output": 1})
    looping = run_code_tests("while True:\n    pass", [{"input": "", "output": ""}] * 2, stdio=True,
                             max_execution_time=0.3)  # fmt: skip
    assert (looping.results, dict(looping.cut_short)) == ([0, 0], {"timeout": 2})


def test_no_network_no_processes_and_nothing_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        connect = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 1)\n"
                   "    reached = True\nexcept PermissionError:\n    reached = False")  # fmt: skip
        assert _asserts(connect, ["assert not reached"]) == [1]
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing ever connected
    spawn = "import subprocess\ntry:\n    subprocess.run(['true'])\n    ran = True\nexcept Exception:\n    ran = False"  # fmt: skip
    assert _asserts(spawn, ["assert not ran"]) == [1]
    forks = "import posix\ntry:\n    posix.fork()\n    forked = True\nexcept PermissionError:\n    forked = False"
    assert _asserts(forks, ["assert not forked"]) == [1]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the runner's folder goes here
    assert _asserts("open('left.txt', 'w').write('x')", ["assert True"]) == [1]
    assert list(tmp_path.iterdir()) == []


def test_labels_in_open_instructs_three_forms_and_a_pickle_that_names_code_refused(
    tmp_path: Path,
) -> None:
    tests = ["assert f(1) == 2", "assert f(2) == 3"]
    packed = base64.b64encode(zlib.compress(pickle.dumps(tests))).decode()
    assert decode_tests(tests) == decode_tests(json.dumps(tests)) == decode_tests(packed) == tests
    assert verify("code", "def f(x):\n    return x + 1", packed, code_max_execution_time=3.0) == 1.0

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (marker.touch, ())  # type: ignore[return-value]

    evil = base64.b64encode(zlib.compress(pickle.dumps([Payload()]))).decode()
    with pytest.raises(ValueError, match="names"):
        decode_tests(evil)
    assert not marker.exists()
    with pytest.raises(ValueError, match="neither JSON"):
        decode_tests("assert f(1) == 2")
    nested: list[object] = []
    for _ in range(40):  # a few hundred bytes pickled, 2**40 values to walk
        nested = [nested, nested]
    bomb = base64.b64encode(zlib.compress(pickle.dumps(nested))).decode()
    with pytest.raises(ValueError, match="more than"):
        decode_tests(bomb)


def test_the_reward_pays_code_rows_with_the_runs_settings_and_counts_what_was_cut_short() -> None:
    label = json.dumps(["assert f() == 1", "import time\ntime.sleep(60)\nassert f() == 1"])
    right = "<think>x</think><answer>\n```python\ndef f():\n    return 1\n```\n</answer>"
    rules = RewardRules(verification_reward=1.0, code_max_execution_time=3.0,
                        code_pass_rate_reward_threshold=0.5)  # fmt: skip
    out = compose([Rollout(right, label, "code")], rules, check=lambda *a: pytest.fail(str(a)))
    assert out.scores == [0.5] and out.metrics["verifier_timeout"] == 1.0
    strict = RewardRules(verification_reward=1.0, code_max_execution_time=3.0,
                         code_pass_rate_reward_threshold=0.75)  # fmt: skip
    assert compose([Rollout(right, label, "code")], strict, check=print).scores == [0.0]
    unreadable = compose([Rollout(right, "not tests", "code")], rules, check=print)
    assert unreadable.scores == [0.0] and unreadable.metrics["verifier_error"] == 1.0
    # verl's compute_score with the run's reward_kwargs, the cut-short test counted
    parts = compute_score("code", right, label, r1_style_format="gated", verification_reward=1.0,
                          code_max_execution_time=3.0, code_pass_rate_reward_threshold=0.0)  # fmt: skip
    assert parts["score"] == 0.5 and parts["verifier_cut_short"] == 1.0


def test_a_runner_that_fails_pays_0_and_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner process itself failing (here: its file gone) ends no training: 0, counted."""
    from judgeflow.rewards.rlvr import code_tests

    monkeypatch.setattr(code_tests, "RUNNER", Path("/nonexistent/code_runner.py"))
    out = compose([Rollout("def f(): return 1", json.dumps(["assert f() == 1"]), "code")],
                  RewardRules(r1_style_format="off"), check=print)  # fmt: skip
    assert out.scores == [0.0] and out.metrics["verifier_error"] == 1.0
