"""Verify untrusted text with bounded time, memory and size: what a policy wrote is paid 0 when
checking it would hang, raise or exhaust memory, and each such case is counted.

open-instruct's own math check can run for minutes on a long response (regexes that are
quadratic on it, sympy's ``simplify``) and bounds it with ``SIGALRM``, which only works in a
main thread. Here the checks run in a child process of their own: a response longer than
``max_chars`` is not checked at all (``too_long``); a check that outlives ``timeout_s`` gets the
child killed and replaced (``timeout``); the child's address space is capped at ``memory_mb``, so
a check that needs more fails there (``error``), as does one that raises.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import resource
import selectors
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from judgeflow.rewards.rlvr.math_answers import (
    ANTLR_RUNTIME,
    latex_backend,
    sympy_is_equiv,
    use_antlr_runtime,
)
from judgeflow.rewards.rlvr.verifiers import resolve, verify

logger = logging.getLogger(__name__)
_warned: list[str | None] = []  # the Lark warning, once per process

Status = Literal["ok", "too_long", "timeout", "error", "memory", "output"]
READY = "ready"
#: How long the child may take to start (imports, sympy's parser): not part of any check's time.
STARTUP_S = 300.0

__all__ = ["Outcome", "Status", "VerifierSandbox"]


@dataclass(frozen=True)
class Outcome:
    score: float
    status: Status
    detail: str = ""


def _serve(memory_mb: int, stdin: IO[str], stdout: IO[str]) -> None:
    """The child: one JSON request per line in, one JSON answer per line out."""
    limit = memory_mb * 2**20
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # Import sympy and build the LaTeX parser before any clock runs; a broken install (no lark)
    # fails here, loudly, instead of turning every math comparison into a silent 0.
    if not sympy_is_equiv("1", "1"):
        raise SystemExit("the math verifier's LaTeX parser does not work (is lark installed?)")
    print(json.dumps([READY, latex_backend()]), file=stdout, flush=True)
    for line in stdin:
        try:
            name, prediction, label = json.loads(line)
            answer: list[Any] = ["ok", verify(name, prediction, label)]
        except MemoryError:
            answer = ["error", f"over {memory_mb} MiB"]
        except Exception as exc:
            answer = ["error", f"{type(exc).__name__}: {exc}"[:300]]
        print(json.dumps(answer), file=stdout, flush=True)


@dataclass
class VerifierSandbox:
    """One child process that runs the checks; counts what was cut short (:attr:`counts`).

    The child is ``python -m judgeflow.rewards.rlvr.sandbox``, not a ``multiprocessing`` child,
    so it never re-runs the caller's main script (a training script without a main guard).
    Labels travel as JSON, as they come from JSON rows.
    """

    timeout_s: float = 10.0
    max_chars: int = 100_000
    memory_mb: int = 2048
    counts: Counter[str] = field(default_factory=Counter)
    #: how the child parses LaTeX (`math_answers.latex_backend`), once it has started
    latex_backend: str | None = field(default=None, init=False)
    _proc: subprocess.Popen[str] | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def score(self, name: str, prediction: str, label: Any) -> Outcome:
        """``verify(name, prediction, label)`` within the bounds; 0 with a status past them."""
        resolve(name)  # an unknown verifier is the caller's error, not the policy's
        if len(prediction) > self.max_chars:
            with self._lock:
                return self._count(Outcome(0.0, "too_long", f"{len(prediction):,} characters"))
        with self._lock:  # one request in flight: the answers come back in order
            return self._ask(name, prediction, label)

    def _ask(self, name: str, prediction: str, label: Any) -> Outcome:
        proc = self._child()
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps([name, prediction, label]) + "\n")
            proc.stdin.flush()
            line = self._read_line(proc, self.timeout_s)
        except (OSError, ValueError):  # the child died (the memory cap, a signal)
            line = ""
        if line is None:
            self._stop()
            return self._count(Outcome(0.0, "timeout", f"over {self.timeout_s:g}s"))
        if not line:
            self._stop()
            return self._count(Outcome(0.0, "error", "the verifier process died"))
        try:
            status, value = json.loads(line)
        except ValueError:  # not our protocol: a stray write; the child's state is unknown
            self._stop()
            return self._count(Outcome(0.0, "error", f"unreadable answer {line[:80]!r}"))
        if status == "ok":
            return self._count(Outcome(float(value), "ok"))
        return self._count(Outcome(0.0, "error", str(value)))

    def close(self) -> None:
        self._stop()

    def __enter__(self) -> VerifierSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _count(self, outcome: Outcome) -> Outcome:
        self.counts[outcome.status] += 1
        return outcome

    @staticmethod
    def _read_line(proc: subprocess.Popen[str], timeout_s: float) -> str | None:
        """The child's next line ("" when it died), or None when none came in ``timeout_s``."""
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout_s):
                return None
        return proc.stdout.readline()

    def _child(self) -> subprocess.Popen[str]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._stop()
        src = str(Path(__file__).resolve().parents[3])  # where `judgeflow` is importable from
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
        }
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "judgeflow.rewards.rlvr.sandbox",
                "--memory-mb",
                str(self.memory_mb),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        ready = self._read_line(self._proc, STARTUP_S) or ""
        try:
            said, backend = json.loads(ready)
        except ValueError:
            said, backend = None, None
        if said != READY:
            self._stop()
            raise RuntimeError(f"the verifier process did not start in {STARTUP_S:g}s")
        if backend != "antlr" and not _warned:
            _warned.append(backend)
            logger.warning(
                "math answers are parsed by sympy's Lark backend, not open-instruct's ANTLR one "
                "(%s is not installed apart: `judgeflow dev antlr-runtime`): a few answers, such "
                "as \\boxed{10,000} for 10000, are not paid as open-instruct pays them",
                ANTLR_RUNTIME,
            )
        self.latex_backend = backend
        return self._proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="judgeflow's verifier child (see VerifierSandbox)")
    parser.add_argument("--memory-mb", type=int, default=2048)
    args = parser.parse_args(argv)
    use_antlr_runtime()  # open-instruct's LaTeX parser, before anything imports antlr4
    # The protocol gets fd 1 to itself; anything else that prints (a library's warning on
    # stdout) goes to stderr instead of into the answers.
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _serve(args.memory_mb, sys.stdin, protocol)


if __name__ == "__main__":
    main()
