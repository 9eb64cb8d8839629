"""What a job is: a stage's engine command, run on the head of a Ray cluster inside an allocation.

A `JobSpec` is plain data (picklable, JSON-able): the command, its environment, where its
files go. `JobRunner` is the callable submitit runs on every task of the allocation; it is
checkpointable, so a time-limit or preemption signal requeues it and the command, which resumes
from its last checkpoint, simply runs again.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import submitit

RESULT_FILE = "result.json"
PROGRESS_FILE = "progress.json"
FAILURE_FILE = "failure.json"
FLOW_HEARTBEAT_FILE = "followed"
SECRET_ENV = "secret_env"  # the key of a job's secrets in its input file (`secrets_file`)
PYTHON = "@python"  # in a command: the job's own interpreter (a container's, on a cluster)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSpec:
    name: str  # e.g. "train"; used in job names and log lines
    command: list[str]  # the engine command (driver), run on the Ray head
    workdir: str  # shared directory: rendezvous, result and progress files
    env: dict[str, str] = field(default_factory=dict)
    secrets_file: str | None = None  # JSON (mode 0600) whose `secret_env` joins `env` in the job
    ray: bool = True  # start a Ray cluster across the allocation before the command
    torchrun: bool = False  # instead: run the command on every node with a torchrun rendezvous
    gpus_per_node: int = 0
    ray_num_cpus: int | None = None
    ray_object_store_mb: int | None = None
    ray_dashboard: bool = False
    node_timeout_s: float = 60.0  # a silent node fails the stage (retryably) after this
    orphan_timeout_s: float = 600.0  # no flow following the job this long: the job stops
    ready_timeout_s: float = 180.0

    @property
    def result_path(self) -> Path:
        return Path(self.workdir) / RESULT_FILE

    @property
    def progress_path(self) -> Path:
        return Path(self.workdir) / PROGRESS_FILE

    @property
    def flow_heartbeat_path(self) -> Path:
        """Rewritten by whoever follows the job (`monitor.watch`); the job stops without it."""
        return Path(self.workdir) / FLOW_HEARTBEAT_FILE

    @property
    def failure_path(self) -> Path:
        """Why the last attempt failed, when the job knows better than its Slurm state."""
        return Path(self.workdir) / FAILURE_FILE


class JobFailed(RuntimeError):
    """The stage's command exited non-zero, or its job was killed or ended without a result.

    `retryable` is true when the job was killed from outside (scancel, node failure, preemption,
    time limit): a resubmission resumes from the last checkpoint. A command that failed by itself
    (bad data, bad config, out of memory, NaN) would fail the same way again, so it is not.
    """

    def __init__(self, message: str, *, state: str | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.state = state
        self.retryable = retryable


class JobRunner(submitit.helpers.Checkpointable):
    """Runs on every task: rank 0 hosts the Ray head and the driver, the others join as workers."""

    def __call__(self, spec: JobSpec) -> dict[str, Any] | None:
        from judgeflow.cluster.procs import exit_on_signals
        from judgeflow.log_setup import JOB_FORMAT, show_logs

        show_logs(stream="stdout", fmt=JOB_FORMAT)  # the job's log file, a flushed line each
        # submitit ignores SIGTERM: from here on it stops the job (and, nested, what it started).
        # A cancel that came before this line was swallowed; the job's own state tells.
        with exit_on_signals(logger.warning):
            if _cancelled_before_start():
                logger.warning("[judgeflow] the job was cancelled as it started; stopping")
                raise SystemExit(143)
            return self._run(spec)

    def _run(self, spec: JobSpec) -> dict[str, Any] | None:
        from judgeflow.cluster.ray_bootstrap import Allocation, run_in_ray_cluster

        env = {**spec.env, **_secret_env(spec), "JUDGEFLOW_STAGE_DIR": spec.workdir}
        spec = replace(spec, command=[sys.executable if c == PYTHON else c for c in spec.command])
        rendezvous = Path(spec.workdir) / "rendezvous"
        alloc = Allocation.from_env(rendezvous)
        if alloc.rank == 0:  # a requeued attempt must not see a stale result or failure
            spec.result_path.unlink(missing_ok=True)
            spec.failure_path.unlink(missing_ok=True)
            _stop_when_orphaned(spec)
        logger.info(
            "[judgeflow] stage %s: rank %s/%s on %s",
            spec.name, alloc.rank, alloc.world, alloc.node_name,
        )  # fmt: skip
        if spec.torchrun:
            env.update(_torchrun_env(alloc, log_dir=str(Path(spec.workdir) / "torchrun")))
            code = _run_plain(spec.command, env)
        elif spec.ray:
            store_mb = spec.ray_object_store_mb
            code = run_in_ray_cluster(
                alloc,
                spec.command,
                # the job's own environment (cluster.setup's exports, OMP_NUM_THREADS, the
                # scheduler's variables) under the stage's, as a plain command gets it
                env={**os.environ, **env},
                ready_timeout_s=spec.ready_timeout_s,
                num_gpus=spec.gpus_per_node,
                num_cpus=spec.ray_num_cpus,  # cluster.ray_num_cpus / ray_object_store_mb /
                object_store_memory=store_mb * 1024 * 1024 if store_mb else None,
                dashboard=spec.ray_dashboard,  # ray_dashboard: what Ray is started with
                node_timeout_s=spec.node_timeout_s,
            )
        elif alloc.rank == 0:  # a single-node command: the other ranks have nothing to do
            code = _run_plain(spec.command, env)
        else:
            code = 0
        if alloc.rank != 0:
            return None
        return _outcome(spec, code)


def run_single(spec: JobSpec) -> dict[str, Any]:
    """Run the stage's command once, here, and return its result: a Ray Job's entrypoint
    (`cluster.ray_job_main`), on a cluster that already runs (no allocation, no Ray of its own;
    `RAY_ADDRESS`, set by Ray for the entrypoint, is the cluster a verl driver joins). As on
    Slurm: the secrets come from the job's input file, the job stops when nothing follows it,
    and why a failed command failed is written down for the flow to decide on a retry."""
    env = {**spec.env, **_secret_env(spec), "JUDGEFLOW_STAGE_DIR": spec.workdir}
    spec = replace(spec, command=[sys.executable if c == PYTHON else c for c in spec.command])
    spec.result_path.unlink(missing_ok=True)  # an earlier attempt's
    spec.failure_path.unlink(missing_ok=True)
    _stop_when_orphaned(spec)
    logger.info("[judgeflow] stage %s: Ray Job on %s", spec.name, os.uname().nodename)
    return _outcome(spec, _run_plain(spec.command, env))


def _outcome(spec: JobSpec, code: int) -> dict[str, Any]:
    """The stage's result once its command exited with `code`; JobFailed (why written down
    for the flow's retry decision) when it failed or wrote none."""
    if code != 0:
        raise _failure(spec, code)
    if not spec.result_path.exists():
        raise JobFailed(f"stage {spec.name}: command succeeded but wrote no {spec.result_path}")
    result: dict[str, Any] = json.loads(spec.result_path.read_text())
    return result


