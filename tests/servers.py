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


class FlakyProxy:
    """An HTTP proxy on loopback (in this process) in front of `upstream`: it fails the first
    requests as `failures` says, in order, then forwards each request. A failure is "503" (an
    error status), "429" (Too Many Requests with `Retry-After: retry_after`, seconds or an HTTP
    date), "drop" (the connection closed without an answer) or "hang" (no answer until
    `release` is set). With `models`, it answers `GET …/models` itself with those model ids
    (another model behind the same URL: change it). `seen` lists, per request, (method, path,
    what it did, the Authorization header, the time it came); `failed` is set when the failures
    are spent."""

    def __init__(
        self,
        upstream: str,
        failures: list[str] | None = None,
        *,
        retry_after: int | str = 1,
        models: list[str] | None = None,
    ) -> None:
        import http.client
        import http.server
        import json
        import threading
        from urllib.parse import urlsplit

        self.failures = list(failures or [])
        self.models = models
        self.seen: list[tuple[str, str, str, str | None, float]] = []
        self.failed = threading.Event()
        self.release = threading.Event()
        target = urlsplit(upstream)
        outer = self
        lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the client's pooled connections

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    failure = outer.failures.pop(0) if outer.failures else None
                    if not outer.failures:
                        outer.failed.set()
                listed = outer.models is not None and self.path.rstrip("/").endswith("/models")
                did = failure or ("listed" if listed else "forwarded")
                auth = self.headers.get("Authorization")
                outer.seen.append((self.command, self.path, did, auth, time.monotonic()))
                if failure == "drop":  # read the request, then close without a word
                    self.close_connection = True
                    return
                if failure == "hang":
                    outer.release.wait(timeout=60)
                    self.close_connection = True
                    return
                if failure in ("503", "429"):
                    text = b"the judge is busy" if failure == "429" else b"the judge is restarting"
                    self.send_response(int(failure))
                    if failure == "429":
                        self.send_header("Retry-After", str(retry_after))
                    self._send(text, "text/plain")
                    return
                if listed:
                    data = [{"id": m, "object": "model"} for m in outer.models or []]
                    self.send_response(200)
                    self._send(json.dumps({"object": "list", "data": data}).encode(), "application/json")  # fmt: skip
                    return
                connection = http.client.HTTPConnection(target.hostname, target.port, timeout=300)
                try:
                    headers = {"Content-Type": self.headers.get("Content-Type") or "application/json"}  # fmt: skip
                    connection.request(self.command, self.path, body=body or None, headers=headers)
                    answer = connection.getresponse()
                    data = answer.read()
                    self.send_response(answer.status)
                    self._send(data, answer.getheader("Content-Type") or "application/json")
                finally:
                    connection.close()

            def _send(self, data: bytes, content_type: str) -> None:
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FlakyProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
