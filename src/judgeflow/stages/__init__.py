"""The pipeline's stages as plain functions: config in, paths and metrics out.

Prefect tasks wrap these one to one (`tasks/`); a Slurm job or a test can call them directly.
Each stage leaves its outputs in the artifact store under a content-derived key, so a re-run
with the same inputs finds them in the same place.

- `common`: the results stages hand each other, the artifact store, run directories;
- `data`: download, prepare (judge, judge SFT, GRRM);
- `train`: GRPO / RLVR (TRL or verl) and LLaMA-Factory SFT;
- `evaluate`: a judge's metrics on the validation rows;
- `judge`: a trained judge over unlabeled rows (`judgeflow judge`), and its MLflow record;
- `jobs`: each stage as a job (spec, and the entry point a job runs);
- `register`: a trained model as a registered version, and the champion gate's decision;
- `records`: what a pipeline run records in MLflow around its stages (import it by module).
"""

from judgeflow.stages.common import (
    GrrmData,
    PreparedData,
    Progress,
    SftData,
    TrainedModel,
    fetch,
    local_manifest,
    run_dir,
    start_tracking,
    store_for,
)
from judgeflow.stages.data import (
    GrrmRlPreparation,
    download_stage,
    grrm_rl_train_preparation,
    grrm_split_files,
    grrm_val_file,
    prepare_grrm_stage,
    prepare_sft_stage,
    prepare_stage,
    sft_source_config,
    val_source_config,
)
from judgeflow.stages.evaluate import decontamination_of, evaluate_stage
from judgeflow.stages.jobs import (
    PROGRESS_METRICS,
    STAGE_INPUT,
    evaluate_job_spec,
    evaluation_job_config,
    job_spec,
    judge_job_spec,
    metrics_spool,
    run_stage_job,
    sft_job_spec,
    train_job_spec,
)
from judgeflow.stages.judge import judge_stage, judges_with_verl, judging_batch
from judgeflow.stages.train import sft_stage, train_stage

__all__ = [
    "PROGRESS_METRICS",
    "STAGE_INPUT",
    "GrrmData",
    "GrrmRlPreparation",
    "PreparedData",
    "Progress",
    "SftData",
    "TrainedModel",
    "decontamination_of",
    "download_stage",
    "evaluate_job_spec",
    "evaluate_stage",
    "evaluation_job_config",
    "fetch",
    "grrm_rl_train_preparation",
    "grrm_split_files",
    "grrm_val_file",
    "job_spec",
    "judge_job_spec",
    "judge_stage",
    "judges_with_verl",
    "judging_batch",
    "local_manifest",
    "metrics_spool",
    "prepare_grrm_stage",
    "prepare_sft_stage",
    "prepare_stage",
    "run_dir",
    "run_stage_job",
    "sft_job_spec",
    "sft_source_config",
    "sft_stage",
    "start_tracking",
    "store_for",
    "train_job_spec",
    "train_stage",
    "val_source_config",
]
