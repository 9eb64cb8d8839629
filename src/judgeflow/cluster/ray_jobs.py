"""The `ray` backend: each stage a Ray Job on a cluster the user already runs.

OpenJudge's own workflow (and KubeRay's) is a Ray cluster started once, `ray job submit` per
training run. Here a stage's job is submitted with Ray's `JobSubmissionClient` to
`cluster.ray_address` (the job server, `http://head:8265`; unset: `RAY_ADDRESS`). Its
entrypoint is `PYTHON -m judgeflow.cluster.ray_job_main <stage folder>/ray_job.json`: the
cluster runs the judgeflow the nodes have (`cluster.python`, a venv or an image's interpreter on
every node; unset: the interpreter submitting), in the stage folder on `cluster.shared_dir`,
which the flow's host and the nodes share; the stage's public variables go in the job's runtime
environment, its secrets stay in its input file (mode 0600) there. A verl driver joins the
cluster it runs on (Ray sets `RAY_ADDRESS` for the entrypoint); a TRL or LLaMA-Factory stage
reserves the node's GPUs and CPUs for its entrypoint.

The handle behaves as a Slurm one (`submit.JobHandle`): its state, its log (Ray keeps the
entrypoint's output), cancel (`stop_job`: SIGTERM, and the command's tree stops), and a retried
task follows the job it submitted (`attach`). With Ray's token authentication the token named by
`cluster.ray_token_path` goes in the request's `Authorization` header, and nowhere else.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from judgeflow.cluster.job import JobFailed, JobSpec
from judgeflow.cluster.states import JobState
from judgeflow.config import ClusterConfig

__all__ = [
    "ENTRYPOINT_MODULE",
    "RayJobHandle",
    "attach",
    "client_for",
    "connection",
    "job_server",
    "render_submit",
    "submission",
    "submit",
]

ENTRYPOINT_MODULE = "judgeflow.cluster.ray_job_main"
SPEC_FILE = "ray_job.json"
#: Settings of the job itself (its supervisor and its entrypoint read them): a stop leaves the
#: stage the grace judgeflow gives a command to checkpoint and stop its tree (Ray's default is
#: 3 s before SIGKILL), and a verl driver's `ray.init(runtime_env=…)`, which forwards MLflow's
#: and W&B's variables again, replaces the job's instead of failing on the same names.
_JOB_SETTINGS = {"RAY_JOB_STOP_WAIT_TIME_S": "60", "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1"}
_STATUS_CODE = re.compile(r"status code (\d+)")
#: Ray's job states -> the names `submit.JobState` parses (Slurm's).
_STATES = {
    "PENDING": "PENDING",
    "RUNNING": "RUNNING",
    "STOPPED": "CANCELLED",
    "SUCCEEDED": "COMPLETED",
    "FAILED": "FAILED",
}


def connection(cluster: ClusterConfig) -> tuple[str | None, Path | None]:
    """Where the job server is (`cluster.ray_address`, else `RAY_ADDRESS` here) and the file
    holding the token a request carries (`cluster.ray_token_path`), as the cluster section says."""
    token = Path(cluster.ray_token_path).expanduser() if cluster.ray_token_path else None
    return cluster.ray_address or os.environ.get("RAY_ADDRESS"), token


def job_server(cluster: ClusterConfig) -> str:
    """The job server's address; an error that says what to set when there is none."""
    address, _ = connection(cluster)
    if not address:
        raise ValueError(
            "cluster.backend=ray needs the cluster's job server: set cluster.ray_address "
            "(e.g. http://head:8265, where `ray start --head` runs its dashboard) or RAY_ADDRESS"
        )
    return address


def client_for(cluster: ClusterConfig) -> Any:
    """Ray's `JobSubmissionClient` for the cluster, with its token when one is named."""
    from ray.job_submission import JobSubmissionClient

    headers: dict[str, str] = {}
    _, path = connection(cluster)
    if path is not None:
        try:
            token = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(
                f"cluster.ray_token_path={path}: cannot read the Ray token ({exc.strerror})"
            ) from None
        headers["Authorization"] = f"Bearer {token}"
    return JobSubmissionClient(job_server(cluster), headers=headers or None)


