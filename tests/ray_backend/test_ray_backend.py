"""`cluster.backend: ray` against a real Ray cluster on this host (a head with its job server and
a second node, token authentication on): stages submitted as Ray Jobs, followed, cancelled,
re-attached; and a whole judge pipeline on TRL with LoRA whose stage jobs the cluster's job
list shows."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from judgeflow.cluster import JobFailed, JobSpec, ray_jobs
from judgeflow.cluster.job import PYTHON
from judgeflow.cluster.net import free_ports
from judgeflow.cluster.procs import ProcessTree
from judgeflow.cluster.ray_bootstrap import MIN_OBJECT_STORE_BYTES
from judgeflow.config import ClusterConfig, load_config
from judgeflow.samples import sample_path

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class RayCluster:
    address: str  # the job server (dashboard) URL
    token_path: Path

    def cluster(self, **kw: object) -> ClusterConfig:
        return ClusterConfig(
            backend="ray", ray_address=self.address, ray_token_path=str(self.token_path),
            gpus_per_node=0, poll_s=0.5, **kw,  # type: ignore[arg-type]
        )  # fmt: skip


def _ray_start(args: list[str], env: dict[str, str], log: Path) -> ProcessTree:
    command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", *args]
    with log.open("ab") as out:
        return ProcessTree.start("ray start", command, env, stdout=out)


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """A head (job server on) and a second node, each `ray start --block` on free ports, with a
    token only they are given: the tests' own process has none of Ray's auth variables."""
    root = tmp_path_factory.mktemp("raycluster")
    sockets = Path(tempfile.mkdtemp(prefix="jfray", dir="/tmp"))  # Ray's sockets: short paths
    token = root / "token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # what the cluster's processes and its jobs' make with tempfile (multiprocessing's pymp-*
    # folders, left by a process a test kills) goes where the teardown removes it
    (sockets / "tmp").mkdir()
    env["TMPDIR"] = str(sockets / "tmp")
    env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token),
            "RAY_USAGE_STATS_ENABLED": "0", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}  # fmt: skip
    started = []

    def node_args(name: str) -> list[str]:
        nm, om, agent, agent_grpc, rt_env, metrics = free_ports(6)
        return [
            "--node-ip-address=127.0.0.1", f"--temp-dir={sockets / name}",
            f"--node-manager-port={nm}", f"--object-manager-port={om}",
            f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--runtime-env-agent-port={rt_env}", f"--metrics-export-port={metrics}",
            f"--resources={json.dumps({name: 1})}", "--num-gpus=0",
            f"--object-store-memory={MIN_OBJECT_STORE_BYTES}", "--disable-usage-stats",
        ]  # fmt: skip

    try:
        for attempt in range(3):  # a port taken between free_ports and Ray's bind: new ports
            gcs, dash, client_port = free_ports(3)
            head = [
                "--head", f"--port={gcs}", f"--ray-client-server-port={client_port}", "--num-cpus=2",
                "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                f"--dashboard-port={dash}", *node_args(f"head{attempt}"),
            ]  # fmt: skip
            started.append(_ray_start(head, env, root / "head.log"))
            cluster = RayCluster(f"http://127.0.0.1:{dash}", token)
            client = _wait_for_job_server(
                cluster, started[-1], root / "head.log", last=attempt == 2
            )
            if client is not None:
                break
            started.pop().stop(30.0)
        for attempt in range(3):  # a second node that timed out starting (a busy machine): again
            worker = [f"--address=127.0.0.1:{gcs}", "--num-cpus=1", *node_args(f"worker{attempt}")]
            started.append(_ray_start(worker, env, root / "worker.log"))
            if _wait_for_nodes(client, 2, started, root / "worker.log", last=attempt == 2):
                break
            started.pop().stop(30.0)
        yield cluster
    finally:
        for tree in reversed(started):
            tree.stop(30.0)
        shutil.rmtree(sockets, ignore_errors=True)


def _wait_for_job_server(
    cluster: RayCluster, head: ProcessTree, log: Path, *, last: bool
) -> object | None:
    """The job server answering with the token; None when `ray start` exited (unless `last`:
    then that fails the fixture, as five minutes without an answer do: a hang guard only)."""
    deadline = time.monotonic() + 300
    while True:
        try:
            client = ray_jobs.client_for(cluster.cluster())
            client.list_jobs()
            return client
        except Exception as exc:  # not listening yet
            if head.proc.poll() is not None:
                assert not last, f"ray start --head exited:\n{log.read_text()[-3000:]}"
                return None
            assert time.monotonic() < deadline, f"no job server at {cluster.address}: {exc}"
            time.sleep(1)


def _wait_for_nodes(
    client: object, count: int, started: list[ProcessTree], log: Path, *, last: bool
) -> bool:
    """A job on the cluster counts the nodes alive: True when `count` are; False when the newest
    `ray start` exited (Ray's "timed out during startup" on a loaded machine), unless `last`:
    then that fails the fixture, as five minutes without the count do (a hang guard only)."""
    deadline = time.monotonic() + 300
    while True:
        script = "import ray; ray.init(); print(len([n for n in ray.nodes() if n['Alive']]))"
        job = client.submit_job(entrypoint=f"{sys.executable} -c {json.dumps(script)}")  # type: ignore[attr-defined]
        while not client.get_job_status(job).is_terminal():  # type: ignore[attr-defined]
            time.sleep(0.5)
        alive = client.get_job_logs(job).strip().splitlines()[-1:]  # type: ignore[attr-defined]
        if alive == [str(count)]:
            return True
        assert all(t.proc.poll() is None for t in started[:-1]), "the head's ray start exited"
        if started[-1].proc.poll() is not None:
            assert not last, f"ray start exited:\n{log.read_text()[-3000:]}"
            return False
        assert time.monotonic() < deadline, f"{alive} nodes alive, waiting for {count}"
        time.sleep(1)


def _spec(tmp_path: Path, name: str, code: str, **kw: object) -> JobSpec:
    return JobSpec(name=name, command=[PYTHON, "-c", code], workdir=str(tmp_path / name),
                   env={"JF_STAGE_NOTE": "public"}, ray=False, **kw)  # type: ignore[arg-type]  # fmt: skip


WRITES_RESULT = (
    "import json, os; from pathlib import Path; "
    "print('the stage ran', os.environ['JF_STAGE_NOTE'], flush=True); "
    "Path(os.environ['JUDGEFLOW_STAGE_DIR'], 'result.json').write_text(json.dumps({'ok': 1}))"
)


def test_a_stage_runs_as_a_ray_job_and_its_log_and_result_come_back(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    from judgeflow.cluster import watch

    lines: list[str] = []
    handle = ray_jobs.submit(_spec(tmp_path, "train", WRITES_RESULT), ray_cluster.cluster())
    assert handle.job_id.startswith("judgeflow-train-")
    assert watch(handle, on_log=lines.append, poll_s=0.5) == {"ok": 1}
    assert any("the stage ran public" in line for line in lines), lines
    assert handle.state.value == "COMPLETED"
    info = ray_jobs.client_for(ray_cluster.cluster()).get_job_info(handle.job_id)
    assert info.metadata == {"judgeflow.stage": "train"}
    assert info.runtime_env["env_vars"] == {
        "JF_STAGE_NOTE": "public", "RAY_JOB_STOP_WAIT_TIME_S": "60",
        "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1",
    }  # fmt: skip
    # The token went in the request's header only: not into the job, its log or its record.
    token = ray_cluster.token_path.read_text()
    assert token not in json.dumps(info.runtime_env) + "\n".join(lines)


def test_a_client_without_the_token_is_refused(ray_cluster: RayCluster) -> None:
    from ray.exceptions import AuthenticationError

    cluster = ray_cluster.cluster().model_copy(update={"ray_token_path": None})
    with pytest.raises((AuthenticationError, RuntimeError, ConnectionError)):
        ray_jobs.client_for(cluster).list_jobs()


def test_a_failed_command_fails_the_stage_unretried_with_its_reason(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    handle = ray_jobs.submit(_spec(tmp_path, "bad", "raise SystemExit(3)"), ray_cluster.cluster())
    with pytest.raises(JobFailed, match="exited with code 3") as failed:
        handle.result()
    assert failed.value.state == "FAILED" and not failed.value.retryable


def test_an_entrypoint_killed_without_a_word_fails_the_stage_retryably(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """The entrypoint SIGKILLed (as on a lost node) writes no reason: the stage is retried."""
    code = "import os, signal; os.kill(os.getppid(), signal.SIGKILL)"
    handle = ray_jobs.submit(_spec(tmp_path, "killed", code), ray_cluster.cluster())
    with pytest.raises(JobFailed) as failed:
        handle.result()
    assert failed.value.state == "FAILED" and failed.value.retryable


def test_cancel_stops_the_command_and_a_retried_task_follows_the_running_job(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """`attach` finds the job a task submitted while it runs (a retried task follows it instead
    of submitting another), and nothing once it has ended; a cancel stops the command's process,
    and the stage fails retryably (stopped from outside)."""
    pid_file = tmp_path / "pid"
    code = (f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
            "print('waiting', flush=True); time.sleep(600)")  # fmt: skip
    cluster = ray_cluster.cluster()
    spec = _spec(tmp_path, "train", code)
    handle = ray_jobs.submit(spec, cluster)
    deadline = time.monotonic() + 300
    while not pid_file.exists() or "waiting" not in handle.log_tail()[0]:
        assert not handle.done(), handle.log_tail()[0]
        assert time.monotonic() < deadline, "the command did not start"
        time.sleep(0.5)
    again = ray_jobs.attach(spec, cluster, handle.job_id)
    assert again is not None and again.job_id == handle.job_id

    handle.cancel()
    with pytest.raises(JobFailed) as stopped:
        handle.result()
    assert stopped.value.state == "CANCELLED" and stopped.value.retryable
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 120
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < deadline, f"the command (pid {pid}) outlived its cancelled job"
        time.sleep(0.5)
    assert ray_jobs.attach(spec, cluster, handle.job_id) is None


def test_a_cancelled_flow_run_stops_the_ray_jobs_it_submitted(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """The flow's on-cancellation hook (`tasks/train.py`) finds the run's jobs in the shared
    record and stops each through the job server of the run's cluster section."""
    from judgeflow.cluster import submitted

    cluster = ray_cluster.cluster(shared_dir=str(tmp_path / "shared"))
    code = "import time; print('waiting', flush=True); time.sleep(600)"
    handle = ray_jobs.submit(_spec(tmp_path, "train", code), cluster)
    submitted.record(cluster.shared_dir, "flow-run", backend="ray", job_id=handle.job_id,
                     stage="train")  # fmt: skip
    deadline = time.monotonic() + 300
    while "waiting" not in handle.log_tail()[0]:
        assert not handle.done() and time.monotonic() < deadline, handle.log_tail()[0]
        time.sleep(0.5)
    assert submitted.cancel_all(cluster.shared_dir, "flow-run", cluster) == [handle.job_id]
    assert handle.final_state(wait_s=120).value == "CANCELLED"


def test_render_prints_the_ray_job_submit_that_rays_own_cli_accepts(
    ray_cluster: RayCluster,
) -> None:
    from ray.dashboard.modules.job.cli import submit

    cfg = load_config("grpo-pointwise", profile="tiny", overrides=[
        "cluster.backend=ray", f"cluster.ray_address={ray_cluster.address}", "engine=trl"])  # fmt: skip
    from judgeflow.cli.dry_run import render_recipe

    rendered = render_recipe(cfg)
    line = next(x for x in rendered.splitlines() if x.startswith("ray job submit"))
    import shlex

    words = shlex.split(line)
    assert words[:3] == ["ray", "job", "submit"]
    context = submit.make_context("submit", words[3:])  # Ray's own option parser
    assert context.params["address"] == ray_cluster.address
    assert context.params["entrypoint"][:2] == (sys.executable, "-m")
    assert "judgeflow.cluster.ray_job_main" in context.params["entrypoint"]


#: What benchmarks/lora.py sets on top of the tiny profile (its LORA_SETS, held equal below).
LORA = [
    "sft.finetuning_type=lora",
    "sft.lora.rank=8",
    "sft.learning_rate=5.0e-3",
    "grpo.lora.rank=8",
    "grpo.learning_rate=1.0e-3",
]


def test_the_lora_benchmark_measures_the_setup_the_pipeline_test_runs() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from lora import LORA_SETS
    finally:
        sys.path.pop(0)
    assert list(LORA_SETS) == LORA


@pytest.mark.slow(seconds=220)
def test_a_lora_judge_pipeline_runs_as_ray_jobs_learns_and_its_champion_judges_rows(
    ray_cluster: RayCluster,
    prefect_server: str,
    mlflow_server: str,
    judgeflow_home: Path,
    tmp_path: Path,
) -> None:
    """Issue 37's two runs in one: grpo-pointwise on the tiny profile with the ray backend and
    TRL, with LoRA in SFT and in GRPO. SFT, GRPO and the three evaluations are Ray Jobs that
    succeeded; the token reaches neither MLflow nor a job's environment; SFT's adapter was
    merged before GRPO, GRPO trained only its adapter and saved it merged; the judge is better
    after GRPO than after SFT, registered, and its champion judges a file with `judgeflow judge`
    as well as it was measured."""
    from mlflow.tracking import MlflowClient
    from transformers import AutoModelForCausalLM

    from flows.judge_grpo import judge_grpo

    name = "judge-grpo-pointwise-ray-lora-flowtest"
    summary = judge_grpo(
        mode="pointwise",
        profile="tiny",
        overrides=[
            f"tracking.tracking_uri={mlflow_server}", f"register.model_name={name}",
            "cluster.backend=ray", f"cluster.ray_address={ray_cluster.address}",
            f"cluster.ray_token_path={ray_cluster.token_path}", "engine=trl",
            "cluster.poll_s=0.5", *LORA,
        ],
    )  # fmt: skip
    mlflow = MlflowClient(mlflow_server)
    run = mlflow.get_run(summary["mlflow_run_id"])
    assert run.data.tags["judgeflow.backend"] == "ray"

    # Every stage was a Ray Job of this run, and each succeeded.
    client = ray_jobs.client_for(ray_cluster.cluster())
    ours = {
        job.submission_id: job
        for job in client.list_jobs()
        if (job.runtime_env or {}).get("env_vars", {}).get("MLFLOW_RUN_ID") == run.info.run_id
    }
    stages = sorted(job.metadata["judgeflow.stage"] for job in ours.values())
    assert stages == ["evaluate-after", "evaluate-before", "evaluate-sft", "sft", "train"]
    assert {job.status.value for job in ours.values()} == {"SUCCEEDED"}
    token = ray_cluster.token_path.read_text()
    assert token not in json.dumps(run.data.params) + json.dumps(run.data.tags)
    assert all(token not in json.dumps(job.runtime_env) for job in ours.values())

    m = run.data.metrics
    # SFT trained an adapter and merged it: GRPO started from a whole model.
    sft_dir = Path(run.data.tags["judgeflow.sft.model_dir"])
    assert (sft_dir / "adapter" / "adapter_config.json").is_file()
    assert (sft_dir / "model.safetensors").is_file()
    assert run.data.tags["judgeflow.train.start_model"] == str(sft_dir)
    # GRPO trained only its adapter, and the checkpoint is that adapter merged.
    start = AutoModelForCausalLM.from_pretrained(judgeflow_home / "tiny-model")
    total = sum(p.numel() for p in start.parameters())
    assert 0 < m["train/summary/trainable_params"] < total / 5
    final = Path(summary["checkpoint"])
    assert (final / "model.safetensors").is_file() and not (final / "adapter_config.json").exists()
    # It learns: SFT taught the format, GRPO made the judge better than its SFT start.
    assert m["after/format_failure_rate"] <= 0.10
    assert m["after/exact_match"] > m["sft/exact_match"]
    assert m["after/reward_mean"] > m["sft/reward_mean"]
    registered = summary["registry"]["final"]
    assert registered["name"] == name and registered["promoted"]

    # The champion judges a file like any other model.
    val = sample_path("tinyjudge_pointwise_val.jsonl")
    out = tmp_path / "verdicts.jsonl"
    judged = subprocess.run(
        [str(Path(sys.executable).parent / "judgeflow"), "judge", f"models:/{name}@champion",
         "--data", str(val), "--output", str(out)],
        env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_server},
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert judged.returncode == 0, judged.stdout + judged.stderr
    rows = [json.loads(line) for line in Path(val).read_text().splitlines()]
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(verdicts) == len(rows)
    labels = [r["output"][0]["answer"]["label"]["helpfulness"] for r in rows]
    agree = sum(v.get("score") == label for v, label in zip(verdicts, labels, strict=True))
    assert agree / len(rows) == pytest.approx(m["after/exact_match"])  # what it was measured at


def test_without_a_job_server_the_error_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ValueError, match=r"set cluster.ray_address \(e.g. http://head:8265"):
        ray_jobs.job_server(ClusterConfig(backend="ray"))
    monkeypatch.setenv("RAY_ADDRESS", "http://elsewhere:8265")
    assert ray_jobs.job_server(ClusterConfig(backend="ray")) == "http://elsewhere:8265"
    missing = ClusterConfig(backend="ray", ray_token_path="/nowhere/token")
    with pytest.raises(ValueError, match="cluster.ray_token_path=/nowhere/token: cannot read"):
        ray_jobs.client_for(missing)


