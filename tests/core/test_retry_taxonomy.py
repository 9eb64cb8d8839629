"""The retry taxonomy on the real exception classes of the libraries judgeflow talks to."""

from __future__ import annotations

import subprocess
from typing import Any

import httpx
import pytest
import requests
from botocore.exceptions import ClientError
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, TEMPORARILY_UNAVAILABLE
from submitit.core.utils import FailedSubmissionError

from judgeflow.cluster.job import JobFailed
from judgeflow.config import ConfigError
from judgeflow.data.errors import DataError, DataFileNotFoundError
from judgeflow.retries import is_transient, retried
from judgeflow.storage import SourceError


def _http(status: int) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", "http://mlflow.example/api")
    return httpx.HTTPStatusError("x", request=request, response=httpx.Response(status))


def _requests(status: int) -> requests.HTTPError:
    response = requests.Response()
    response.status_code = status
    return requests.HTTPError("x", response=response)


def _boto(status: int) -> ClientError:
    body = {"Error": {"Code": "X", "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(body, "GetObject")  # type: ignore[arg-type]


def _caused(outer: Exception, cause: BaseException) -> Exception:
    try:
        raise outer from cause
    except Exception as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (MlflowException("busy", error_code=TEMPORARILY_UNAVAILABLE), True),
        (MlflowException("no run", error_code=RESOURCE_DOES_NOT_EXIST), False),
        (_http(503), True),
        (_http(429), True),
        (_http(404), False),
        (_requests(502), True),
        (_requests(403), False),
        (_boto(503), True),
        (_boto(403), False),
        (httpx.ConnectError("refused"), True),
        (httpx.ReadTimeout("slow"), True),
        (FailedSubmissionError("sbatch: error: Slurm temporarily unable to accept job"), True),
        (JobFailed("scancelled", state="CANCELLED", retryable=True), True),
        (JobFailed("exited with code 1", state="FAILED"), False),
        (DataError("row 3, field 'label': not an int"), False),
        (DataFileNotFoundError("no such file"), False),
        (ConfigError("unknown key"), False),
        (FileNotFoundError("gone"), False),
        (ConnectionResetError("reset"), True),
        (TimeoutError("timed out"), True),
        (subprocess.CalledProcessError(1, ["sbatch"]), True),
        (_caused(SourceError("s3://b/k: cannot list"), _boto(503)), True),
        (_caused(SourceError("s3://b/k: cannot list"), _boto(404)), False),
        (ValueError("a bug"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_transient_or_not(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient


def _calls(*outcomes: BaseException | str) -> tuple[list[int], Any]:
    """A call that raises or returns each outcome in turn, and the list of its calls."""
    seen: list[int] = []

    def call() -> str:
        seen.append(len(seen))
        outcome = outcomes[len(seen) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return seen, call


def test_bookkeeping_is_retried_while_it_fails_transiently(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen, call = _calls(TimeoutError("slow"), _http(503), "recorded")
    assert retried(call, "record it", delays=(0, 0, 0)) == "recorded"
    assert len(seen) == 3
    assert "record it: TimeoutError (slow); again in 0s" in caplog.text


def test_a_deterministic_failure_is_not_retried_and_the_last_attempt_raises() -> None:
    seen, call = _calls(ValueError("a bug"), "never")
    with pytest.raises(ValueError, match="a bug"):
        retried(call, "record it", delays=(0, 0))
    assert len(seen) == 1
    seen, call = _calls(TimeoutError("1"), TimeoutError("2"), TimeoutError("3"))
    with pytest.raises(TimeoutError, match="3"):
        retried(call, "record it", delays=(0, 0))
    assert len(seen) == 3