def submission(spec: JobSpec, cluster: ClusterConfig, submission_id: str) -> dict[str, Any]:
    """`JobSubmissionClient.submit_job`'s keywords for `spec` (no secret among them)."""
    python = cluster.python or shlex.quote(sys.executable)
    spec_path = Path(spec.workdir) / SPEC_FILE
    kwargs: dict[str, Any] = {
        "entrypoint": f"{python} -m {ENTRYPOINT_MODULE} {shlex.quote(str(spec_path))}",
        "submission_id": submission_id,
        "runtime_env": {
            **cluster.ray_runtime_env,
            "env_vars": {
                **(cluster.ray_runtime_env.get("env_vars") or {}),
                **spec.env,
                **_JOB_SETTINGS,
            },
        },
        "metadata": {"judgeflow.stage": spec.name},
        "entrypoint_num_cpus": cluster.cpus_per_task or 1,
    }
    if spec.gpus_per_node:  # a verl driver reserves none: its workers take the GPUs
        kwargs["entrypoint_num_gpus"] = spec.gpus_per_node
    if cluster.mem_gb:
        kwargs["entrypoint_memory"] = cluster.mem_gb * 1024**3
    return kwargs


def render_submit(spec: JobSpec, cluster: ClusterConfig) -> str:
    """The `ray job submit` command equivalent to what `submit` sends (dry run)."""
    kwargs = submission(spec, cluster, f"judgeflow-{spec.name}-<id>")
    words = ["ray", "job", "submit", "--address", cluster.ray_address or "$RAY_ADDRESS"]
    words += ["--submission-id", kwargs["submission_id"], "--no-wait"]
    words += ["--runtime-env-json", json.dumps(kwargs["runtime_env"], sort_keys=True)]
    words += ["--metadata-json", json.dumps(kwargs["metadata"])]
    words += ["--entrypoint-num-cpus", str(kwargs["entrypoint_num_cpus"])]
    if "entrypoint_num_gpus" in kwargs:
        words += ["--entrypoint-num-gpus", str(kwargs["entrypoint_num_gpus"])]
    if "entrypoint_memory" in kwargs:
        words += ["--entrypoint-memory", str(kwargs["entrypoint_memory"])]
    return shlex.join(words) + " -- " + kwargs["entrypoint"]


def submit(spec: JobSpec, cluster: ClusterConfig) -> RayJobHandle:
    """Write the spec where the entrypoint reads it and submit the stage as a Ray Job."""
    from judgeflow.data.io import atomic_write_text

    client = client_for(cluster)
    spec_path = Path(spec.workdir) / SPEC_FILE
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(spec_path, json.dumps(asdict(spec)))
    spec.result_path.unlink(missing_ok=True)  # an earlier attempt's: never this job's answer
    spec.failure_path.unlink(missing_ok=True)
    submission_id = f"judgeflow-{spec.name}-{uuid.uuid4().hex[:12]}"
    _request("submit the job", client.submit_job, **submission(spec, cluster, submission_id))
    return RayJobHandle(client, submission_id, spec, job_server(cluster))


def attach(spec: JobSpec, cluster: ClusterConfig, job_id: str) -> RayJobHandle | None:
    """The earlier submission `job_id` of `spec` while it is still pending or running, so a
    retried task follows it instead of submitting a second job; None when it is not."""
    handle = RayJobHandle(client_for(cluster), job_id, spec, job_server(cluster))
    try:
        status = _request("look the job up", handle.client.get_job_status, job_id)
    except LookupError:  # the job server does not know it (restarted, or another cluster)
        return None
    return handle if not _state(status).finished else None  # a server down: ConnectionError


