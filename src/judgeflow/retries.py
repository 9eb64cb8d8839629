"""Which failures are worth retrying: the same call would likely succeed later.

Transient: network and filesystem hiccups, HTTP 5xx / 429 from MLflow, Prefect, S3 or a data
server, a Slurm submission sbatch refused, a job killed from outside (`JobFailed.retryable`).
Deterministic: bad data, bad config, a source that does not exist, a job that failed by itself.
Exceptions are matched by class (the libraries' own), and `raise … from` causes are followed.
"""

from __future__ import annotations

import functools
import logging
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

import httpx
from submitit.core.utils import FailedSubmissionError

from judgeflow.cluster.job import JobFailed
from judgeflow.config import ConfigError
from judgeflow.data.errors import DataError

T = TypeVar("T")
P = ParamSpec("P")
logger = logging.getLogger("judgeflow.retries")

#: Classes that are transient whatever their message: sbatch refusing a submission, and the
#: transport errors of httpx (the Prefect client's HTTP library).
TRANSIENT_CLASSES: tuple[type[BaseException], ...] = (FailedSubmissionError, httpx.TransportError)


def http_status(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (aiohttp, httpx, requests, botocore, MLflow)."""
    for attr in ("status", "status_code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    if isinstance(value, int):
        return value
    if isinstance(response, dict):  # botocore ClientError
        value = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(value, int):
            return value
    get_status = getattr(exc, "get_http_status_code", None)  # MlflowException
    if callable(get_status):
        try:
            status = get_status()
        except Exception:
            return None
        return status if isinstance(status, int) else None
    return None


def is_transient(exc: BaseException) -> bool:
    """Would the same call succeed if tried again later? Follows `raise … from` causes."""
    if isinstance(exc, JobFailed):
        return exc.retryable
    if isinstance(exc, DataError | ConfigError):
        return False
    status = http_status(exc)
    if status is not None:
        return status >= 500 or status == 429
    if isinstance(
        exc, FileNotFoundError | PermissionError | IsADirectoryError | NotADirectoryError
    ):
        return False
    if isinstance(exc, ConnectionError | TimeoutError | OSError | subprocess.CalledProcessError):
        return True
    if isinstance(exc, TRANSIENT_CLASSES):
        return True
    cause = exc.__cause__
    if cause is not None and cause is not exc:
        return is_transient(cause)  # e.g. SourceError("cannot list …") from a 503
    return False


#: Delays (seconds) between attempts: short enough for a hiccup, long enough for a restart.
RETRY_DELAYS = (2.0, 10.0, 30.0)


def retried(call: Callable[[], T], what: str, delays: Sequence[float] = RETRY_DELAYS) -> T:
    """`call()`, tried again after each delay while it fails transiently (`is_transient`): for
    the bookkeeping a pipeline does between its steps (MLflow records, summaries)."""
    for delay in (*delays, None):
        try:
            return call()
        except Exception as exc:
            if delay is None or not is_transient(exc):
                raise
            logger.warning("%s: %s (%s); again in %gs", what, type(exc).__name__, exc, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")  # the last attempt returned or raised


def retrying(what: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Decorate a bookkeeping function so every call is `retried` (`what` names it in the
    warning): the caller says what to record, not how to survive MLflow restarting."""

    def decorate(function: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(function)
        def call(*args: P.args, **kwargs: P.kwargs) -> T:
            return retried(lambda: function(*args, **kwargs), what)

        return call

    return decorate
