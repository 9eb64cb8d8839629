"""MLflow down for part of a run: training goes on, and every metric reaches the server.

A real `mlflow server` is stopped while a real TRL training job (local backend, the same job a
flow submits) is running, and started again on the same port and database. Metrics logged while
it was down arrive afterwards: sent by the job once the server is back, or, when it is still
down as the job ends, left in the job's spool file and sent by the flow (`replay_spool`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from servers import Service, free_port

from judgeflow.cluster import submit
from judgeflow.config import load_config
from judgeflow.stages import (
    download_stage,
    metrics_spool,
    prepare_stage,
    start_tracking,
    train_job_spec,
)
from judgeflow.tracking import Tracker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

STEPS = 30


def _mlflow(root: Path) -> Service:
    """An `mlflow server` that can be stopped and started again with the same state."""
    port = free_port()
    command = [
        str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1",
        "--port", str(port), "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination", str(root / "artifacts"), "--workers", "1",
    ]  # fmt: skip
    service = Service(
        command, f"http://127.0.0.1:{port}/health", root / "server.log", dict(os.environ)
    )
    service.uri = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    return service


@pytest.fixture
def server(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = _mlflow(tmp_path / "mlflow")
    s.start()
    yield s
    s.stop()


def _step(spec_dir: Path) -> int:
    try:
        return int(json.loads((spec_dir / "progress.json").read_text())["step"])
    except (OSError, ValueError, KeyError):
        return 0


def _wait_step(spec_dir: Path, at_least: int, handle: object, timeout_s: float = 240) -> int:
    deadline = time.monotonic() + timeout_s
    while (step := _step(spec_dir)) < at_least:
        assert time.monotonic() < deadline, f"training did not reach step {at_least}"
        assert not handle.done(), "the job ended early"  # type: ignore[attr-defined]
        time.sleep(0.2)
    return step


def _training_job(server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model: Path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "tiny-model").symlink_to(tiny_model, target_is_directory=True)
    cfg = load_config(
        "grpo-pointwise",
        profile="tiny",
        overrides=[f"tracking.tracking_uri={server.uri}", "sft.enabled=false",
                   f"grpo.max_steps={STEPS}", "grpo.save_freq=1000", "grpo.test_freq=1000"],
    )  # fmt: skip
    data = prepare_stage(cfg, download_stage(cfg))
    run_id = start_tracking(cfg).run_id
    spec = train_job_spec(cfg, data, run_id)
    return cfg, run_id, spec, submit(spec, cfg.cluster)


def _steps_logged(uri: str, run_id: str) -> list[int]:
    return sorted(m.step for m in MlflowClient(uri).get_metric_history(run_id, "train/loss"))


def test_server_back_before_the_job_ends(
    server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model: Path
) -> None:
    cfg, run_id, spec, handle = _training_job(server, tmp_path, monkeypatch, tiny_model)
    workdir = Path(spec.workdir)
    down_at = _wait_step(workdir, 2, handle)
    server.stop()
    up_at = _wait_step(workdir, down_at + 4, handle)  # training went on without MLflow
    server.start()
    handle.result()
    assert up_at >= down_at + 4
    assert _steps_logged(server.uri, run_id) == list(range(1, STEPS + 1))
    assert not metrics_spool(cfg, run_id, "train").exists()


def test_server_still_down_when_the_job_ends(
    server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model: Path
) -> None:
    monkeypatch.setenv("JUDGEFLOW_MLFLOW_WAIT_S", "3")  # do not wait a minute for it here
    cfg, run_id, spec, handle = _training_job(server, tmp_path, monkeypatch, tiny_model)
    _wait_step(Path(spec.workdir), 2, handle)
    server.stop()
    handle.result()  # the job succeeds without MLflow
    spool = metrics_spool(cfg, run_id, "train")
    assert spool.is_file(), "what the server did not take is kept"
    server.start()
    sent = Tracker.attach(run_id, server.uri).replay_spool(spool)  # what the flow does
    assert sent > 0 and not spool.exists()
    assert _steps_logged(server.uri, run_id) == list(range(1, STEPS + 1))
