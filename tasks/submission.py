"""Submit a stage's job and follow it from inside a Prefect task (shared by sft, train and evaluate)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import get_client
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.context import TaskRunContext
from prefect.logging import get_run_logger
from prefect.runtime import flow_run

from judgeflow.cluster import JobProgress, JobSpec, submit, submitted, watch
from judgeflow.cluster.submit import JobHandle, attach
from judgeflow.config import RunConfig
from judgeflow.console import report_progress


def training_progress(cfg: RunConfig, stage: str) -> Callable[[JobProgress], None]:
    """A progress artifact for a training stage (`sft-progress`, `training-progress`), and the
    terminal bar when `judgeflow run` shows one; returns what updates both."""
    key = "training-progress" if stage == "train" else f"{stage}-progress"
    artifact_id = create_progress_artifact(
        0.0, key=key, description=f"{cfg.recipe} {stage}: waiting for the job to start"
    )

    def update(progress: JobProgress) -> None:
        report_progress(stage, progress.step, progress.total, progress.metrics)
        if progress.total > 0:
            shown = ", ".join(f"{k.split('/')[-1]} {v:.3f}" for k, v in progress.metrics.items())
            update_progress_artifact(
                artifact_id,
                progress=min(100.0, 100.0 * progress.step / progress.total),
                description=f"{cfg.recipe} {stage}: step {progress.step}/{progress.total}"
                + (f" ({shown})" if shown else ""),
            )

    return update


def run_job(
    cfg: RunConfig,
    spec: JobSpec,
    *,
    on_progress: Callable[[JobProgress], None] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Submit, record for cancellation, stream the log; returns (job id, result).

    The task run is renamed to show the job (`train[grpo-pointwise@slurm:1234]`). If the task
    is interrupted or cancelled while the job runs, the job is cancelled too.
    """
    logger = get_run_logger()
    key = str(flow_run.get_id())
    handle = _still_running(cfg, spec, key)
    if handle is not None:
        logger.info("%s: following job %s, submitted earlier by this run", spec.name, handle.job_id)
    else:
        handle = submit(spec, cfg.cluster)
        backend, shared = cfg.cluster.backend, cfg.cluster.shared_dir
        submitted.record(shared, key, backend=backend, job_id=handle.job_id, stage=spec.name)
    name_task_run_after_job(cfg.cluster.backend, handle.job_id)
    logger.info(
        "%s: %s job %s; log %s",
        spec.name,
        cfg.cluster.backend,
        handle.job_id,
        handle.log_paths["stdout"],
    )
    try:
        result = follow(cfg, handle, logger, on_progress)
    except BaseException as exc:
        if not handle.done():  # cancelled, interrupted, or the flow is going away
            logger.warning(
                "%s: cancelling job %s (%s)", spec.name, handle.job_id, type(exc).__name__
            )
            handle.cancel()
        raise
    logger.info("%s: job %s finished on %s", spec.name, handle.job_id, handle.node_list)
    return handle.job_id, result


def follow(
    cfg: RunConfig,
    handle: JobHandle,
    logger: Any,
    on_progress: Callable[[JobProgress], None] | None = None,
) -> dict[str, Any]:
    """`watch` a job as the config says: looked at every `cluster.poll_s` seconds, its log lines
    to `logger`, its progress to `on_progress` (an update that fails is logged, not raised)."""
    return watch(
        handle,
        on_log=_tolerant(logger.info, logger),
        on_progress=_tolerant(on_progress, logger) if on_progress else None,
        poll_s=cfg.cluster.poll_s,
    )


def _still_running(cfg: RunConfig, spec: JobSpec, key: str) -> JobHandle | None:
    """This run's last job of this stage, if it is still queued or running: a task retried
    after the flow lost track of its job (the Prefect API down, say) follows it again."""
    earlier = submitted.of_stage(cfg.cluster.shared_dir, key, spec.name)
    return attach(spec, cfg.cluster, str(earlier[-1]["job_id"])) if earlier else None


def _tolerant(update: Callable[..., Any], logger: Any) -> Callable[..., None]:
    """A progress or log update that may fail (the Prefect API restarting) without failing or
    cancelling the job it reports on."""
    warned = False

    def call(*args: Any) -> None:
        nonlocal warned
        try:
            update(*args)
        except Exception as exc:
            if not warned:
                warned = True
                logger.warning("progress update failed (%s); the job goes on", exc)

    return call


def job_task_run_name(name: str, backend: str, job_id: str) -> str:
    """`train[grpo-pointwise@slurm]` + job 1234 -> `train[grpo-pointwise@slurm:1234]`."""
    base = name.rsplit(":", 1)[0].removesuffix("]") if name.endswith("]") else f"{name}["
    if "@" not in base:
        base = f"{base}@{backend}"
    return f"{base}:{job_id}]"


def name_task_run_after_job(backend: str, job_id: str) -> None:
    """Task run names are fixed at start; the job id is known only now, so rename the run."""
    ctx = TaskRunContext.get()
    if ctx is None:
        return
    name = job_task_run_name(ctx.task_run.name, backend, job_id)
    # Task run state events carry the in-memory task run, name included: set both.
    ctx.task_run.name = name
    try:
        with get_client(sync_client=True) as client:
            client.set_task_run_name(ctx.task_run.id, name)
    except Exception as exc:  # a cosmetic update must not fail the job
        get_run_logger().warning("could not rename task run to %s: %s", name, exc)