def _cancelled_before_start() -> bool:
    """This Slurm job is no longer RUNNING in the queue (scancel marks it before signalling).
    No answer from the queue counts as not cancelled: a later SIGTERM is still caught."""
    from judgeflow.cluster.queue import squeue_state

    job_id = os.environ.get("SLURM_JOB_ID")
    state = squeue_state(job_id) if job_id else None
    return state not in (None, "", "RUNNING", "CONFIGURING")


def _stop_when_orphaned(spec: JobSpec) -> None:
    """Stop this job when nothing follows it any more: the flow that submitted it (and would
    record its result) died with its worker. Its allocation is then released instead of held
    to the time limit; the reason is left in the failure file."""
    import signal

    from judgeflow.cluster.heartbeat import Watchdog
    from judgeflow.data.io import atomic_write_text

    def orphaned(_key: int, silent_s: float) -> None:
        reason = (
            f"stage {spec.name}: stopped because nothing followed the job for {silent_s:.0f}s "
            f"(the flow that submitted it is gone; {spec.flow_heartbeat_path} unchanged)"
        )
        logger.warning("[judgeflow] %s", reason)
        atomic_write_text(spec.failure_path, json.dumps({"reason": reason, "retryable": False}))
        os.kill(os.getpid(), signal.SIGTERM)  # exit_on_signals stops what the job started

    Watchdog(
        Path(spec.workdir), range(0), lost_after_s=spec.orphan_timeout_s, on_lost=orphaned,
        poll_s=min(5.0, spec.orphan_timeout_s / 4), files={0: spec.flow_heartbeat_path},
    ).start()  # fmt: skip


