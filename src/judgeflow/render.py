"""`judgeflow render`: what each GPU stage of a recipe would submit, without submitting it.

Paths that only exist once the pipeline has run (prepared data, the MLflow run) are shown as
`<placeholders>`; everything else is exactly what the stage would run.
"""

from __future__ import annotations

import shlex

from judgeflow.cluster.stage import PYTHON
from judgeflow.cluster.submit import render_sbatch
from judgeflow.config import RunConfig
from judgeflow.stages import PreparedData, train_stage_spec

RUN_ID = "<mlflow-run-id>"


def render_recipe(cfg: RunConfig) -> str:
    data = PreparedData(
        train_file="<prepared>/train.parquet",
        val_file="<prepared>/train.val.parquet",
        report_file="<prepared>/train.report.json",
        report={},
    )
    spec = train_stage_spec(cfg, data, RUN_ID, dry_run=True)
    out = [
        f"# recipe {cfg.recipe}: stage train (engine {cfg.resolved_engine}, backend {cfg.cluster.backend})",
        "# ---- sbatch script (submitit) ----",
        render_sbatch(spec, cfg.cluster).rstrip(),
        "# ---- stage command (on the Ray head; python is the job's interpreter) ----",
        shlex.join("python" if part == PYTHON else part for part in spec.command),
    ]
    engine = _engine_command(cfg)
    if engine:
        out += ["# ---- engine command ----", engine]
    return "\n".join(out) + "\n"


def _engine_command(cfg: RunConfig) -> str | None:
    if cfg.resolved_engine != "verl":
        return None
    try:
        from judgeflow.engines.verl import main_ppo_command
    except ImportError:
        return None
    return " \\\n    ".join(
        shlex.quote(part)
        for part in main_ppo_command(
            cfg,
            train_files=["<prepared>/train.parquet"],
            val_files=["<prepared>/train.val.parquet"],
            checkpoint_dir="<checkpoints>",
        )
    )
