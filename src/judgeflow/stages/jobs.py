"""Stages as jobs: the job spec of each stage, and the entry point a job runs.

A stage that runs as a job (Slurm, or a local process through the same interface) gets its
inputs as one JSON file in its stage directory and leaves result.json and progress.json there.
The entry point dispatches on the stage name through one table (`JOB_STAGES`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from judgeflow.cluster.job import PROGRESS_FILE, PYTHON, RESULT_FILE, SECRET_ENV, JobSpec
from judgeflow.cluster.procs import exit_on_signals
from judgeflow.config import ConfigError, RunConfig, judgeflow_home
from judgeflow.config.secrets import public_env, resolve_secrets
from judgeflow.engines.verl_eval import evaluation_gpus
from judgeflow.log_setup import JOB_FORMAT, show_logs
from judgeflow.stages.common import PreparedData, Progress, run_dir
from judgeflow.stages.evaluate import evaluate_stage
from judgeflow.stages.judge import judge_stage, judges_with_verl
from judgeflow.stages.train import sft_stage, train_stage
from judgeflow.storage import write_json
from judgeflow.tracking import (
    BackgroundMetrics,
    Tracker,
    resolve_tracking_uri,
    tracking_credentials,
)

STAGE_INPUT = "input.json"
#: Metrics a job could not deliver (MLflow unavailable), in its stage directory.
METRICS_SPOOL = "metrics-spool.jsonl"
#: How long a finished job waits for MLflow to take its last metrics before spooling them
#: (`JUDGEFLOW_MLFLOW_WAIT_S` overrides it).
MLFLOW_WAIT_S = 60.0

logger = logging.getLogger(__name__)


def job_spec(
    cfg: RunConfig,
    stage: str,
    run_id: str,
    payload: dict[str, Any],
    *,
    name: str | None = None,
    dry_run: bool = False,
) -> JobSpec:
    """The job for `stage` ("train" or "evaluate"): command, environment, shared directory.

    Unless `dry_run`, this writes the stage input file the command reads. It is the one file
    that holds the job's secrets (`judgeflow.config.secrets`, and MLflow's credentials,
    `judgeflow.tracking.tracking_credentials`), so only its owner may read it (0600);
    the spec, which submitit pickles into the job folder, holds only the public environment.
    """
    name = name or stage
    workdir = Path(cfg.cluster.shared_dir) / run_id / name
    tracking_uri = resolve_tracking_uri(cfg.tracking.tracking_uri)  # credentials leave the URI
    if not dry_run:
        stage_input = {
            "stage": stage,
            "config": cfg.model_dump(mode="json"),
            "run_id": run_id,
            SECRET_ENV: {**tracking_credentials(), **resolve_secrets(cfg.cluster)},
            **payload,
        }
        write_json(workdir / STAGE_INPUT, stage_input, mode=0o600)
    env = {
        **public_env(cfg.cluster),
        "MLFLOW_TRACKING_URI": tracking_uri,
        "MLFLOW_RUN_ID": run_id,
        "JUDGEFLOW_HOME": str(judgeflow_home()),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        **cfg.tracking.wandb.env(run_id, name),  # W&B beside MLflow, when a project is named
    }
    return JobSpec(
        name=name,
        command=[PYTHON, "-m", "judgeflow.stages.jobs_main", str(workdir / STAGE_INPUT)],
        workdir=str(workdir),
        env=env,
        secrets_file=str(workdir / STAGE_INPUT),
        ray=cfg.cluster.backend == "slurm",
        gpus_per_node=_entrypoint_gpus(cfg, stage, cfg.cluster.gpus_per_node),
        ray_num_cpus=cfg.cluster.ray_num_cpus,
        ray_object_store_mb=cfg.cluster.ray_object_store_mb,
        ray_dashboard=cfg.cluster.ray_dashboard,
        node_timeout_s=cfg.cluster.node_timeout_s,
        orphan_timeout_s=cfg.cluster.orphan_timeout_s,
    )


def metrics_spool(cfg: RunConfig, run_id: str, name: str) -> Path:
    """Where the job of stage `name` leaves metrics MLflow did not take (see `run_stage_job`)."""
    return Path(cfg.cluster.shared_dir) / run_id / name / METRICS_SPOOL


def train_job_spec(
    cfg: RunConfig, data: PreparedData, run_id: str, *, dry_run: bool = False
) -> JobSpec:
    payload = {"data": asdict(data), "output_dir": str(run_dir(cfg, run_id))}
    spec = job_spec(cfg, "train", run_id, payload, dry_run=dry_run)
    # Ray gets the GPUs verl trains on; a judge-paid policy's judge is served on the others
    return replace(spec, gpus_per_node=_entrypoint_gpus(cfg, "train", cfg.policy_gpus_per_node))


def evaluation_job_config(cfg: RunConfig) -> RunConfig:
    """`cfg` with the evaluation job's own resources: one node, `evaluation.gpus` GPUs (at most
    a node's), so generating on one device does not hold the whole training allocation."""
    cluster = cfg.cluster.model_copy(update={"nodes": 1, "gpus_per_node": evaluation_gpus(cfg)})
    return cfg.model_copy(update={"cluster": cluster})


