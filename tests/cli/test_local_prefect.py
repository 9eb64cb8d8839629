"""`judgeflow run`'s temporary Prefect server (judgeflow.cli.local_prefect) and the console
script around the typer app (judgeflow.cli.launch): the server answers on the port it was
handed, dies with the command however the command ends, and a server that cannot start is an
error that names its log, and the server is started as Prefect starts its own. The cached rerun
that these make fast is timed by benchmarks/pipeline.py, not here; tests/test_quickstart.py runs
the whole command."""

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
from typing import Any
from unittest import mock

import pytest
from waits import HANG_GUARD_S

from judgeflow.cli.local_prefect import LocalPrefectServer, ServerStartError, prefect_settings

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


class _Exited:
    """Stands in for a started process: it has exited."""

    def poll(self) -> int:
        return 0

    def terminate(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> int:
        return 0


def _record_starts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], dict[str, Any]]]:
    """What `subprocess.Popen` is asked to start from now on (arguments, keywords); nothing runs."""
    calls: list[tuple[list[str], dict[str, Any]]] = []

    def popen(*args: Any, **kwargs: Any) -> _Exited:
        calls.append((list(kwargs.pop("args", None) or args[0]), kwargs))
        return _Exited()

    monkeypatch.setattr(subprocess, "Popen", popen)
    return calls


def _uvicorn_options(argv: list[str]) -> dict[str, Any]:
    """uvicorn's own reading of a command line (every option, defaults included)."""
    from uvicorn.main import main as uvicorn_command  # the click command `-m uvicorn` runs

    assert argv[1:3] == ["-m", "uvicorn"], argv
    return dict(uvicorn_command.make_context("uvicorn", argv[3:]).params)


def _resolved_settings(env: dict[str, str]) -> dict[str, Any]:
    """The Prefect settings a process started with exactly `env` resolves."""
    from prefect.settings import Settings

    with mock.patch.dict(os.environ, env, clear=True):
        return Settings().model_dump()


def test_the_server_is_started_as_prefect_starts_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """local_prefect copies Prefect's private start-up from SubprocessASGIServer: the uvicorn
    command, the app factory, and the internal variables (PREFECT__SERVER_EPHEMERAL, ...) that
    turn the server's background services off. A Prefect upgrade that changes them fails here,
    instead of judgeflow silently serving with Prefect's services on.

    Both starts are recorded at `subprocess.Popen`, nothing runs, in the environment that
    `judgeflow run` gives Prefect (its settings under a fresh JUDGEFLOW_HOME, no outside
    PREFECT_ variable, no prefect.toml or .env). Prefect's side is its own method,
    `SubprocessASGIServer._run_uvicorn_command`, with its settings read from that environment,
    as Prefect reads them when judgeflow imports it after setting them. What judgeflow changes
    on purpose, and nothing else, may differ:

    - `--host 127.0.0.1 --port N` -> `--fd K`: judgeflow binds the socket itself, on the same
      host, and hands it to uvicorn (the port is known before the server runs and cannot be
      taken in between); hence also `pass_fds`.
    - The server's output goes to PREFECT_HOME/temporary-server.log (`stdout`, `stderr`), not to
      the command's terminal; `stdin` is /dev/null.
    - `preexec_fn`: the server dies with the command (PR_SET_PDEATHSIG).
    - Prefect also exports its resolved settings (`to_environment_variables`) into the server's
      environment, under their current names (PREFECT_MEMO_STORE_PATH comes out as
      PREFECT_SERVER_MEMO_STORE_PATH, "false" as "False", ...). judgeflow has not imported
      Prefect and passes its environment as is; the server resolves the same settings from it,
      which is what is compared for those variables.
    - judgeflow removes PREFECT_API_URL from the server's environment; Prefect starts its server
      only when no API URL is set, so in the environment compared here it is absent on both sides.
    """
    from prefect.server.api import server as prefect_server
    from prefect.settings import Settings

    monkeypatch.chdir(tmp_path)
    starts = _record_starts(monkeypatch)
    # Prefect's settings as a process that imports Prefect now, in this environment, has them.
    monkeypatch.setattr(prefect_server, "get_current_settings", Settings)
    with mock.patch.dict(os.environ):
        for key in [key for key in os.environ if key.startswith("PREFECT_")]:
            del os.environ[key]
        prefect_settings(tmp_path, quiet_console=False)
        exported = set(Settings().to_environment_variables(exclude_unset=True))
        theirs = prefect_server.SubprocessASGIServer(port=8123)
        try:
            theirs._run_uvicorn_command()
        finally:
            theirs.stop()
        ours = LocalPrefectServer(Path(os.environ["PREFECT_HOME"]))
        ours.start()
        ours.stop()
    (prefect_argv, prefect_kwargs), (our_argv, our_kwargs) = starts

    # The command: the same interpreter, and uvicorn reads the same options from both.
    assert our_argv[0] == prefect_argv[0]
    prefect_options, our_options = _uvicorn_options(prefect_argv), _uvicorn_options(our_argv)
    host, port = prefect_options.pop("host"), prefect_options.pop("port")
    assert port == 8123 and prefect_options.pop("fd") is None
    assert ours.api_url.startswith(f"http://{host}:")  # the host judgeflow binds
    fd = our_options.pop("fd")
    our_options.pop("host"), our_options.pop("port")  # uvicorn's defaults: --fd replaces them
    assert our_options == prefect_options

    # The environment: equal, variable by variable, but for Prefect's re-exported settings...
    prefect_env, our_env = prefect_kwargs.pop("env"), our_kwargs.pop("env")
    differing = {
        key: (prefect_env.get(key), our_env.get(key))
        for key in prefect_env.keys() | our_env.keys()
        if prefect_env.get(key) != our_env.get(key)
    }
    assert {key: values for key, values in differing.items() if key not in exported} == {}
    # ... which the server resolves to the same settings from judgeflow's environment.
    assert _resolved_settings(our_env) == _resolved_settings(prefect_env)

    # Nothing else about the process: only what judgeflow adds on purpose.
    assert prefect_kwargs == {}
    assert set(our_kwargs) == {"stdin", "stdout", "stderr", "pass_fds", "preexec_fn"}
    assert our_kwargs["pass_fds"] == (fd,)
