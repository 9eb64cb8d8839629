"""Shared fixtures: offline environment, the tiny model, a real MLflow server, a Prefect server.

Services are started once per session, on loopback, and stopped at the end.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")

from servers import free_port, stop, wait_http
from sessions import mark_this_session, processes

mark_this_session()
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    # Workers share the cores: each trains (in its process, stage jobs, Slurm jobs) on its share.
    # Two workers with torch's default of one thread per core would oversubscribe two cores
    # and run training several times slower; with one thread each, the tiny model's results are
    # the same (the demo prints the same tables).
    cores = len(os.sched_getaffinity(0))
    os.environ.setdefault(
        "OMP_NUM_THREADS", str(max(1, cores // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    )

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# The dev Slurm cluster's state stays in the checkout even when a test moves $JUDGEFLOW_HOME.
os.environ.setdefault("DEV_SLURM_DIR", str(REPO_ROOT / ".judgeflow" / "slurm"))


#: Processes a test session may start; none may outlive it.
OURS = re.compile(
    r"mlflow server|prefect server|uvicorn.*prefect|moto_server|raylet|gcs_server|ray\.scripts"
    r"|judgeflow\.stages\.jobs|submitit\.core\._submit|slurmctld|slurmd|slurmdbd|munged"
)


def _our_processes() -> dict[int, str]:
    return {p.pid: p.args for p in processes() if p.of_this_session and OURS.search(p.args)}


def _on_the_dev_cluster() -> tuple[str, ...]:
    """The test files that ask for the dev Slurm cluster (name its `slurm_cluster` fixture)."""
    here = Path(__file__).parent
    return tuple(
        str(path.relative_to(here.parent))
        for path in sorted((here / "cluster").glob("test_*.py"))
        if "slurm_cluster" in path.read_text(encoding="utf-8")
    )


#: Tests that share something beyond their own folders, run by one xdist worker one after another:
#: every test on the dev Slurm cluster (one cluster; each checks that no job is left in its
#: queue). The rest of tests/cluster (Ray started in the test's own process, pure functions) goes
#: to whichever worker is free.
SHARED = _on_the_dev_cluster()


def _expected_s(item: pytest.Item) -> float:
    """A slow test's `seconds` (`pytest.mark.slow(seconds=…)`: about what it took in a full run),
    0 when it names none."""
    marker = item.get_closest_marker("slow")
    return float(marker.kwargs.get("seconds", 0)) if marker else 0.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slow tests first, the longest of them (those that say how long they take) before the
    rest, each group in its collected order: the longest start as the run starts and the quick
    ones fill the workers' ends, so the workers finish at about the same time. (The suite keeps
    both cores busy: a four-minute test handed out last is four minutes on the end of the run.)"""
    items.sort(
        key=lambda item: (
            item.nodeid.split("::")[0] not in SHARED,  # the dev-cluster chain, the longest, first
            item.get_closest_marker("slow") is None,
            -_expected_s(item),
        )
    )


#: Modules whose tests share a costly module-scoped fixture (a Ray cluster, a served judge, a
#: training run to resume against): on one worker, the fixture starts once, not once a worker.
TOGETHER = {
    "tests/ray_backend/test_ray_backend.py",
    "tests/inference/test_served_judge_client.py",
    "tests/engines/test_trl_resume.py",
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """scripts/test runs three pytest-xdist workers: every test goes to whichever is free, except
    the `SHARED` ones (one after another, on one worker) and each `TOGETHER` module (its tests
    on one worker). Work is handed out in the collected order (`pytest_collection_modifyitems`),
    not xdist's by-size reordering. (xdist's own `--dist loadgroup` marks do not take under
    pytest 9.)"""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class SharedRunTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            if module in SHARED:
                return "dev-slurm-cluster"
            return module if module in TOGETHER else nodeid

    return SharedRunTogether(config, log)


class Timeline:
    """With `TEST_TIMELINE=FILE`, each test phase's worker, start and stop as a JSON line of
    FILE, written where every report arrives (xdist's controller, or the one process):
    `benchmarks/suite_timeline.py FILE` says where the suite's time went."""

    def __init__(self, path: str) -> None:
        self.out = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed at unconfigure)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # on xdist's controller: the worker that ran it
        line = {"worker": node.gateway.id if node is not None else "main", "test": report.nodeid,
                "when": report.when, "start": report.start, "stop": report.stop,
                "outcome": report.outcome}  # fmt: skip
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()

    def pytest_unconfigure(self) -> None:
        self.out.close()


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("TEST_TIMELINE") and not hasattr(config, "workerinput"):  # not a worker
        config.pluginmanager.register(Timeline(os.environ["TEST_TIMELINE"]), "timeline")