def test_a_judge_served_in_the_allocation_is_refused_under_ray_with_what_to_do() -> None:
    from judgeflow.config import ConfigError

    with pytest.raises(ConfigError, match="serve it on the Ray cluster yourself"):
        load_config("rlvr-judged", overrides=["cluster.backend=ray", "engine=verl",
                                              "reward.judge=/models/judge", "reward.judge_mode=pointwise",
                                              "grpo.reward_manager=batch"])  # fmt: skip


def test_a_verl_driver_reserves_no_gpu_and_a_trl_stage_reserves_the_nodes() -> None:
    from judgeflow.stages import train_job_spec
    from judgeflow.stages.common import PreparedData

    data = PreparedData(train_file="/t.parquet", val_file="/v.parquet", report_file="/r", report={})
    for engine, gpus in (("verl", None), ("trl", 4)):
        cfg = load_config("grpo-pointwise", overrides=[
            "cluster.backend=ray", "cluster.gpus_per_node=4", f"engine={engine}",
            "cluster.ray_address=http://head:8265"])  # fmt: skip
        spec = train_job_spec(cfg, data, "run", dry_run=True)
        kwargs = ray_jobs.submission(spec, cfg.cluster, "judgeflow-train-x")
        assert kwargs.get("entrypoint_num_gpus") == gpus, engine


