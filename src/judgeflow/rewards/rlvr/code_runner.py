"""The process that runs a policy's program against a row's tests (``code``, ``code_stdio``).

Started by :mod:`judgeflow.rewards.rlvr.code_tests` as ``python -I code_runner.py`` (by path,
standard library only, so it starts in milliseconds and imports nothing of the caller's), in a
fresh empty working directory of its own. One JSON request on stdin, one JSON answer on stdout.

Every program runs in a forked child of this process, in a session of its own, with its address
space, CPU time and file sizes capped, its output sent nowhere (``code``) or captured up to
``OUTPUT_LIMIT`` characters (``code_stdio``), no network (an audit hook refuses every socket
connect, bind, send and name lookup), no new processes (``subprocess``, ``os.system``, ``exec*``,
``spawn*``, ``fork``), and open-instruct's ``reliability_guard`` applied (the same functions set to None:
``os.chdir``, ``os.remove``, ``shutil.rmtree``, ``subprocess.Popen``, ``exit``, …). A child
that outlives its time is killed with its whole session.

How a test passes is open-instruct's (``open_instruct/code_utils``, e6c3044):

- ``code``: each test (an ``assert`` statement) in a child of its own: the program is executed,
  then the test, in one namespace; the test passes when neither raises within
  ``max_execution_time`` (from the child's start); its runtime is the test's alone.
- ``code_stdio``: one child runs every test in turn, as LiveCodeBench's ``grade_stdio`` does: a
  final ``if __name__ == '__main__':`` block is unwrapped, the program's imports are hoisted and
  the rest becomes the body of one function, preceded by the same star imports of the standard
  library (``from math import *``, …); a program that mentions ``class Solution`` cannot be
  called (0, as there). Each test calls the function with ``sys.stdin`` replaced (``read()`` is
  the whole input, ``readline()`` the next line with its newline and ``""`` at the end,
  ``readlines()`` the lines without their newlines; iterating ``sys.stdin`` fails, as there),
  under an alarm of ``ceil(max_execution_time)`` seconds. The output passes when, stripped and split
  into stripped lines, it has as many lines as the expected output and each line equals the
  expected one, or both read as the same list of decimals.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import math
import os
import resource
import select
import signal
import sys
import time
from decimal import Decimal
from typing import Any

#: What a ``code_stdio`` child may print per test before the test fails.
OUTPUT_LIMIT = 1_000_000
#: The largest file a program may write (its working directory is removed afterwards).
FILE_LIMIT = 16 * 2**20

_STAR = ["string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics", "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing"]  # fmt: skip
#: The standard library a ``code_stdio`` program finds imported, as LiveCodeBench gives it.
PRELUDE = (
    "".join(f"from {name} import *\n" for name in _STAR)
    + "".join(f"import {name}\n" for name in _STAR if name not in ("builtins", "typing"))
    + "sys.setrecursionlimit(50000)\n"
)
_NO_NETWORK = ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
               "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr")  # fmt: skip
_NO_PROGRAMS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                "pty.spawn", "os.fork", "os.forkpty")  # fmt: skip
_GUARDED_OS = ["system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"]  # fmt: skip


def _refuse(event: str, _args: tuple[Any, ...]) -> None:
    if event.startswith(_NO_NETWORK) or event.startswith(_NO_PROGRAMS):
        raise PermissionError(f"{event} is not allowed here")


def _confine(memory_mb: int, cpu_s: int) -> None:
    """In the forked child, before the program runs: limits, no network, open-instruct's guard."""
    os.setsid()
    try:  # die with this runner (Linux)
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    limits = ((resource.RLIMIT_AS, memory_mb * 2**20), (resource.RLIMIT_CPU, cpu_s),
              (resource.RLIMIT_FSIZE, FILE_LIMIT), (resource.RLIMIT_CORE, 0))  # fmt: skip
    for which, value in limits:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    sys.addaudithook(_refuse)
    import builtins
    import shutil
    import subprocess

    for name in ("exit", "quit"):
        setattr(builtins, name, None)
    for name in _GUARDED_OS:
        if hasattr(os, name):
            setattr(os, name, None)
    for name in ("rmtree", "move", "chown"):
        setattr(shutil, name, None)
    subprocess.Popen = None  # type: ignore[assignment,misc]
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None  # type: ignore[assignment]


def _in_child(work: Any, budget_s: float, memory_mb: int) -> tuple[Any, str]:
    """Run ``work()`` in a forked, confined child; its JSON-able result and how it ended
    (``ok``, ``timeout``: killed after ``budget_s``, ``memory``, ``crashed``)."""
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        code = 0
        try:
            _confine(memory_mb, math.ceil(budget_s) + 1)
            payload = json.dumps(["ok", work()]).encode()
        except MemoryError:
            payload = b'["memory", null]'
        except BaseException:
            payload = b'["crashed", null]'
            code = 1
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view) :]
        os._exit(code)
    os.close(write_fd)
    chunks: list[bytes] = []
    ended = "timeout"
    while True:
        left = budget_s - (time.monotonic() - started)
        if left <= 0 or not select.select([read_fd], [], [], left)[0]:
            break
        chunk = os.read(read_fd, 65536)
        if not chunk:
            ended = "done"
            break
        chunks.append(chunk)
    os.close(read_fd)
    for kill in (os.killpg, os.kill):  # its session; the child itself, if it had none yet
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if ended == "timeout":
        return None, "timeout"
    try:
        how, value = json.loads(b"".join(chunks))
    except ValueError:  # it died without answering: its CPU time, or a crash (SIGSEGV, …)
        cpu = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU
        return None, "timeout" if cpu else "crashed"
    return value, how


