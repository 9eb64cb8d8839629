"""MLflow: one run per pipeline run holding params, metrics, artifacts and lineage tags.

Everything goes through `MlflowClient` with an explicit run id, so a stage in another process
(a Slurm job, a TRL callback) logs into the same run without global "active run" state. This is
the only module that imports mlflow.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from judgeflow.config import ConfigError, judgeflow_home
from judgeflow.config.redaction import (
    split_userinfo,
    strip_credentials,
    strip_credentials_within,
)
from judgeflow.config.secrets import MLFLOW_CREDENTIAL_ENV

_METRIC_NAME = re.compile(r"[^\w\-. /:]")
MAX_PARAM = 6000
_BATCH = 900

logger = logging.getLogger(__name__)


def resolve_tracking_uri(configured: str | None = None) -> str:
    """Config value, else $MLFLOW_TRACKING_URI, else a SQLite file under $JUDGEFLOW_HOME; never
    with credentials in it (`take_credentials`), so what it returns may be shown and stored."""
    uri = configured or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return take_credentials(uri)
    home = judgeflow_home()
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'mlflow.db'}"


def take_credentials(uri: str) -> str:
    """`uri` without its `user:password@`, which goes to MLFLOW_TRACKING_USERNAME and
    MLFLOW_TRACKING_PASSWORD of this process, where MLflow's client reads them for basic auth
    (they win over values already there). $MLFLOW_TRACKING_URI, when it is this URI, loses them
    too, so the processes this one starts (Slurm jobs included) inherit no credentials in a URL.

    MLflow sends basic auth only with both a user and a password, so a URI with one of them
    alone (`https://TOKEN@host`) is refused rather than used without authentication."""
    bare, user, password = split_userinfo(uri)
    if user is None:
        return uri
    if not user or not password:
        has, lacks = ("a user", "password") if user else ("a password", "user")
        raise ConfigError(
            f"the tracking URI {strip_credentials(bare)} has {has} (not shown) but no {lacks} "
            "before its host, and MLflow sends basic auth only with both: write user:password@, "
            "or give the URI without them and set MLFLOW_TRACKING_USERNAME and "
            "MLFLOW_TRACKING_PASSWORD, or, for a bearer token, MLFLOW_TRACKING_TOKEN"
        )
    os.environ["MLFLOW_TRACKING_USERNAME"] = user
    os.environ["MLFLOW_TRACKING_PASSWORD"] = password
    if os.environ.get("MLFLOW_TRACKING_URI") == uri:
        os.environ["MLFLOW_TRACKING_URI"] = bare
    return bare


def tracking_credentials() -> dict[str, str]:
    """MLflow's credential variables set in this process: what a job needs among its secrets
    to reach the same server (`judgeflow.stages.jobs` puts them in its input file)."""
    return {name: os.environ[name] for name in MLFLOW_CREDENTIAL_ENV if os.environ.get(name)}


class Tracker:
    """A handle on one MLflow run.

    Metrics survive an MLflow outage: what the server does not take (a transient failure: it is
    down, restarting, answering 5xx) is kept, in memory and in `spool` when one is given, and
    sent with the next call or by `flush`. Anything else (a bad request) raises at once.
    """

    def __init__(self, run_id: str, tracking_uri: str, *, spool: str | Path | None = None) -> None:
        self.run_id = run_id
        self.tracking_uri = take_credentials(tracking_uri)
        self.client = MlflowClient(self.tracking_uri)
        self.spool = Path(spool) if spool else None
        self._pending: list[Metric] = []
        self.outages = 0  # how many logging calls found the server unavailable

    @staticmethod
    def warm_up(tracking_uri: str | None = None) -> None:
        """Open MLflow's store for `tracking_uri` (imports, database engine, schema check) ahead
        of the first call: `judgeflow run` does it while Prefect's server starts. MLflow keeps
        the store, so the flow's clients reuse it."""
        _ = MlflowClient(resolve_tracking_uri(tracking_uri))._tracking_client.store

    @classmethod
    def start(
        cls,
        experiment: str,
        *,
        run_name: str | None = None,
        tags: Mapping[str, str] | None = None,
        tracking_uri: str | None = None,
    ) -> Tracker:
        uri = resolve_tracking_uri(tracking_uri)
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            location = None
            if uri.startswith("sqlite:"):  # keep artifacts beside the db, not in ./mlruns
                location = (judgeflow_home() / "mlartifacts" / experiment).absolute().as_uri()
            exp_id = client.create_experiment(experiment, artifact_location=location)
        else:
            exp_id = exp.experiment_id
        tags = {k: strip_credentials(str(v)) for k, v in (tags or {}).items()}
        run = client.create_run(exp_id, run_name=run_name, tags=tags)
        return cls(run.info.run_id, uri)

    @classmethod
    def attach(
        cls, run_id: str, tracking_uri: str | None = None, *, spool: str | Path | None = None
    ) -> Tracker:
        return cls(run_id, resolve_tracking_uri(tracking_uri), spool=spool)

    def sibling(self, run_id: str) -> Tracker:
        """Run `run_id` on this tracker's server (its URI is resolved already)."""
        return self if run_id == self.run_id else type(self)(run_id, self.tracking_uri)

    # -- logging

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Values as text, every URL in them without its credentials (as in `set_tags` and
        `log_dict`: whatever a stage passes, MLflow keeps no user:password@ or ?token=)."""
        items = [Param(k, strip_credentials(str(v))[:MAX_PARAM]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Finite numeric values only; names are sanitised to what MLflow accepts. Kept for
        later when the server is unavailable (see the class docstring)."""
        ts = _now_ms()
        self._pending += [
            Metric(metric_name(k), float(v), ts, int(step or 0))
            for k, v in metrics.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        ]
        self._send()

    @property
    def pending(self) -> int:
        """Metric values not yet accepted by the server."""
        return len(self._pending)

    def flush(self, timeout_s: float = 0.0, *, interval_s: float = 5.0) -> bool:
        """Send what is pending, trying for up to `timeout_s`; True when nothing is left."""
        import time

        deadline = time.monotonic() + timeout_s
        while not self._send() and time.monotonic() < deadline:
            time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))
        return not self._pending

    def _send(self) -> bool:
        from judgeflow.retries import is_transient

        while self._pending:
            batch = self._pending[:_BATCH]
            try:
                self.client.log_batch(self.run_id, metrics=batch)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                self.outages += 1
                self._write_spool()
                return False
            del self._pending[: len(batch)]
        if self.spool is not None:
            self.spool.unlink(missing_ok=True)
        return True

    def _write_spool(self) -> None:
        if self.spool is None:
            return
        from judgeflow.data.io import atomic_write_text

        lines = [json.dumps([m.key, m.value, m.timestamp, m.step]) for m in self._pending]
        atomic_write_text(self.spool, "\n".join(lines) + "\n")

    def replay_spool(self, spool: str | Path) -> int:
        """Send the metrics another process left in `spool` (a job whose server was down when
        it ended); returns how many. The file goes once the server has them all."""
        path = Path(spool)
        if not path.is_file():
            return 0
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        self._pending += [Metric(k, float(v), int(ts), int(step)) for k, v, ts, step in rows]
        self.spool = path
        self._send()
        if self._pending:
            raise ConnectionError(f"MLflow at {self.tracking_uri} still unavailable; {path} kept")
        return len(rows)

    def __call__(self, metrics: Mapping[str, float], step: int) -> None:
        """Lets a Tracker be passed where an engine wants a `metrics_sink`."""
        self.log_metrics(metrics, step)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        items = [RunTag(k, strip_credentials(str(v))) for k, v in tags.items() if v is not None]
        if items:
            self.client.log_batch(self.run_id, tags=items)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), artifact_path)
        else:
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_dict(self, data: Any, artifact_file: str) -> None:
        self.client.log_dict(self.run_id, strip_credentials_within(data), artifact_file)

    def log_table(self, rows: list[dict[str, Any]], artifact_file: str) -> None:
        if rows:
            columns = {k: [r.get(k) for r in rows] for k in rows[0]}
            self.client.log_table(self.run_id, data=columns, artifact_file=artifact_file)

    def log_image_file(self, path: str | Path, artifact_path: str) -> None:
        """A PNG (or any file) written elsewhere, under `artifact_path` in the run."""
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def finish(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status=status)

    # -- reading (tests, summaries)

    def metric_history(self, key: str) -> list[tuple[int, float]]:
        """(step, value) of every logged value of `key`, in step order."""
        history = self.client.get_metric_history(self.run_id, metric_name(key))
        return sorted((int(m.step), float(m.value)) for m in history)

    def run_name(self) -> str:
        return str(self.client.get_run(self.run_id).info.run_name)

    def url(self) -> str | None:
        """A browser link when the tracking URI is an HTTP server."""
        if not self.tracking_uri.startswith("http"):
            return None
        run = self.client.get_run(self.run_id)
        return f"{self.tracking_uri.rstrip('/')}/#/experiments/{run.info.experiment_id}/runs/{self.run_id}"