def _failure(spec: JobSpec, code: int) -> JobFailed:
    """The stage command failed: by itself (not retried), or killed from outside — a signal
    (an operator, a dying node's kill, the OOM killer) or a lost node — which a resubmission,
    resuming from the last checkpoint, can get past. The reason is written down because the
    job's Slurm state (FAILED) cannot tell the two apart."""
    import signal

    from judgeflow.cluster.heartbeat import NODE_LOST_EXIT
    from judgeflow.data.io import atomic_write_text

    if code == NODE_LOST_EXIT:
        why, retryable = "a node of the allocation was lost", True
    elif code < 0 or code in (128 + signal.SIGKILL, 128 + signal.SIGTERM):
        number = -code if code < 0 else code - 128
        why, retryable = f"the command was killed by {signal.Signals(number).name}", True
    else:
        why, retryable = f"the command exited with code {code}", False
    message = f"stage {spec.name}: {why}"
    atomic_write_text(spec.failure_path, json.dumps({"reason": message, "retryable": retryable}))
    return JobFailed(message, retryable=retryable)


def _secret_env(spec: JobSpec) -> dict[str, str]:
    """The job's secrets, read from its input file on the node (never part of the spec)."""
    if not spec.secrets_file:
        return {}
    data = json.loads(Path(spec.secrets_file).read_text())
    return {str(k): str(v) for k, v in (data.get(SECRET_ENV) or {}).items()}


def _torchrun_env(alloc: Any, log_dir: str, timeout_s: float = 300.0) -> dict[str, str]:
    """FORCE_TORCHRUN/NNODES/NODE_RANK/MASTER_ADDR/MASTER_PORT for this node of the allocation.

    Rank 0 publishes its address and a free port in the rendezvous directory; the others read it.
    """
    import time

    from judgeflow.cluster.net import free_ports, node_ip

    master_file = alloc.rendezvous_dir / "torchrun.json"
    if alloc.rank == 0:
        alloc.rendezvous_dir.mkdir(parents=True, exist_ok=True)
        from judgeflow.data.io import atomic_write_text

        atomic_write_text(master_file, json.dumps({"addr": node_ip(), "port": free_ports(1)[0]}))
    deadline = time.monotonic() + timeout_s
    while not master_file.exists():
        if time.monotonic() > deadline:
            raise JobFailed(
                f"rank {alloc.rank}: no {master_file} from rank 0 after {timeout_s:.0f}s"
            )
        time.sleep(0.2)
    master = json.loads(master_file.read_text())
    from judgeflow.cluster.torchrun import torchrun_env

    return torchrun_env(
        alloc.world, alloc.rank, str(master["addr"]), int(master["port"]), log_dir=log_dir
    )


def _run_plain(command: list[str], env: dict[str, str]) -> int:
    from judgeflow.cluster.procs import run_tree

    return run_tree(command, {**os.environ, **env}, grace_s=30.0)