@dataclass
class RayJobHandle:
    """A stage submitted as a Ray Job; the surface of `submit.JobHandle`."""

    client: Any
    submission_id: str
    spec: JobSpec
    address: str
    backend: str = "ray"

    @property
    def job_id(self) -> str:
        return self.submission_id

    @property
    def state(self) -> JobState:
        """The job's state; UNKNOWN (not finished: asked again) while the server does not
        answer, so a restart of the job server does not end the stage."""
        try:
            return _state(_request("ask the job's state", self.client.get_job_status, self.job_id))
        except ConnectionError:
            return JobState.UNKNOWN

    @property
    def log_paths(self) -> dict[str, str]:
        where = f"`ray job logs {self.submission_id} --address {self.address}`"
        return {"stdout": where, "stderr": where}

    @property
    def node_list(self) -> str | None:
        """The node the entrypoint ran on (Ray's driver node id), once known."""
        try:
            info = _request("ask the job's node", self.client.get_job_info, self.job_id)
        except (ConnectionError, LookupError):
            return None
        return getattr(info, "driver_node_id", None) or None

    def done(self) -> bool:
        return bool(self.state.finished)

    def final_state(self, wait_s: float = 30.0) -> JobState:
        deadline = time.monotonic() + wait_s
        state = self.state
        while not state.finished and time.monotonic() < deadline:
            time.sleep(1.0)
            state = self.state
        return state

    def result(self) -> dict[str, Any]:
        """The stage's result; raises JobFailed, retryable when the job was stopped from outside,
        when its command was killed (as the entrypoint wrote down), or when the entrypoint died
        without writing why (killed itself: a lost node, the OOM killer, SIGKILL). A command
        that failed by itself would fail again: not retried."""
        state = self.final_state()
        if state.value == "COMPLETED" and self.spec.result_path.exists():
            return dict(json.loads(self.spec.result_path.read_text()))
        known = _failure(self.spec)
        try:  # what Ray says, best effort: a lost node's job may have no log left to read
            info = _request("ask why the job ended", self.client.get_job_info, self.job_id)
            ray_says = getattr(info, "message", None)
        except (ConnectionError, LookupError) as exc:
            ray_says = str(exc)
        why = known["reason"] if known else (ray_says or "no reason given")
        tail = "\n".join(self.log_tail()[0].strip().splitlines()[-30:])
        raise JobFailed(
            f"stage {self.spec.name} (Ray Job {self.submission_id}) ended in state "
            f"{state.value} ({why}); log: {self.log_paths['stdout']}\n{tail}",
            state=state.value,
            retryable=state.killed_from_outside or (known["retryable"] if known else True),
        )

    def cancel(self) -> None:
        self.client.stop_job(self.submission_id)

    def log_tail(self, offset: int = 0) -> tuple[str, int]:
        """The entrypoint's output since `offset` (Ray keeps the whole of it, and sends the
        whole of it each time); nothing new while the server does not answer."""
        try:
            text: str = _request("read the job's log", self.client.get_job_logs, self.job_id)
        except (ConnectionError, LookupError):
            return "", offset
        return text[offset:], len(text)


def _state(status: Any) -> JobState:
    return JobState.parse(_STATES.get(str(getattr(status, "value", status)), "UNKNOWN"))


def _request(what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    """One job-server request. Ray's SDK raises RuntimeError for every refused request: a job it
    does not know becomes LookupError, a server error (5xx, 429) or no answer ConnectionError
    (passing: the flow's retries try again), anything else (a bad request, a refused token)
    stays what it is."""
    try:
        return call(*args, **kwargs)
    except (ConnectionError, OSError) as exc:  # requests' errors are OSErrors
        raise ConnectionError(f"Ray job server: could not {what}: {exc}") from exc
    except RuntimeError as exc:
        message = str(exc)
        code = _STATUS_CODE.search(message)
        status = int(code.group(1)) if code else None
        if status == 404 or "does not exist" in message:
            raise LookupError(f"Ray job server: could not {what}: {message}") from exc
        if status is not None and (status >= 500 or status == 429):
            raise ConnectionError(f"Ray job server: could not {what}: {message}") from exc
        raise


def _failure(spec: JobSpec) -> dict[str, Any] | None:
    try:
        return dict(json.loads(spec.failure_path.read_text()))
    except (OSError, ValueError):
        return None