class BackgroundMetrics:
    """A metrics sink that never makes training wait for MLflow: values go to a queue, a
    thread logs them through `tracker` (which keeps what an unavailable server does not take).

    `close` waits up to its timeout for everything to reach the server; what has not by then is
    left in the tracker's spool file for the flow to send (`Tracker.replay_spool`).
    """

    def __init__(self, tracker: Tracker) -> None:
        import queue
        import threading

        self.tracker = tracker
        self._queue: queue.Queue[tuple[dict[str, float], int] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="mlflow-metrics", daemon=True)
        self._thread.start()

    def __call__(self, metrics: Mapping[str, float], step: int) -> None:
        self._queue.put((dict(metrics), step))

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            with self._lock:
                try:
                    self.tracker.log_metrics(*item)
                except Exception as exc:  # not transient: say so, keep training
                    logger.warning(
                        "[judgeflow] MLflow refused metrics of step %s: %s", item[1], exc
                    )

    def close(self, timeout_s: float = 120.0) -> bool:
        """Deliver what is queued and pending; True when the server has everything."""
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():  # stuck in MLflow's own retries: spool what we have
            return self._spool_now()
        with self._lock:
            return self.tracker.flush(timeout_s=max(0.0, timeout_s / 2))

    def _spool_now(self) -> bool:
        left: list[tuple[dict[str, float], int]] = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None:
                left.append(item)
        ts = _now_ms()
        extra = [
            Metric(metric_name(k), float(v), ts, int(step))
            for metrics, step in left
            for k, v in metrics.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        ]
        pending = list(self.tracker._pending) + extra  # a snapshot; the thread may still hold it
        if self.tracker.spool is not None and pending:
            from judgeflow.data.io import atomic_write_text

            lines = [json.dumps([m.key, m.value, m.timestamp, m.step]) for m in pending]
            atomic_write_text(self.tracker.spool, "\n".join(lines) + "\n")
        return not pending


def metric_name(key: str) -> str:
    return _METRIC_NAME.sub("_", key)


def git_commit(cwd: str | Path | None = None) -> str | None:
    """The code version for lineage: the checkout's commit, or None outside a git tree."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


__all__ = [
    "BackgroundMetrics",
    "Tracker",
    "git_commit",
    "metric_name",
    "resolve_tracking_uri",
    "take_credentials",
    "tracking_credentials",
]
