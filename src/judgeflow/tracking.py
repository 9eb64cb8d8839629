"""MLflow: one run per pipeline run holding params, metrics, artifacts and lineage tags.

Everything goes through `MlflowClient` with an explicit run id, so a stage in another process
(a Slurm job, a TRL callback) logs into the same run without global "active run" state. This is
the only module that imports mlflow.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from judgeflow.config import judgeflow_home

_METRIC_NAME = re.compile(r"[^\w\-. /:]")
_MAX_PARAM = 6000
_BATCH = 900


def resolve_tracking_uri(configured: str | None = None) -> str:
    """Config value, else $MLFLOW_TRACKING_URI, else a SQLite file under $JUDGEFLOW_HOME."""
    uri = configured or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    home = judgeflow_home()
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'mlflow.db'}"


class Tracker:
    """A handle on one MLflow run."""

    def __init__(self, run_id: str, tracking_uri: str) -> None:
        self.run_id = run_id
        self.tracking_uri = tracking_uri
        self.client = MlflowClient(tracking_uri)

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
        run = client.create_run(exp_id, run_name=run_name, tags=dict(tags or {}))
        return cls(run.info.run_id, uri)

    @classmethod
    def attach(cls, run_id: str, tracking_uri: str | None = None) -> Tracker:
        return cls(run_id, resolve_tracking_uri(tracking_uri))

    # -- logging

    def log_params(self, params: Mapping[str, Any]) -> None:
        items = [Param(k, str(v)[:_MAX_PARAM]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Finite numeric values only; names are sanitised to what MLflow accepts."""
        ts = _now_ms()
        items = [
            Metric(metric_name(k), float(v), ts, int(step or 0))
            for k, v in metrics.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        ]
        for i in range(0, len(items), _BATCH):
            self.client.log_batch(self.run_id, metrics=items[i : i + _BATCH])

    def __call__(self, metrics: Mapping[str, float], step: int) -> None:
        """Lets a Tracker be passed where an engine wants a `metrics_sink`."""
        self.log_metrics(metrics, step)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        items = [RunTag(k, str(v)) for k, v in tags.items() if v is not None]
        if items:
            self.client.log_batch(self.run_id, tags=items)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), artifact_path)
        else:
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_dict(self, data: Any, artifact_file: str) -> None:
        self.client.log_dict(self.run_id, data, artifact_file)

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


__all__ = ["Tracker", "git_commit", "metric_name", "resolve_tracking_uri"]