@pytest.fixture(scope="session", autouse=True)
def nothing_of_the_session_left() -> Iterator[None]:
    """After the whole session (its servers and the dev cluster stopped), no process it started
    (see `sessions`) is left. (scripts/test also checks, after pytest has exited, that no process
    and no file in the temporary directory outlives the tests.)"""
    before = set(_our_processes())
    yield
    deadline = time.monotonic() + 60
    while (left := {p: c for p, c in _our_processes().items() if p not in before}) and (
        time.monotonic() < deadline
    ):
        time.sleep(1)
    assert not left, "the test session left running:\n" + "\n".join(
        f"process {pid}: {cmd[:200]}" for pid, cmd in left.items()
    )


@pytest.fixture(autouse=True)
def judgeflow_logging_as_it_was() -> Iterator[None]:
    """A test that runs an entry point in this process (the CLI's callback, a job's main) sets up
    judgeflow's logging for the process (`judgeflow.log_setup`); the next test finds it undone."""
    logger = logging.getLogger("judgeflow")
    level, propagate, handlers = logger.level, logger.propagate, list(logger.handlers)
    yield
    logger.setLevel(level)
    logger.propagate = propagate
    logger.handlers[:] = handlers


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offline tiny Qwen2 model + tokenizer, built once per session."""
    from judgeflow.dev.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-model")


@pytest.fixture(scope="session")
def shared_mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `mlflow server` on SQLite with a local artifact root, one per session."""
    with running_mlflow_server(tmp_path_factory.mktemp("mlflow")) as uri:
        yield uri


@pytest.fixture
def mlflow_server(shared_mlflow_server: str) -> str:
    """The session's MLflow server with an empty model registry: a champion an earlier test
    registered points at weights in that test's temporary folder, which pytest has removed, and
    the gate rightly refuses to replace a champion it cannot find (ChampionNotFoundError)."""
    from mlflow import MlflowClient

    client = MlflowClient(shared_mlflow_server)
    for model in client.search_registered_models():
        client.delete_registered_model(model.name)
    return shared_mlflow_server


@pytest.fixture
def own_mlflow_server(tmp_path: Path) -> Iterator[str]:
    """A real `mlflow server` of this test alone: an empty model registry (no champion yet)."""
    with running_mlflow_server(tmp_path / "mlflow") as uri:
        yield uri


@contextmanager
def running_mlflow_server(root: Path) -> Iterator[str]:
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = root / "server.log"
    proc = subprocess.Popen(
        [
            str(BIN / "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--workers",
            "1",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{uri}/health", 90, proc, log)
        yield uri
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[str]:
    """A real Prefect server (SQLite) for the session, via Prefect's own test harness."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield str(PREFECT_API_URL.value())


@pytest.fixture
def judgeflow_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model: Path) -> Path:
    """A fresh $JUDGEFLOW_HOME holding (a link to) the session's tiny model."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "tiny-model").symlink_to(tiny_model, target_is_directory=True)
    monkeypatch.setenv("JUDGEFLOW_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3-compatible server on loopback; yields its endpoint URL (credentials are dummies)."""
    log = tmp_path_factory.mktemp("moto") / "server.log"
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{endpoint}/moto-api/", 60, proc, log)
        yield endpoint
    finally:
        stop(proc)


@pytest.fixture
def s3_env(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point s3fs/boto at the moto server for one test."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", s3_server)
    return s3_server
