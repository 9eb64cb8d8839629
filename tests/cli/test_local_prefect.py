"""`judgeflow run`'s temporary Prefect server (judgeflow.cli.local_prefect) and the console
script around the typer app (judgeflow.cli.launch): the server answers on the port it was
handed, dies with the command however the command ends, and a server that cannot start is an
error that names its log. The cached rerun that these make fast is timed by
benchmarks/pipeline.py, not here; tests/test_quickstart.py runs the whole command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from waits import HANG_GUARD_S

from judgeflow.cli.local_prefect import LocalPrefectServer, ServerStartError

BIN = Path(sys.executable).parent

#: Starts the server as the console script does, says where it is, then waits to be killed.
STARTER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from judgeflow.cli.local_prefect import local_server, start_local_server
    start_local_server(Path(sys.argv[1]), quiet_console=False)
    server = local_server()
    server.wait_until_up()
    print(json.dumps({"pid": server._process.pid, "url": os.environ["PREFECT_API_URL"],
                      "up_after_s": server.up_after_s}), flush=True)
    time.sleep(600)
    """
)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return {**env, "JUDGEFLOW_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone too (its parent reaps it)
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.timeout(300)
def test_the_server_answers_and_dies_with_a_killed_command(tmp_path: Path) -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path)], env=_env(tmp_path),
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert starter.stdout is not None
        line = starter.stdout.readline()
        assert line, f"the starter exited ({starter.wait()}) before the server was up"
        info = json.loads(line)
        with urllib.request.urlopen(f"{info['url']}/health", timeout=30) as response:
            assert json.loads(response.read()) is True
        assert info["up_after_s"] > 0
        assert (tmp_path / "prefect" / "prefect.db").is_file()  # state under JUDGEFLOW_HOME
    finally:
        starter.send_signal(signal.SIGKILL)  # no exit handler runs
        starter.wait()
    deadline = time.monotonic() + HANG_GUARD_S
    while not _gone(info["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(info["pid"]), "the temporary Prefect server outlived a killed judgeflow run"


def test_a_server_that_cannot_start_names_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A database URL the server cannot open: it exits during start-up.
    monkeypatch.setenv(
        "PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://x@127.0.0.1:1/x"
    )
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    server = LocalPrefectServer(tmp_path)
    server.start()
    try:
        with pytest.raises(ServerStartError) as caught:
            server.wait_until_up()
    finally:
        server.stop()
    message = str(caught.value)
    assert str(server.log_path) in message and "PREFECT_API_URL" in message
    assert "exited with code" in message or "did not answer" in message


def test_the_console_script_keeps_exit_codes_and_output(tmp_path: Path) -> None:
    """The script ends the process itself after the exit handlers (no interpreter clean-up):
    what the command printed, and its status, must still come out whole."""
    env = _env(tmp_path)
    bad = subprocess.run([str(BIN / "judgeflow"), "config", "no-such-recipe"], env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "no-such-recipe" in bad.stdout + bad.stderr
    listed = subprocess.run([str(BIN / "judgeflow"), "recipes"], env=env,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert listed.returncode == 0 and "grpo-pointwise" in listed.stdout
    help_ = subprocess.run([str(BIN / "judgeflow"), "run", "--help"], env=env,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert help_.returncode == 0 and "recipe" in help_.stdout.lower()
    assert not (tmp_path / "prefect").exists()  # `run --help` starts no server
