"""One judging per output, and an output that can be written, known before any judging: a bad
location fails before the first verdict; a second judging of one output is refused at once,
naming the first; a lock left by a killed run is taken over; a judging interrupted with Ctrl-C
exits non-zero, leaves no half output and no lock, and the rerun gives every row once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from waits import HANG_GUARD_S

from judgeflow.data.errors import DataError, OutputWriteError
from judgeflow.inference.batch import judge_file
from judgeflow.inference.claim import OutputBusy, claim_output, lock_path, progress_path

ARGS = {"model": "m", "max_new_tokens": 8, "batch_size": 3}


class Replies:
    """`<score>n</score>` for the n-th prompt of a call; raises `stop` (e.g. KeyboardInterrupt)
    on call `stop_at`; counts its calls."""

    def __init__(self, stop_at: int | None = None, stop: BaseException | None = None) -> None:
        self.calls, self.stop_at, self.stop = 0, stop_at, stop or KeyboardInterrupt()

    def generate(self, prompts: Any, *, max_new_tokens: int, **_: Any) -> list[str]:
        if self.calls == self.stop_at:
            raise self.stop
        self.calls += 1
        return [f"<think>t</think><score>{i % 5}</score>" for i in range(len(prompts))]


def _rows(path: Path, n: int = 10) -> Path:
    path.write_text("".join(json.dumps({"query": "q", "response": f"r{i}"}) + "\n"
                            for i in range(n)))  # fmt: skip
    return path


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != "rows.jsonl")


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("a directory", "is a directory"),
        ("a missing folder", "its folder does not exist"),
        ("a device", "is not a regular file"),
        ("the data itself", "is the data being judged"),
        ("a link to the data", "is the data being judged"),
    ],
)
def test_an_output_that_cannot_be_written_fails_before_any_judging(
    tmp_path: Path, where: str, says: str
) -> None:
    data = _rows(tmp_path / "rows.jsonl")
    before = data.read_bytes()
    output = {
        "a directory": tmp_path / "out",
        "a missing folder": tmp_path / "missing" / "out.jsonl",
        "a device": Path("/dev/null"),
        "the data itself": data,
        "a link to the data": tmp_path / "link.jsonl",
    }[where]
    if where == "a directory":
        output.mkdir()
    elif where == "a link to the data":
        output.symlink_to(data)
    made = _left(tmp_path)
    replies = Replies()
    with pytest.raises(OutputWriteError) as caught:
        judge_file(replies, "pointwise", data, str(output), **ARGS)
    assert says in str(caught.value) and "Nothing was written there" in str(caught.value)
    assert replies.calls == 0 and _left(tmp_path) == made and data.read_bytes() == before
    assert Path("/dev/null").is_char_device()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_output_in_a_read_only_folder_fails_before_any_judging(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    with pytest.raises(OutputWriteError, match="not writable"):
        judge_file(
            Replies(), "pointwise", _rows(tmp_path / "rows.jsonl"), str(folder / "o"), **ARGS
        )


def test_a_failed_judging_leaves_nothing_it_made_when_nothing_was_judged(tmp_path: Path) -> None:
    data = _rows(tmp_path / "rows.jsonl")
    out = tmp_path / "out.jsonl"
    with pytest.raises(KeyboardInterrupt):
        judge_file(Replies(stop_at=0), "pointwise", data, str(out), **ARGS)
    assert _left(tmp_path) == []
    with pytest.raises(RuntimeError):
        judge_file(Replies(stop_at=0, stop=RuntimeError("GPU fell off")), "pointwise", data,
                   str(out), **ARGS)  # fmt: skip
    assert _left(tmp_path) == []


def test_an_interrupted_judging_keeps_its_verdicts_and_no_lock(tmp_path: Path) -> None:
    data = _rows(tmp_path / "rows.jsonl")
    out = tmp_path / "out.jsonl"
    with pytest.raises(KeyboardInterrupt):
        judge_file(Replies(stop_at=2), "pointwise", data, str(out), **ARGS)
    assert _left(tmp_path) == ["out.jsonl.judging.jsonl"]  # 6 verdicts, no output, no lock
    again = Replies()
    summary = judge_file(again, "pointwise", data, str(out), **ARGS)
    assert summary.resumed == 6 and again.calls == 2 and _left(tmp_path) == ["out.jsonl"]
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == [str(i) for i in range(10)]


def test_an_output_that_fails_at_the_end_keeps_the_verdicts_for_the_rerun(tmp_path: Path) -> None:
    data = _rows(tmp_path / "rows.jsonl")
    out = tmp_path / "out.jsonl"

    class TakesTheOutputAway(Replies):
        def generate(self, prompts: Any, **kwargs: Any) -> list[str]:
            out.mkdir(exist_ok=True)  # the location goes bad while judging
            return super().generate(prompts, **kwargs)

    with pytest.raises(OutputWriteError) as caught:
        judge_file(TakesTheOutputAway(), "pointwise", data, str(out), **ARGS)
    assert "run the same command again: it resumes from the 10 verdicts kept in" in str(
        caught.value
    )
    out.rmdir()
    again = Replies()
    assert judge_file(again, "pointwise", data, str(out), **ARGS).resumed == 10
    assert again.calls == 0 and _left(tmp_path) == ["out.jsonl"]


def _holder(output: Path) -> subprocess.Popen[str]:
    """Another process that claims `output` and holds it until it is killed."""
    code = (
        "import sys, time\n"
        "from judgeflow.inference.claim import claim_output\n"
        f"with claim_output({str(output)!r}):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(3600)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_second_judging_of_one_output_is_refused_naming_the_first(tmp_path: Path) -> None:
    data = _rows(tmp_path / "rows.jsonl")
    out = tmp_path / "out.jsonl"
    holder = _holder(out)
    try:
        replies = Replies()
        with pytest.raises(OutputBusy) as caught:
            judge_file(replies, "pointwise", data, str(out), **ARGS)
        assert f"pid {holder.pid} on " in str(caught.value) and replies.calls == 0
        assert not progress_path(str(out)).exists()
    finally:
        holder.kill()  # SIGKILL: no clean-up runs, its lock file stays
        holder.wait()
    assert lock_path(str(out)).exists()
    summary = judge_file(Replies(), "pointwise", data, str(out), **ARGS)  # takes the lock over
    assert summary.total == 10 and _left(tmp_path) == ["out.jsonl"]


def test_a_claim_is_reentrant_in_one_process_and_released_by_the_last(tmp_path: Path) -> None:
    out = str(tmp_path / "out.jsonl")
    with claim_output(out) as lock:
        assert lock.exists()
        with claim_output(out):
            pass
        assert lock.exists()
        summary = judge_file(Replies(), "pointwise", _rows(tmp_path / "rows.jsonl"), out, **ARGS)
        assert summary.total == 10 and lock.exists()
    assert not lock.exists()
    with pytest.raises(DataError), claim_output(out):
        raise DataError("bad row")
    assert not lock.exists()


#: Rows of the Ctrl-C test: enough that the first judging is still at it when the test, slowed
#: by a busy machine, stops it after its first verdicts.
ROWS = 120


@pytest.mark.slow
def test_judgeflow_judge_refuses_a_second_run_and_resumes_after_ctrl_c(
    tiny_model: Path, tmp_path: Path
) -> None:
    """A Ctrl-C ends the judging at the next batch, whatever Python code the signal lands in (a
    KeyboardInterrupt raised inside a `__del__` or a C callback is lost: the command notes the
    signal and stops at the next batch itself), with a non-zero exit and the verdicts kept."""
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"query": f"q{i}", "response": "r"}) + "\n"
                            for i in range(ROWS)))  # fmt: skip
    out = tmp_path / "verdicts.jsonl"
    progress = progress_path(str(out))
    command = [str(Path(sys.executable).parent / "judgeflow"), "judge", str(tiny_model),
               "--mode", "pointwise", "--data", str(data), "--output", str(out),
               "--set", "evaluation.batch_size=1", "--set", "evaluation.max_new_tokens=4"]  # fmt: skip
    env = {**os.environ, "JUDGEFLOW_HOME": str(tmp_path / "home")}
    env.pop("MLFLOW_TRACKING_URI", None)
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    deadline = time.monotonic() + HANG_GUARD_S
    while not (progress.exists() and progress.read_text().count("\n") >= 3):
        assert first.poll() is None and time.monotonic() < deadline, "no verdict recorded"
        time.sleep(0.01)
    first.send_signal(signal.SIGSTOP)  # held still while the second run tries
    try:
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    finally:
        first.send_signal(signal.SIGINT)  # Ctrl-C, delivered as it continues
        first.send_signal(signal.SIGCONT)
    assert second.returncode == 2, second.stdout + second.stderr
    said = " ".join((second.stdout + second.stderr).split())  # the terminal may fold it
    assert f"another judging is writing to it (pid {first.pid} on" in said
    _, err = first.communicate(timeout=HANG_GUARD_S)
    assert first.returncode != 0, err
    text = progress.read_text()
    recorded = text.count("\n") - 1
    assert not out.exists() and not lock_path(str(out)).exists() and 2 <= recorded < ROWS
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"({recorded} judged before, resumed)" in done.stdout
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == [str(i) for i in range(ROWS)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "rows.jsonl", "verdicts.jsonl"]
    # MLflow has the interrupted run, failed, and the one that finished, with the summary; the
    # refused one never started a run
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}")
    [experiment] = [e for e in client.search_experiments() if e.name == "judgeflow-judge"]
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.status for r in runs) == ["FAILED", "FINISHED"]
    [finished] = [r for r in runs if r.info.status == "FINISHED"]
    assert finished.data.metrics["judge/n"] == ROWS
    assert finished.data.tags["judgeflow.judge_output"] == str(out)
