"""judgeflow's logging: nothing on import; an entry point chooses what is shown and where (the
command line's levels, a stage job's bare lines on its output)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from judgeflow.log_setup import JOB_FORMAT, level_for, show_logs

core = logging.getLogger("judgeflow.stages")


def test_importing_judgeflow_sets_up_no_logging() -> None:
    """A library user's logging configuration decides: no handler, no level, records propagate."""
    code = (
        "import logging, judgeflow.stages.jobs, judgeflow.cluster.job, "
        "judgeflow.cluster.ray_bootstrap, judgeflow.tracking, judgeflow.registry.models\n"
        "l = logging.getLogger('judgeflow')\n"
        "print(l.level, l.handlers, l.propagate)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.strip() == "0 [] True"


@pytest.mark.parametrize(
    ("quiet", "verbose", "shown"),
    [
        (False, False, ["info", "warning"]),
        (True, False, ["warning"]),
        (False, True, ["debug", "info", "warning"]),
    ],
)
def test_the_levels_of_the_command_line(
    quiet: bool, verbose: bool, shown: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    show_logs(level_for(quiet=quiet, verbose=verbose))
    core.debug("debug")
    core.info("info")
    core.warning("warning")
    err = capsys.readouterr().err
    assert [line.rsplit(" - ", 1)[1] for line in err.splitlines()] == shown
    assert " | WARNING | judgeflow.stages - warning" in err  # shaped like Prefect's console


def test_quiet_still_makes_info_records_for_other_handlers() -> None:
    """`--quiet` quiets the terminal, not a flow run's log in Prefect."""
    show_logs(level_for(quiet=True))
    assert core.isEnabledFor(logging.INFO)
    assert not core.isEnabledFor(logging.DEBUG)


def test_set_up_twice_shows_each_record_once(capsys: pytest.CaptureFixture[str]) -> None:
    show_logs()
    show_logs(level_for(verbose=True))
    core.info("once")
    assert capsys.readouterr().err.count("once") == 1


def test_quiet_and_verbose_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="exclude"):
        level_for(quiet=True, verbose=True)


def test_a_job_shows_the_bare_line_on_its_output(capsys: pytest.CaptureFixture[str]) -> None:
    show_logs(stream="stdout", fmt=JOB_FORMAT)
    core.warning("[judgeflow] MLflow at %s unavailable", "http://mlflow")
    out, err = capsys.readouterr()
    assert (out, err) == ("[judgeflow] MLflow at http://mlflow unavailable\n", "")


def _stage_input(tmp_path: Path) -> Path:
    path = tmp_path / "train" / "input.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"stage": "train"}))
    return path


def test_the_stage_job_entry_point_logs_to_the_job_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from judgeflow.stages import jobs

    monkeypatch.setattr(jobs, "run_stage_job", lambda _path: core.info("a step"))
    assert jobs.main([str(_stage_input(tmp_path))]) == 0
    assert capsys.readouterr().out == (
        f"a step\nstage finished: {tmp_path / 'train' / 'result.json'}\n"
    )


def test_the_stage_job_says_why_it_stops_on_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from judgeflow.stages import jobs

    monkeypatch.setattr(jobs, "run_stage_job", lambda _path: os.kill(os.getpid(), signal.SIGTERM))
    with pytest.raises(SystemExit) as stopped:
        jobs.main([str(_stage_input(tmp_path))])
    assert stopped.value.code == 128 + signal.SIGTERM
    assert capsys.readouterr().out == "[judgeflow] got SIGTERM; tearing down\n"
