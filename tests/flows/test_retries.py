"""Retries with sense: a transient failure is retried, bad data fails at once with the error.

Real Prefect and MLflow servers; the transient failure is a real HTTP data source (a local
http.server) that answers 503 to the first download of the file.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from flowtools import edit_row, task_runs
from mlflow.tracking import MlflowClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


class FlakyServer(http.server.ThreadingHTTPServer):
    """Serves one file; the first request for its bytes gets 503 Service Unavailable."""

    def __init__(self, data: bytes) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.data, self.failures_left, self.failed = data, 1, 0


class _Handler(http.server.BaseHTTPRequestHandler):
    server: FlakyServer

    def do_HEAD(self) -> None:
        self._reply(body=False)

    def do_GET(self) -> None:
        self._reply(body=True)

    def _reply(self, body: bool) -> None:
        srv = self.server
        if body and self.headers.get("Range") and srv.failures_left > 0:
            srv.failures_left -= 1
            srv.failed += 1
            self.send_error(503, "Service Unavailable")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(srv.data)))
        self.send_header("ETag", '"v1"')
        self.end_headers()
        if body:
            self.wfile.write(srv.data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky_source(sample_source: Path) -> Iterator[tuple[str, FlakyServer]]:
    server = FlakyServer(sample_source.read_bytes())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/data/{sample_source.name}", server
    finally:
        server.shutdown()
        server.server_close()


def _overrides(mlflow_server: str, source: str) -> list[str]:
    return [
        f"tracking.tracking_uri={mlflow_server}",
        f"data.source={source}",
        "data.val_source=null",  # validate on a split of that source
        "data.val_fraction=0.25",
        "evaluation.enabled=false",
        "grpo.max_steps=1",
        "sft.enabled=false",
        "register.enabled=false",
    ]


def test_transient_download_failure_is_retried(
    prefect_server: str,
    mlflow_server: str,
    judgeflow_home: Path,
    flaky_source: tuple[str, FlakyServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tasks.data
    from flows.judge_grpo import judge_grpo

    monkeypatch.setattr(
        tasks.data.download, "retry_delay_seconds", [0.1]
    )  # the retry, not the wait
    url, server = flaky_source
    summary = judge_grpo(mode="pointwise", profile="tiny", overrides=_overrides(mlflow_server, url))

    assert server.failed == 1  # the 503 did happen
    flow_run_id = (
        MlflowClient(mlflow_server)
        .get_run(summary["mlflow_run_id"])
        .data.tags["prefect.flow_run_id"]
    )
    (download,) = [r for r in task_runs(flow_run_id) if r.name.startswith("download[")]
    assert download.run_count == 2 and download.state.name == "Completed"
    # data.source is what was downloaded (the flaky server's file), and the switched-off stages
    # (sft.enabled, evaluation.enabled, register.enabled) did not run.
    assert summary["stages"] == {"download": "ran", "prepare": "ran", "train": "ran"}


def test_bad_data_fails_fast_naming_file_row_and_field(
    prefect_server: str, mlflow_server: str, judgeflow_home: Path, sample_source: Path
) -> None:
    from flows.judge_grpo import judge_grpo
    from judgeflow.data import DataValidationError

    edit_row(sample_source, 3, lambda r: r["output"][0]["answer"]["label"].update(helpfulness=7))
    state = judge_grpo(
        mode="pointwise",
        profile="tiny",
        overrides=_overrides(mlflow_server, sample_source.as_uri()),
        return_state=True,
    )

    assert state.is_failed()
    with pytest.raises(DataValidationError) as err:
        state.result()
    message = str(err.value)
    assert sample_source.name in message and "row 3" in message
    assert "output[0].answer.label.helpfulness" in message and "7" in message

    runs = {r.name.split("[", 1)[0]: r for r in task_runs(str(state.state_details.flow_run_id))}
    assert runs["prepare"].state.is_failed()
    assert runs["prepare"].run_count == 1  # not retried
    assert "train" not in runs
