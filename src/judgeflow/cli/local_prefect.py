"""Prefect's temporary local server for `judgeflow run`, started first thing.

Without `PREFECT_API_URL`, Prefect starts a temporary server (uvicorn serving
`prefect.server.api.server:create_app`) when the flow begins, after the CLI has imported
everything, and waits for it: seconds of a cached rerun's wall time spent twice, one after the
other. `judgeflow run` starts the same server process, with the same settings, before it imports
anything heavy, points `PREFECT_API_URL` at it, and waits for it only when the flow is about to
begin; the server comes up on one core while the CLI imports on the other. Nothing here imports
Prefect (that would cost the seconds this saves): Prefect's package is located, not imported.

The server stops when the command ends (also on Ctrl-C and on errors), and dies with the CLI if
the CLI is killed (PR_SET_PDEATHSIG), where Prefect's own would be left running.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from judgeflow.parent_death import die_with_parent

#: How long `judgeflow run` waits for the server: a cold first start on a slow machine (no
#: bytecode cached yet) has taken longer than Prefect's own 20 s default. A value set in
#: PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS wins.
STARTUP_TIMEOUT_S = 300
TIMEOUT_ENV = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"


class ServerStartError(RuntimeError):
    """The temporary server did not come up; the message says where its log is."""


def prefect_settings(home: Path, *, quiet_console: bool) -> None:
    """Prefect's state under JUDGEFLOW_HOME, a start-up wait sized for a slow machine, and (on a
    terminal, where progress bars show the run) only warnings from Prefect's console logger;
    the task logs still reach the Prefect server. Explicit user settings win."""
    prefect_home = Path(os.environ.setdefault("PREFECT_HOME", str(home / "prefect")))
    os.environ.setdefault("PREFECT_MEMO_STORE_PATH", str(prefect_home / "memo_store.toml"))
    os.environ.setdefault("PREFECT_LOCAL_STORAGE_PATH", str(prefect_home / "storage"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")  # Prefect's client telemetry: local stays local
    os.environ.setdefault(TIMEOUT_ENV, str(STARTUP_TIMEOUT_S))
    if quiet_console:
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    prefect_home.mkdir(parents=True, exist_ok=True)


def _log(message: str) -> None:
    """A line shaped like Prefect's console log, on stderr (hidden on a terminal, where Prefect's
    console logger shows only warnings)."""
    if os.environ.get("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL") == "WARNING":
        return
    print(f"{dt.datetime.now():%H:%M:%S.%f}"[:12] + f" | INFO    | judgeflow - {message}",
          file=sys.stderr, flush=True)  # fmt: skip


class LocalPrefectServer:
    """One temporary Prefect API server process for this command."""

    def __init__(self, prefect_home: Path) -> None:
        spec = importlib.util.find_spec("prefect")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("Prefect is not installed in this environment")
        self._app_dir = str(Path(next(iter(spec.submodule_search_locations))).parent)
        self.log_path = prefect_home / "temporary-server.log"
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._started = 0.0
        self._answered = threading.Event()  # up, or gone
        self._halt = threading.Event()
        self._reported = False
        self.up_after_s: float | None = None  # seconds from start() to the first /health answer

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def start(self) -> None:
        """Bind a free port here and hand the listening socket to uvicorn (`--fd`): the port
        is known before the server runs, and no other process can take it in between."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.port = int(sock.getsockname()[1])
        command = [sys.executable, "-m", "uvicorn", "--app-dir", self._app_dir, "--factory",
                   "prefect.server.api.server:create_app", "--fd", str(sock.fileno()),
                   "--log-level", "error", "--lifespan", "on"]  # fmt: skip
        # What Prefect's SubprocessASGIServer sets: no UI, an ephemeral server's services.
        # Copied, not imported (importing it costs the seconds this module saves):
        # tests/cli/test_local_prefect.py fails when Prefect's own command or environment
        # differs from this one, and lists what judgeflow changes on purpose.
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
               "PREFECT__SERVER_FINAL": "1"}  # fmt: skip
        env.pop("PREFECT_API_URL", None)
        with sock, self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                pass_fds=(sock.fileno(),),
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )  # fmt: skip
        self._started = time.monotonic()
        _log(f"Starting temporary server on http://127.0.0.1:{self.port}")
        threading.Thread(target=self._watch, args=(self._process,), daemon=True).start()

    def _watch(self, process: subprocess.Popen[bytes]) -> None:
        """In a thread from start() on: poll /health until the server answers or exits, so the
        moment it came up is known even while the CLI is busy importing."""
        while process.poll() is None and not self._halt.is_set():
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=60) as response:
                    if response.status == 200:
                        self.up_after_s = time.monotonic() - self._started
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            self._halt.wait(0.05)
        self._answered.set()

    def wait_until_up(self) -> None:
        """Block until the API answers /health. A server that exits or does not answer in time
        is an error that shows its log's end and says what to do."""
        timeout = float(os.environ.get(TIMEOUT_ENV) or STARTUP_TIMEOUT_S)
        if not self._answered.wait(max(0.0, self._started + timeout - time.monotonic())):
            self.stop()
            raise ServerStartError(self._failure(f"did not answer within {timeout:.0f} s"))
        if self.up_after_s is None:
            code = self._process.poll() if self._process else None
            self.stop()
            raise ServerStartError(self._failure(f"exited with code {code}"))
        if not self._reported:
            self._reported = True
            _log(f"Temporary server up after {self.up_after_s:.1f} s")

    def _failure(self, what: str) -> str:
        tail = ""
        with contextlib.suppress(OSError):
            tail = "\n" + "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])
        return (
            f"Prefect's temporary server {what} (its log: {self.log_path}). Wait longer "
            f"(export {TIMEOUT_ENV}=600) or start a server once and point at it: "
            f"`PREFECT_HOME={os.environ.get('PREFECT_HOME', '')} prefect server start`, then "
            f"export PREFECT_API_URL=http://127.0.0.1:4200/api{tail}"
        )

    def stop(self) -> None:
        self._halt.set()
        process, self._process = self._process, None
        if process is None:
            return
        _log(f"Stopping temporary server on http://127.0.0.1:{self.port}")
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_server: LocalPrefectServer | None = None


def start_local_server(home: Path, *, quiet_console: bool) -> LocalPrefectServer | None:
    """Prefect's settings under `home`, and (unless PREFECT_API_URL names a server, or Prefect
    is already imported and so has read its settings) the temporary server, started now and
    stopped when this process exits; `PREFECT_API_URL` points at it. Idempotent."""
    global _server
    prefect_settings(home, quiet_console=quiet_console)
    if _server is not None or os.environ.get("PREFECT_API_URL") or "prefect" in sys.modules:
        return _server
    server = LocalPrefectServer(Path(os.environ["PREFECT_HOME"]))
    server.start()
    atexit.register(server.stop)
    os.environ["PREFECT_API_URL"] = server.api_url
    _server = server
    return server


def local_server() -> LocalPrefectServer | None:
    """The temporary server this command started, if any."""
    return _server