def evaluate_job_spec(
    cfg: RunConfig,
    model_dir: str,
    data: PreparedData,
    run_id: str,
    label: str,
    *,
    dry_run: bool = False,
) -> JobSpec:
    """The evaluation job on `evaluation_job_config`'s resources. With verl it runs verl's
    validation mode, which needs the job's Ray cluster; HF generation is one plain process."""
    job = evaluation_job_config(cfg)
    verl = job.resolved_engine == "verl"
    if verl and job.cluster.gpus_per_node < 1:
        raise ConfigError("evaluation with verl needs a GPU: set evaluation.gpus")
    payload = {"data": asdict(data), "model_dir": model_dir}
    spec = job_spec(job, "evaluate", run_id, payload, name=f"evaluate-{label}", dry_run=dry_run)
    return replace(spec, ray=spec.ray and verl)


def _entrypoint_gpus(cfg: RunConfig, stage: str, gpus: int) -> int:
    """The GPUs (per node) a stage's job holds. A Ray Job's entrypoint on a cluster that runs
    already (backend ray) holds none when it is a verl driver: verl's workers take them."""
    ray_driver = cfg.cluster.backend == "ray" and cfg.resolved_engine == "verl" and stage != "sft"
    return 0 if ray_driver else gpus


def sft_job_spec(cfg: RunConfig, sft_file: str, run_id: str) -> JobSpec:
    """SFT runs on every node of the allocation (torchrun rendezvous), not under Ray."""
    payload = {"sft_file": sft_file, "output_dir": str(run_dir(cfg, run_id) / "sft")}
    spec = job_spec(cfg, "sft", run_id, payload)
    return replace(
        spec, ray=False, torchrun=cfg.cluster.backend == "slurm" and cfg.cluster.nodes > 1
    )


def judge_job_spec(
    cfg: RunConfig,
    model_uri: str,
    data: str,
    output: str,
    run_id: str,
    *,
    model_ref: str,
    skip_invalid: bool = False,
    dry_run: bool = False,
) -> JobSpec:
    """`judgeflow judge` as a job on the evaluation's resources (one node, `evaluation.gpus`
    GPUs): verl's validation mode on the job's Ray cluster when it has GPUs, else one plain
    process (HF generation)."""
    job = evaluation_job_config(cfg)
    payload = {"model_uri": model_uri, "data": data, "output": output, "model_ref": model_ref,
               "skip_invalid": skip_invalid}  # fmt: skip
    spec = job_spec(job, "judge", run_id, payload, dry_run=dry_run)
    return replace(spec, ray=spec.ray and judges_with_verl(job))


#: Metrics a stage's progress file carries (the terminal bar shows them beside the step).
PROGRESS_METRICS = ("train/reward_mean", "train/format_failure_rate", "sft/loss")


@dataclass(frozen=True)
class JobContext:
    """What a stage gets inside its job: its inputs, and where its numbers go."""

    cfg: RunConfig
    inputs: dict[str, Any]
    sink: Callable[[dict[str, float], int], None]
    progress: Progress


