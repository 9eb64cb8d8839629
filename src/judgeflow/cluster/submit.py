"""One way to run a stage: `submit(spec, cluster) -> JobHandle`, on Slurm or on this machine,
or a Ray Job on a cluster the user runs (`cluster.ray_jobs`).

Slurm and local go through submitit (`slurm` and `local` executors); the Ray Job's handle has
the same surface, so the handle behaves the same way everywhere: `.result()`, `.cancel()`,
`.done()`, `.state`, `.log_tail()`.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import submitit
from submitit.slurm.slurm import SlurmExecutor

from judgeflow.cluster.job import JobFailed, JobRunner, JobSpec
from judgeflow.cluster.queue import squeue_state
from judgeflow.cluster.states import JobState
from judgeflow.config import ClusterConfig
from judgeflow.config.secrets import public_env, secret_variables

if TYPE_CHECKING:
    from judgeflow.cluster.ray_jobs import RayJobHandle


@dataclass
class JobHandle:
    """A submitted stage; wraps a submitit job (one task per node)."""

    job: submitit.Job[Any]
    spec: JobSpec
    backend: str

    @property
    def job_id(self) -> str:
        return str(self.job.job_id)

    @property
    def state(self) -> JobState:
        return JobState.parse(self.job.state)

    @property
    def log_paths(self) -> dict[str, str]:
        paths = self.job.paths
        return {"stdout": str(paths.stdout), "stderr": str(paths.stderr)}

    @property
    def node_list(self) -> str | None:
        """The allocation's nodes (Slurm's NodeList), once known."""
        if self.backend != "slurm":
            return "localhost"
        info = self.job.get_info(mode="force")
        return info.get("NodeList") or None

    def done(self) -> bool:
        return self.job.done(force_check=True)

    def result(self) -> dict[str, Any]:
        """Rank 0's result; raises JobFailed (retryable when killed from outside)."""
        if self._cancelled_without_result():  # submitit would wait 15 s for a file never written
            raise self._failed(self.state, _last_lines(self._stderr(), 30))
        try:
            results = self.job.results()
        except (submitit.core.utils.FailedJobError, submitit.core.utils.UncompletedJobError) as exc:
            raise self._failed(self.final_state(), _last_lines(str(exc), 30)) from None
        if not results or results[0] is None:
            raise JobFailed(f"stage {self.spec.name} (job {self.job_id}) returned no result")
        return dict(results[0])

    def _failed(self, state: JobState, tail: str) -> JobFailed:
        known = _job_failure(self.spec)  # what the job itself found (a kill, a lost node)
        return JobFailed(
            f"stage {self.spec.name} (job {self.job_id}) ended in state {state.value}"
            + (f" ({known['reason']})" if known else "")
            + f"; log: {self.log_paths['stdout']}\n{tail}",
            state=state.value,
            retryable=state.killed_from_outside or bool(known and known["retryable"]),
        )

    def _cancelled_without_result(self) -> bool:
        """Killed from outside (cancelled, preempted, out of time) and no result written: the
        job never will write one."""
        state = self.state
        return (
            state.finished
            and state.killed_from_outside
            and not Path(self.job.paths.result_pickle).exists()
        )

    def _stderr(self) -> str:
        path = Path(self.job.paths.stderr)
        return path.read_text(errors="replace") if path.exists() else ""

    def final_state(self, wait_s: float = 30.0) -> JobState:
        """The job's end state; accounting can lag the job by a moment, so poll briefly."""
        deadline = time.monotonic() + wait_s
        state = self.state
        while not state.finished and time.monotonic() < deadline:
            time.sleep(1.0)
            self.job.get_info(mode="force")
            state = self.state
        return state

    def cancel(self) -> None:
        self.job.cancel(check=False)

    def log_tail(self, offset: int = 0) -> tuple[str, int]:
        """New text of the rank-0 stdout since `offset`, and the new offset."""
        path = Path(self.job.paths.stdout)
        if not path.exists():
            return "", offset
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
        return data.decode(errors="replace"), offset + len(data)


def make_executor(cluster: ClusterConfig, folder: str | Path, *, name: str) -> submitit.Executor:
    """A submitit executor for the configured backend with the generic resources applied."""
    backend = "slurm" if cluster.backend == "slurm" else "local"
    executor = _auto_executor(cluster, folder, backend)
    executor.update_parameters(**executor_parameters(cluster, name=name))
    return executor


def executor_parameters(cluster: ClusterConfig, *, name: str) -> dict[str, Any]:
    """submitit's parameters for the configured backend: the generic resources, then sbatch's."""
    backend = "slurm" if cluster.backend == "slurm" else "local"
    params: dict[str, Any] = {
        "name": name,
        "timeout_min": cluster.timeout_min,
        "nodes": cluster.nodes if backend == "slurm" else 1,
        "tasks_per_node": 1,
    }
    if cluster.cpus_per_task:
        params["cpus_per_task"] = cluster.cpus_per_task
    if cluster.mem_gb:
        params["mem_gb"] = cluster.mem_gb
    if cluster.gpus_per_node:
        params["gpus_per_node"] = cluster.gpus_per_node
    if backend == "slurm":
        params.update(slurm_parameters(cluster))
    return params