def run_assert_tests(request: dict[str, Any]) -> dict[str, Any]:
    """``code``: each test in a child of its own, after the program, in its namespace."""
    program, limit = request["program"], float(request["max_execution_time"])
    results, runtimes, ends = [], [], []
    for test in request["tests"]:

        def work(test: str = test) -> float:
            namespace: dict[str, Any] = {"__builtins__": __builtins__}
            exec(program, namespace)
            start = time.time()
            exec(test, namespace)
            return time.time() - start

        value, how = _in_child(work, limit, request["memory_mb"])
        passed = how == "ok"
        results.append(1 if passed else 0)
        runtimes.append(float(value) if passed else -1.0)
        ends.append(how)
    return {"results": results, "runtimes": runtimes, "ends": ends}


def _unwrap_main(code: str) -> str:
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            return ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)  # type: ignore[arg-type]
    except Exception:
        pass
    return code


def _as_function(code: str) -> str:
    try:
        tree = ast.parse(code)
        imports = [s for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)]
        rest = [s for s in tree.body if not isinstance(s, ast.Import | ast.ImportFrom)]
        function = ast.FunctionDef(  # type: ignore[call-arg]  # type_params: Python 3.12's
            name="wrapped_function",
            args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=rest, decorator_list=[], lineno=-1, type_params=[],
        )  # fmt: skip
        return PRELUDE + "\n" + ast.unparse(imports) + "\n" + ast.unparse(function)  # type: ignore[arg-type]
    except Exception:
        return code


class _Timeout(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Timeout


class _Stdin:
    """``sys.stdin`` as a ``code_stdio`` test gives it (no ``__iter__``: iterating fails)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._io = io.StringIO(text)
        self.buffer = _Buffer(text)

    def read(self, *_: Any) -> str:
        return self._text

    def readline(self, *args: Any) -> str:
        return self._io.readline(*args)

    def readlines(self, *_: Any) -> list[str]:
        return self._text.split("\n")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._io, name)


class _Buffer:
    def __init__(self, text: str) -> None:
        self._data = text.encode("utf-8")

    def read(self, *_: Any) -> bytes:
        return self._data

    def readline(self, *_: Any) -> bytes:
        return self._data.split(b"\n")[0] + b"\n"


class _CappedOutput(io.StringIO):
    def write(self, text: str) -> int:
        if self.tell() + len(text) > OUTPUT_LIMIT:
            raise OverflowError(f"more than {OUTPUT_LIMIT:,} characters of output")
        return super().write(text)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(part) for part in line.split()]
    except Exception:
        return None


def _same_output(got: str, expected: str) -> bool:
    mine, theirs = _lines(got), _lines(expected)
    if len(mine) != len(theirs):
        return False
    for a, b in zip(mine, theirs, strict=True):
        if a == b:
            continue
        da, db = _decimals(a), _decimals(b)
        if da is None or db is None or da != db:
            return False
    return True


def _grade_stdio(program: str, tests: list[dict[str, str]], limit: float) -> dict[str, Any]:
    """In the child: every test, in turn (LiveCodeBench's ``grade_stdio``, see the module)."""
    import builtins

    alarm_s = math.ceil(limit)
    signal.signal(signal.SIGALRM, _alarm)
    code = _as_function(_unwrap_main(program))
    n = len(tests)
    signal.alarm(alarm_s)
    try:
        module: dict[str, Any] = {"__name__": "tmp_sol", "__builtins__": builtins}
        exec(code, module)
        function = module.get("wrapped_function") if "class Solution" not in code else None
    except BaseException:
        function = None
    finally:
        signal.alarm(0)
    if function is None:
        return {"results": [0] * n, "runtimes": [-1.0] * n, "ends": ["ok"] * n}
    results, runtimes, ends = [], [], []
    real_stdin, real_stdout, real_open = sys.stdin, sys.stdout, builtins.open
    for test in tests:
        given = test["input"]
        given = "\n".join(given) if isinstance(given, list) else given
        out = _CappedOutput()
        end, passed, runtime = "ok", False, -1.0
        signal.alarm(alarm_s)
        try:
            sys.stdin, sys.stdout = _Stdin(given), out
            builtins.open = lambda *_a, _given=given, **_k: io.StringIO(_given)  # type: ignore[assignment]
            start = time.time()
            with contextlib.suppress(SystemExit):
                function()
            runtime = time.time() - start
            signal.alarm(0)
            passed = _same_output(out.getvalue(), test["output"])
        except _Timeout:
            end = "timeout"
        except OverflowError:
            end = "output"
        except MemoryError:
            end = "memory"
        except BaseException:
            pass
        finally:
            signal.alarm(0)
            sys.stdin, sys.stdout, builtins.open = real_stdin, real_stdout, real_open
        results.append(1 if passed else 0)
        runtimes.append(runtime if end == "ok" else -1.0)
        ends.append(end)
    return {"results": results, "runtimes": runtimes, "ends": ends}


def run_stdio_tests(request: dict[str, Any]) -> dict[str, Any]:
    """``code_stdio``: one child for all the tests, ``max_execution_time × tests + 5`` in all."""
    tests, limit = request["tests"], float(request["max_execution_time"])
    budget = limit * len(tests) + 5.0
    value, how = _in_child(
        lambda: _grade_stdio(request["program"], tests, limit), budget, request["memory_mb"]
    )
    if how != "ok":
        n = len(tests)
        return {"results": [0] * n, "runtimes": [-1.0] * n, "ends": [how] * n}
    return dict(value)


def main() -> None:
    request = json.loads(sys.stdin.read())
    run = run_stdio_tests if request["stdio"] else run_assert_tests
    sys.stdout.write(json.dumps(run(request)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
