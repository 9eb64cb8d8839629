"""`judgeflow render`: what each GPU stage of a recipe would submit, and the job `judgeflow judge`
submits with the recipe's settings, without submitting anything.

Paths that only exist once the pipeline has run (prepared data, the MLflow run, the model being
evaluated) are shown as `<placeholders>`; everything else is exactly what the stage would run.
"""

from __future__ import annotations

import shlex

from judgeflow.cluster.job import PYTHON, JobSpec
from judgeflow.cluster.ray_jobs import render_submit
from judgeflow.cluster.submit import render_sbatch
from judgeflow.config import RunConfig, with_policy
from judgeflow.config.redaction import strip_credentials
from judgeflow.modes import JUDGE_MODELS
from judgeflow.stages import (
    PreparedData,
    evaluate_job_spec,
    evaluation_job_config,
    judge_job_spec,
    judges_with_verl,
    train_job_spec,
)
from judgeflow.stages.served_judge import judge_server_command, judge_server_gpus

RUN_ID = "<mlflow-run-id>"
MODEL_DIR = "<model-dir>"
JUDGE_DATA, JUDGE_OUTPUT = "<rows.jsonl>", "<verdicts.parquet>"
TRAIN_FILE, VAL_FILE = "<prepared>/train.parquet", "<prepared>/train.val.parquet"
DATA = PreparedData(
    train_file=TRAIN_FILE,
    val_file=VAL_FILE,
    report_file="<prepared>/train.report.json",
    report={},
)


def render_recipe(cfg: RunConfig) -> str:
    from judgeflow.registry.paying_judge import pin_judge

    if not cfg.reward.judge_url:  # a served judge is asked what it serves when a run starts
        cfg, _ = pin_judge(cfg)  # a paying judge's version, as the run would pin it
    spec = train_job_spec(cfg, DATA, RUN_ID, dry_run=True)
    out = [
        f"# recipe {cfg.recipe}: stage train (engine {cfg.resolved_engine}, backend {cfg.cluster.backend})",
        f"# data: {strip_credentials(cfg.data.label)}, prepared into {TRAIN_FILE} before the job"
        + (f"; chat template {cfg.data.chat_template}" if cfg.data.chat_template else ""),
        *_submission(spec, cfg),
        "# ---- stage command (on the Ray head; python is the job's interpreter) ----",
        _shell(spec.command),
    ]
    engine = _engine_command(cfg)
    server = judge_server_command(cfg)
    if server:
        where = f"GPUs {judge_server_gpus(cfg)}" if judge_server_gpus(cfg) else "CPU"
        out += [
            f"# ---- the paying judge, served by the train job on the head node's {where} "
            f"before {cfg.resolved_engine} starts, on a port free then (watched; checked to be "
            "this job's own) ----",
            f"CUDA_VISIBLE_DEVICES={judge_server_gpus(cfg)} {_shell(server)}",
        ]
    if engine:
        out += ["# ---- engine command ----", engine]
    out += _evaluation(cfg)
    out += _judging(cfg)
    return "\n".join(out) + "\n"


def _submission(spec: JobSpec, cfg: RunConfig) -> list[str]:
    """How the stage's job is submitted: the sbatch script, or (backend ray) `ray job submit`."""
    if cfg.cluster.backend == "ray":
        return [
            "# ---- Ray Job (JobSubmissionClient.submit_job; the same as) ----",
            render_submit(spec, cfg.cluster),
        ]
    return ["# ---- sbatch script (submitit) ----", render_sbatch(spec, cfg.cluster).rstrip()]


def _shell(command: list[str]) -> str:
    return shlex.join("python" if part == PYTHON else part for part in command)


def _evaluation(cfg: RunConfig) -> list[str]:
    """The evaluation job (shown for the model after training; before/SFT ones are alike)."""
    job = evaluation_job_config(cfg)
    head = (
        f"# recipe {cfg.recipe}: stage evaluate (engine {job.resolved_engine}, "
        f"backend {job.cluster.backend}; evaluate-before/-sft differ only in the model)"
    )
    try:
        spec = evaluate_job_spec(job, MODEL_DIR, DATA, RUN_ID, "after", dry_run=True)
    except ValueError as exc:
        return [head, f"# cannot run: {exc}"]
    out = [head]
    if job.cluster.backend != "local":
        where = "on the Ray head" if spec.ray else "one process"
        out += [
            *_submission(spec, job),
            f"# ---- stage command ({where}; python is the job's interpreter) ----",
            _shell(spec.command),
        ]
    else:
        out.append("# runs in the flow's own process (backend local)")
    engine = _validation_command(job, spec.workdir)
    if engine:
        out += [
            "# ---- engine command (verl validation mode; judgeflow scores its dump) ----",
            engine,
        ]
    return out


def _judging(cfg: RunConfig) -> list[str]:
    """`judgeflow judge MODEL --data … --output …` with this config (a judge's own, for a
    registered version), as a job on the evaluation's resources."""
    head = (
        f"# recipe {cfg.recipe}: judging, `judgeflow judge {MODEL_DIR} --data {JUDGE_DATA} "
        f"--output {JUDGE_OUTPUT}` (backend {cfg.cluster.backend})"
    )
    if cfg.mode not in JUDGE_MODELS:
        return []  # a policy writes no verdicts: there is nothing to judge with
    if cfg.cluster.backend != "slurm":
        return [head, f"# runs in judgeflow judge's own process (backend {cfg.cluster.backend})"]
    job = evaluation_job_config(cfg)
    spec = judge_job_spec(
        cfg, MODEL_DIR, JUDGE_DATA, JUDGE_OUTPUT, RUN_ID, model_ref=MODEL_DIR, dry_run=True
    )
    where = "on the Ray head" if spec.ray else "one process"
    out = [
        head,
        "# ---- sbatch script (submitit) ----",
        render_sbatch(spec, job.cluster).rstrip(),
        f"# ---- stage command ({where}; python is the job's interpreter) ----",
        _shell(spec.command),
    ]
    if judges_with_verl(job):
        from judgeflow.engines.verl_eval import judging_command

        command = judging_command(with_policy(job, MODEL_DIR), spec.workdir)
        rows = job.evaluation.rows_per_verl_run
        out += [
            f"# ---- engine command (verl validation mode, once per {rows} rows; "
            "judgeflow parses its dump) ----",
            _continued(command),
        ]
    return out


def _validation_command(job: RunConfig, stage_dir: str) -> str | None:
    if job.resolved_engine != "verl":
        return None
    from judgeflow.engines.verl_eval import evaluation_gpus, validation_command

    command = validation_command(
        with_policy(job, MODEL_DIR),
        eval_file=VAL_FILE,
        train_file=TRAIN_FILE,
        output_dir=stage_dir,
        n_gpus=evaluation_gpus(job),
    )
    return _continued(command)


def _continued(command: list[str]) -> str:
    return " \\\n    ".join(shlex.quote(part) for part in command)


def _engine_command(cfg: RunConfig) -> str | None:
    if cfg.resolved_engine != "verl":
        return None
    try:
        from judgeflow.engines.verl import main_ppo_command
    except ImportError:
        return None
    return _continued(
        main_ppo_command(
            cfg,
            train_files=[TRAIN_FILE],
            val_files=[VAL_FILE],
            checkpoint_dir="<checkpoints>",
        )
    )