def slurm_parameters(cluster: ClusterConfig) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    for line in cluster.extra_sbatch:
        key, _, value = line.strip().removeprefix("#SBATCH").strip().lstrip("-").partition("=")
        extra[key.replace("-", "_")] = value or True
    params: dict[str, Any] = {
        "slurm_partition": cluster.partition,
        "slurm_account": cluster.account,
        "slurm_qos": cluster.qos,
        "slurm_constraint": cluster.constraint,
        "slurm_setup": list(cluster.setup)  # secrets reach the job from its input file only
        + [f"export {k}={shlex.quote(v)}" for k, v in public_env(cluster).items()],
        "slurm_additional_parameters": extra,
        "slurm_signal_delay_s": 120,  # time between the USR2 warning and the kill: enough to checkpoint
        # one task ending badly (a lost node) ends the others: the allocation is released
        "slurm_srun_args": ["--kill-on-bad-exit=1"],
    }
    return {k: v for k, v in params.items() if v not in (None, [], {})}


def submit(spec: JobSpec, cluster: ClusterConfig) -> JobHandle | RayJobHandle:
    """Submit `spec` as one job with a task per node (backend ray: one Ray Job on the cluster at
    cluster.ray_address, `cluster.ray_jobs`); returns at once."""
    if cluster.backend == "ray":
        from judgeflow.cluster import ray_jobs

        return ray_jobs.submit(spec, cluster)
    folder = Path(spec.workdir) / "jobs"
    executor = make_executor(cluster, folder, name=f"judgeflow-{spec.name}")
    job = executor.submit(JobRunner(), spec)
    return JobHandle(job=job, spec=spec, backend=cluster.backend)


def attach(spec: JobSpec, cluster: ClusterConfig, job_id: str) -> JobHandle | RayJobHandle | None:
    """A handle on an earlier submission of `spec` that is still queued or running (Slurm, Ray),
    so a retried task follows it instead of submitting a second job; None when there is none."""
    if cluster.backend == "ray":
        from judgeflow.cluster import ray_jobs

        return ray_jobs.attach(spec, cluster, job_id)
    if cluster.backend != "slurm":
        return None  # a local job is a child of the process that died with the task
    job: submitit.Job[Any] = submitit.SlurmJob(folder=Path(spec.workdir) / "jobs", job_id=job_id)
    handle = JobHandle(job=job, spec=spec, backend=cluster.backend)
    word = squeue_state(job_id)  # the live queue: sacct lags a submission and an ending by seconds
    if word is None:  # slurmctld did not answer: ask accounting
        try:
            job.get_info(mode="force")
        except Exception:  # accounting has forgotten it: treat as gone
            return None
        state = handle.state
    else:
        state = JobState.parse(word)  # '' and COMPLETING: UNKNOWN, gone
    return handle if state in {JobState.PENDING, JobState.RUNNING, JobState.REQUEUED} else None


def render_sbatch(spec: JobSpec, cluster: ClusterConfig) -> str:
    """The exact sbatch script submitit would submit for `spec` (dry run: nothing is submitted,
    and it works on a machine without Slurm, e.g. a laptop preparing a cluster run)."""
    from submitit.slurm.slurm import SlurmExecutor

    class DryRun(SlurmExecutor):
        @classmethod
        def affinity(cls) -> int:  # submitit refuses to build one where `srun` is missing
            return 1

    executor = DryRun(
        Path(spec.workdir) / "jobs", python=executor_options(cluster).get("slurm_python")
    )
    generic = {
        "name": f"judgeflow-{spec.name}",
        "timeout_min": cluster.timeout_min,
        "nodes": cluster.nodes,
        "tasks_per_node": 1,
        "cpus_per_task": cluster.cpus_per_task,
        "mem_gb": cluster.mem_gb,
        "gpus_per_node": cluster.gpus_per_node or None,
    }
    specific = executor._convert_parameters({k: v for k, v in generic.items() if v is not None})
    native = {k.removeprefix("slurm_"): v for k, v in slurm_parameters(cluster).items()}
    executor.update_parameters(**specific, **native)
    return executor._make_submission_file_text(executor._submitit_command_str, "%j")


def executor_options(cluster: ClusterConfig) -> dict[str, Any]:
    """submitit's executor options: `cluster.python` is how a node starts Python (a
    container's, or a venv on shared storage)."""
    if cluster.backend == "slurm" and cluster.python:
        return {"slurm_python": cluster.python}
    return {}


def _auto_executor(
    cluster: ClusterConfig, folder: str | Path, backend: str
) -> submitit.AutoExecutor:
    options = executor_options(cluster)
    executor = submitit.AutoExecutor(folder=str(folder), cluster=backend, **options)
    if backend == "slurm":  # the same executor, submitting without the job's secrets
        slurm = executor._executor
        assert type(slurm) is SlurmExecutor, type(slurm)  # what AutoExecutor makes for "slurm"
        slurm.__class__ = _SlurmWithoutSecrets
        cast(_SlurmWithoutSecrets, slurm).hidden = secret_variables(cluster)
    return executor


class _SlurmWithoutSecrets(SlurmExecutor):
    """submitit's Slurm executor, running sbatch without the variables of this process that
    hold the job's secrets (`judgeflow.config.secrets.secret_variables`): sbatch copies its whole
    environment into the job (`--export=ALL`, Slurm's default) and slurmctld keeps it with the
    job, where `scontrol` and accounting can show it. The job gets them from its input file."""

    hidden: list[str]

    def _make_submission_command(self, submission_file_path: Path) -> list[str]:
        unset = [f"--unset={name}" for name in self.hidden]
        return ["env", *unset, *super()._make_submission_command(submission_file_path)]


def _job_failure(spec: JobSpec) -> dict[str, Any] | None:
    import json

    try:
        return dict(json.loads(spec.failure_path.read_text()))
    except (OSError, ValueError):
        return None


def _last_lines(text: str, n: int) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


__all__ = [
    "JobFailed",
    "JobHandle",
    "JobState",
    "attach",
    "make_executor",
    "render_sbatch",
    "submit",
]
