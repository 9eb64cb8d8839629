"""Process trees: stopping one leaves nothing behind, also what escaped into new sessions (as
torchrun's workers do) and what a nested tree started after its own leader died."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
import uuid
from pathlib import Path

from judgeflow.cluster.procs import ProcessTree, run_tree

SRC = str(Path(__file__).resolve().parents[2] / "src")

# Starts a grandchild in a new session (like torchrun's workers), then waits.
ESCAPER = textwrap.dedent(
    """
    import subprocess, sys, time, pathlib
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    pathlib.Path(sys.argv[1]).touch()
    time.sleep(600)
    """
)
# Starts ESCAPER as a nested ProcessTree (like LLaMA-Factory inside a stage), then waits.
NESTER = textwrap.dedent(
    """
    import sys, time
    from judgeflow.cluster.procs import ProcessTree
    ProcessTree.start("inner", [sys.executable, "-c", sys.argv[2], sys.argv[1]], dict(__import__("os").environ))
    time.sleep(600)
    """
)


def _tagged(tag: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if tag.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _env(tag: str) -> dict[str, str]:
    return {**os.environ, "JF_TEST_TAG": tag, "PYTHONPATH": SRC}


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert path.exists()


def _gone(tag: str, timeout: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout
    while _tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _tagged(tag)


def test_stop_takes_down_what_escaped_into_a_new_session(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    ready = tmp_path / "ready"
    tree = ProcessTree.start("escaper", [sys.executable, "-c", ESCAPER, str(ready)], _env(tag))
    _wait_for(ready)
    assert len(tree.pids()) == 2  # the leader and the grandchild in its own session
    tree.stop(2, log=lambda _m: None)
    assert _gone(tag) == []


def test_stopping_an_outer_tree_finds_a_nested_tree_whose_leader_died(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    ready = tmp_path / "ready"
    outer = ProcessTree.start(
        "outer", [sys.executable, "-c", NESTER, str(ready), ESCAPER], _env(tag)
    )
    _wait_for(ready)
    assert len(_tagged(tag)) == 3
    os.kill(outer.proc.pid, signal.SIGKILL)  # no finally runs in the outer leader
    outer.proc.wait()
    outer.stop(2, log=lambda _m: None)
    assert _gone(tag) == []


def test_run_tree_returns_the_code_and_cleans_up_children_left_behind(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    leaver = (
        "import subprocess, sys; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
        "start_new_session=True); sys.exit(3)"
    )
    assert run_tree([sys.executable, "-c", leaver], _env(tag), grace_s=2, log=lambda _m: None) == 3
    assert _gone(tag) == []


def test_run_tree_hands_every_output_line_to_on_line(capfd) -> None:  # type: ignore[no-untyped-def]
    seen: list[str] = []
    code = run_tree(
        [sys.executable, "-c", "print('step:1 - a:1'); import sys; print('err', file=sys.stderr)"],
        dict(os.environ),
        on_line=seen.append,
    )
    assert code == 0
    assert seen == ["step:1 - a:1\n", "err\n"]
    assert "step:1 - a:1" in capfd.readouterr().out  # still in the job log