def _sft_job(job: JobContext) -> dict[str, Any] | None:
    result = sft_stage(
        job.cfg,
        job.inputs["sft_file"],
        output_dir=job.inputs["output_dir"],
        run_id=job.inputs["run_id"],
        metrics_sink=job.sink,
        progress=job.progress,
    )
    return result if os.environ.get("NODE_RANK", "0") == "0" else None  # the first node reports


def _train_job(job: JobContext) -> dict[str, Any]:
    model = train_stage(
        job.cfg,
        PreparedData(**job.inputs["data"]),
        output_dir=job.inputs["output_dir"],
        run_id=job.inputs["run_id"],
        metrics_sink=job.sink,
        progress=job.progress,
    )
    return asdict(model)


def _evaluate_job(job: JobContext) -> dict[str, Any]:
    return evaluate_stage(job.cfg, job.inputs["model_dir"], PreparedData(**job.inputs["data"]))


def _judge_job(job: JobContext) -> dict[str, Any]:
    i = job.inputs
    return judge_stage(
        job.cfg, i["model_uri"], i["data"], i["output"], model_ref=i["model_ref"],
        skip_invalid=i["skip_invalid"], progress=job.progress,
    )  # fmt: skip


#: The stages a job can run, by the name in its input file (`job_spec(cfg, name, …)`).
JOB_STAGES: dict[str, Callable[[JobContext], dict[str, Any] | None]] = {
    "sft": _sft_job,
    "train": _train_job,
    "evaluate": _evaluate_job,
    "judge": _judge_job,
}


def run_stage_job(input_file: str | Path) -> dict[str, Any] | None:
    """Inside the job: run the stage named in the input file; leave progress and result.

    Returns the result (None on the nodes of a multi-node stage that do not report).
    """
    inp = json.loads(Path(input_file).read_text())
    run = JOB_STAGES.get(inp["stage"])
    if run is None:
        raise ValueError(
            f"{input_file}: unknown stage {inp['stage']!r}; known: {', '.join(JOB_STAGES)}"
        )
    cfg = RunConfig.model_validate(inp["config"])
    workdir = Path(input_file).parent
    tracker = Tracker.attach(
        inp["run_id"], cfg.tracking.tracking_uri, spool=workdir / METRICS_SPOOL
    )
    to_mlflow = BackgroundMetrics(tracker)  # training never waits for (or on) MLflow
    latest: dict[str, float] = {}
    position = {"step": 0, "total": 0}

    def write_progress() -> None:
        shown = {k: latest[k] for k in PROGRESS_METRICS if k in latest}
        write_json(workdir / PROGRESS_FILE, {**position, "metrics": shown})

    def progress(step: int, total: int) -> None:
        position.update(step=step, total=total)
        write_progress()

    def sink(metrics: dict[str, float], step: int) -> None:
        to_mlflow(metrics, step)
        latest.update(metrics)
        write_progress()

    try:
        result = run(JobContext(cfg, inp, sink, progress))
    finally:
        wait = float(os.environ.get("JUDGEFLOW_MLFLOW_WAIT_S", MLFLOW_WAIT_S))
        if not to_mlflow.close(timeout_s=wait):
            logger.warning(
                "[judgeflow] MLflow at %s unavailable: metrics kept in %s; the flow sends them "
                "when it records this stage",
                tracker.tracking_uri,
                tracker.spool,
            )
    if result is not None:
        write_json(workdir / RESULT_FILE, result)
    return result


def main(argv: list[str] | None = None) -> int:
    """`python -m judgeflow.stages.jobs_main INPUT_JSON`: what a stage's job runs."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m judgeflow.stages.jobs_main", description=main.__doc__
    )
    parser.add_argument("input_file", type=Path, help="the stage's input.json")
    args = parser.parse_args(argv)
    show_logs(stream="stdout", fmt=JOB_FORMAT)  # the job's log file, as the lines it printed
    # SIGTERM (a cancel, scancel, the stage stopping its command) unwinds: metrics still queued
    # reach MLflow or the spool, and libraries' exit hooks remove their temporary folders.
    with exit_on_signals(logger.warning):
        run_stage_job(args.input_file)
    logger.info("stage finished: %s", args.input_file.parent / RESULT_FILE)
    return 0
