"""Training stages: GRPO / RLVR with the configured engine (TRL or verl), and LLaMA-Factory SFT."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgeflow.config import RunConfig, with_policy
from judgeflow.evaluation.decontamination import write_lineage
from judgeflow.stages.common import (
    PreparedData,
    Progress,
    TrainedModel,
    _published,
    fetch,
)
from judgeflow.stages.served_judge import served_judge
from judgeflow.tracking import Tracker

if TYPE_CHECKING:
    from judgeflow.engines.trl import TrainResult
    from judgeflow.engines.verl import VerlResult


def train_stage(
    cfg: RunConfig,
    data: PreparedData,
    *,
    output_dir: str | Path,
    run_id: str | None = None,
    metrics_sink: Callable[[dict[str, float], int], None] | None = None,
    progress: Progress | None = None,
) -> TrainedModel:
    """GRPO on the prepared data with the configured engine: TRL here, verl on a GPU cluster.

    Both resume from the newest checkpoint in `output_dir`, so a resubmitted job continues.
    The final model carries its lineage (`judgeflow.evaluation.decontamination`): this stage's training
    prompts and those of the model it started from.
    """
    cfg = with_policy(cfg, fetch(cfg, cfg.model.path))  # e.g. an SFT model in the store
    lineage = partial(
        write_lineage,
        stage="grpo" if cfg.mode != "grrm" else "rlvr",
        mode=cfg.mode,
        data_file=fetch(cfg, data.train_file),
        data_uri=data.train_file,
        start_model=cfg.model.path,
    )
    data = replace(
        data,
        train_file=fetch(cfg, data.train_file),
        val_file=fetch(cfg, data.val_file) if data.val_file else None,
    )
    # a judge-paid policy's judge, served inside the allocation (on Slurm, and beside verl)
    with served_judge(cfg, output_dir) as judge:
        if cfg.resolved_engine == "verl":
            from judgeflow.engines import verl

            tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri) if run_id else None
            result: TrainResult | VerlResult = verl.train_verl(
                verl.params_from(cfg, output_dir, served_judge=judge),
                [data.train_file],
                [data.val_file] if data.val_file else [data.train_file],
                mlflow_run_id=run_id,
                # verl's MLflow logger resumes the run by its name
                experiment_name=tracker.run_name() if tracker else None,
                progress=progress,  # verl's step log: progress and the standard train/* val/* names
                metrics_sink=metrics_sink,
            )
        else:
            from judgeflow.engines import trl

            result = trl.train_grpo(
                trl.params_from(cfg, output_dir, served_judge=judge),
                data.train_file,
                eval_file=data.val_file,
                metrics_sink=metrics_sink,
                progress=progress,
                resume=True,
            )
    final = Path(result.final_model_dir)
    lineage(final)
    return TrainedModel(
        model_dir=_published(cfg, final, "runs", run_id or "local", "final")(str(final)),
        checkpoint_dir=str(result.last_checkpoint) if result.last_checkpoint else None,
        global_step=result.global_step,
        resumed_from=str(result.resumed_from) if result.resumed_from else None,
        metrics=dict(result.metrics),
    )


def sft_stage(
    cfg: RunConfig,
    sft_file: str,
    *,
    output_dir: str | Path,
    run_id: str | None = None,
    metrics_sink: Callable[[dict[str, float], int], None] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """LLaMA-Factory SFT of model.path on `messages` rows; returns the model dir and metrics."""
    from judgeflow.engines import llamafactory

    cfg = with_policy(cfg, fetch(cfg, cfg.model.path))
    local_file = fetch(cfg, sft_file)
    result = llamafactory.run_sft(
        llamafactory.params_from(cfg, output_dir),
        local_file,
        metrics_sink=metrics_sink,
        progress=progress,
    )
    if os.environ.get("NODE_RANK", "0") == "0":  # one lineage file, from the node that saves
        write_lineage(
            result.model_dir, stage="sft", mode=cfg.mode, data_file=local_file,
            data_uri=sft_file, start_model=cfg.model.path,
        )  # fmt: skip
    model = _published(cfg, Path(result.model_dir), "runs", run_id or "local", "sft")
    return {"model_dir": model(str(result.model_dir)), "metrics": dict(result.metrics)}
