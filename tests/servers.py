"""Helpers for the real servers tests start on loopback: a free port, health polling, stopping;
a file server behind basic auth (`FilesBehindBasicAuth`)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: server exited ({proc.returncode}); see {log}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url}: not healthy after {timeout:.0f}s; see {log}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server we started, its whole process group, by PID."""
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


class Service:
    """A server process that can be stopped and started again with the same state (its port,
    database and files): a real outage and a real restart."""

    def __init__(self, command: list[str], health_url: str, log: Path, env: dict[str, str]) -> None:
        self.command, self.health_url, self.log, self.env = command, health_url, log, env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            self.command, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        wait_http(self.health_url, timeout, self.proc, self.log)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None


class FilesBehindBasicAuth:
    """An HTTP server on loopback (in this process) serving the files under `root` to requests
    with basic auth of one of `users` (user -> password), 401 to any other; `requests` lists
    (path, authorised)."""

    def __init__(self, root: Path, users: dict[str, str]) -> None:
        import base64
        import http.server
        import threading

        accepted = {"Basic " + base64.b64encode(f"{u}:{p}".encode()).decode() for u, p in users.items()}  # fmt: skip
        self.requests: list[tuple[str, bool]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self._reply(body=False)

            def do_GET(self) -> None:
                self._reply(body=True)

            def _reply(self, body: bool) -> None:
                authorised = self.headers.get("Authorization") in accepted
                outer.requests.append((self.path, authorised))
                path = root / self.path.split("?")[0].lstrip("/")
                if not authorised:
                    self.send_error(401, "Unauthorized")
                elif not path.is_file():
                    self.send_error(404, "Not Found")
                else:
                    data = path.read_bytes()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("ETag", f'"{len(data)}"')
                    self.end_headers()
                    if body:
                        self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FilesBehindBasicAuth:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def mlflow_models_serve(model_uri: str, tracking_uri: str, log: Path) -> tuple[Service, str]:
    """`mlflow models serve -m MODEL --env-manager local` on loopback, started and healthy (its
    `/ping`), as a user runs it; returns the service (stop it) and its base URL."""
    import sys

    port = free_port()
    mlflow = str(Path(sys.executable).parent / "mlflow")
    command = [mlflow, "models", "serve", "-m", model_uri, "--env-manager", "local",
               "-h", "127.0.0.1", "-p", str(port), "-w", "1"]  # fmt: skip
    # as in an activated virtualenv: the server runs `uvicorn` from PATH
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    # MLflow downloads the model into a temporary folder it never removes: the test's own
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": tracking_uri,
        "PATH": path,
        "TMPDIR": str(log.parent),
    }
    service = Service(command, f"http://127.0.0.1:{port}/ping", log, env)
    service.start(timeout=240)
    return service, f"http://127.0.0.1:{port}"


def invocations(base_url: str, payload: dict[str, object]) -> object:
    """POST a JSON payload to a model server's /invocations; its decoded answer."""
    import json

    request = urllib.request.Request(
        f"{base_url}/invocations", data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"}, method="POST",
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=300) as answer:
        return json.loads(answer.read())