@pytest.mark.parametrize(
    ("raised", "becomes"),
    [
        (RuntimeError("Request failed with status code 404: Job x does not exist."), LookupError),
        (RuntimeError("Request failed with status code 500: internal error."), ConnectionError),
        (RuntimeError("Request failed with status code 503: unavailable."), ConnectionError),
        (OSError("connection refused"), ConnectionError),
        (RuntimeError("Request failed with status code 400: bad request."), RuntimeError),
    ],
)
def test_job_server_errors_are_told_apart(raised: Exception, becomes: type) -> None:
    """What Ray's SDK raises for a refused request (a RuntimeError naming the status code):
    a job the server does not know, a passing server error (retried by the flow, and a poll
    that meets one goes on), and a request that would fail again."""
    from judgeflow.retries import is_transient

    def call() -> None:
        raise raised

    with pytest.raises(becomes) as caught:
        ray_jobs._request("ask", call)
    assert type(caught.value) is becomes
    assert is_transient(caught.value) == (becomes is ConnectionError)


def test_ray_runtime_env_is_checked_by_ray_and_joins_the_stage_jobs() -> None:
    import judgeflow
    from judgeflow.config import ConfigError
    from judgeflow.stages import train_job_spec
    from judgeflow.stages.common import PreparedData

    package = str(Path(judgeflow.__file__).parent)  # Ray checks a local module path exists
    extra = f"{{py_modules: [{package}], env_vars: {{HF_HOME: /data/hf}}}}"
    cfg = load_config("grpo-pointwise", overrides=[
        "cluster.backend=ray", "engine=trl", f"cluster.ray_runtime_env={extra}"])  # fmt: skip
    data = PreparedData(train_file="/t.parquet", val_file="/v.parquet", report_file="/r", report={})
    env = ray_jobs.submission(train_job_spec(cfg, data, "run", dry_run=True), cfg.cluster, "x")[
        "runtime_env"
    ]
    assert env["py_modules"] == [package]
    assert env["env_vars"]["HF_HOME"] == "/data/hf" and "MLFLOW_RUN_ID" in env["env_vars"]
    for bad, said in [
        (
            "{py_module: [/x]}",
            "not a field of Ray's runtime environment (did you mean py_modules?)",
        ),
        ("{pip: 5}", "Ray refuses it"),
        ("{env_vars: {HF_TOKEN: hf_abc}}", "looks like a secret"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(said)):
            load_config(
                "grpo-pointwise",
                overrides=["cluster.backend=ray", f"cluster.ray_runtime_env={bad}"],
            )
