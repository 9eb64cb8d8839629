"""One GRPO run: `train_grpo` builds the trainer from this package's pieces, trains, resumes.

The pieces: the params (`mapping`), the reward callables (`reward_adapter`), the trainer class
(`update`), where to resume (`checkpoints`), what each step trained on (`data_order`) and the
metrics and step lines (`logs`).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgeflow.engines.trl.checkpoints import checkpoint_step, last_complete_checkpoint
from judgeflow.engines.trl.data_order import DATA_ORDER_FILE, DataOrderRecorder
from judgeflow.engines.trl.logs import LineSink, MetricsCallback, MetricsSink, Progress, log_line
from judgeflow.engines.trl.mapping import GrpoParams, grpo_config
from judgeflow.engines.trl.reward_adapter import REWARD_COLUMNS, reward_functions, rlvr_verifiers
from judgeflow.engines.trl.update import resumable_trainer_class

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = ["TrainResult", "load_rl_parquet", "train_grpo"]


@dataclass(frozen=True)
class TrainResult:
    """Where the trained model is and how the run ended."""

    final_model_dir: Path  # model + tokenizer, save_pretrained layout (LoRA: merged)
    last_checkpoint: Path | None
    global_step: int
    resumed_from: Path | None
    metrics: dict[str, float] = field(default_factory=dict)  # last step's metrics + run summary


def train_grpo(
    params: GrpoParams,
    train_file: str | Path,
    *,
    eval_file: str | Path | None = None,
    metrics_sink: MetricsSink | None = None,
    progress: Progress | None = None,
    resume: bool = True,
    on_line: LineSink | None = None,
) -> TrainResult:
    """Train with GRPO on a verl RL parquet; resume from the newest checkpoint when there is one.

    Each logging step sends one readable line (`step_line`) to `on_line` instead of the
    Trainer's raw dict dump and progress bar. With `params.lora` the policy trains a peft
    adapter (the reference model is the start model, the adapter switched off); `final` holds
    the adapter merged into the start model, the adapter itself is kept in `adapter`.
    """
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    _limit_cpu_threads(params)
    output_dir = Path(params.output_dir)
    resumed_from = last_complete_checkpoint(output_dir) if resume else None

    recorder = MetricsCallback(metrics_sink, progress, on_line or log_line)
    data_order = DataOrderRecorder(
        output_dir / DATA_ORDER_FILE, params.num_generations, checkpoint_step(resumed_from)
    )
    tokenizer = policy_tokenizer(params.model_path, params.chat_template)
    reward_funcs: list[Any] = [
        *reward_functions(
            params.reward,
            observe=data_order.observe,
            rlvr_rules=params.rlvr_rules,
            stop_token_ids={tokenizer.eos_token_id, tokenizer.pad_token_id} - {None},
            stop_strings=params.stop_strings,
            verifiers=rlvr_verifiers(train_file) if params.reward == "rlvr" else (),
        )
    ]
    trainer = resumable_trainer_class()(
        model=params.model_path,
        reward_funcs=reward_funcs,
        args=grpo_config(params, has_eval=eval_file is not None, rewards=len(reward_funcs)),
        train_dataset=load_rl_parquet(train_file),
        eval_dataset=load_rl_parquet(eval_file) if eval_file is not None else None,
        processing_class=tokenizer,
        callbacks=[recorder, data_order],
        peft_config=_peft_config(params.lora) if params.lora else None,
    )
    trainer.filter_zero_std_samples = params.filter_zero_std_samples
    for noisy in (ProgressCallback, PrinterCallback):  # they print every log dict verbatim
        trainer.remove_callback(noisy)
    trainer.train(resume_from_checkpoint=str(resumed_from) if resumed_from else None)
    summary = {
        "train/summary/peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "train/summary/trainable_params": float(
            sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        ),
    }
    recorder.latest.update(summary)
    if metrics_sink is not None:
        metrics_sink(summary, trainer.state.global_step)

    final_dir = output_dir / "final"
    if params.lora:
        trainer.save_model(str(output_dir / "adapter"))
        merged = trainer.model.merge_and_unload()
        merged.save_pretrained(str(final_dir))
        tokenizer.save_pretrained(str(final_dir))
    else:
        trainer.save_model(str(final_dir))  # writes the tokenizer (it is the processing class)
    return TrainResult(
        final_model_dir=final_dir,
        last_checkpoint=last_complete_checkpoint(output_dir),
        global_step=trainer.state.global_step,
        resumed_from=resumed_from,
        metrics=dict(recorder.latest),
    )


def load_rl_parquet(path: str | Path) -> Dataset:
    """The verl parquet as a `datasets.Dataset` with the prompt and the reward inputs only."""
    import pyarrow.parquet as pq
    from datasets import Dataset

    table = pq.read_table(str(path))
    if "prompt" not in table.column_names:
        raise ValueError(f"{path}: no 'prompt' column (columns: {table.column_names})")
    if "reward_model" not in table.column_names:
        raise ValueError(f"{path}: no 'reward_model' column (columns: {table.column_names})")
    keep = ["prompt", *(c for c in REWARD_COLUMNS if c in table.column_names)]
    return Dataset(table.select(keep))  # in memory: no datasets cache directory to manage


def _peft_config(lora: Mapping[str, Any]) -> Any:
    """peft's LoRA config for a causal LM from `GrpoParams.lora` (r, lora_alpha, target_modules)."""
    from peft import LoraConfig

    return LoraConfig(task_type="CAUSAL_LM", lora_dropout=0.0, **lora)


def policy_tokenizer(model_path: str, chat_template: str | None = None) -> Any:
    """GRPO's processing class: TRL renders each prompt with its chat template, `chat_template`
    (`data.chat_template`) when given, and the saved policy keeps it."""
    from transformers import AutoTokenizer

    # Left truncation keeps the end of an over-long judge prompt: the output format instructions.
    tokenizer = AutoTokenizer.from_pretrained(model_path, truncation_side="left")
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    return tokenizer


def _limit_cpu_threads(params: GrpoParams) -> None:
    """Do not run more torch threads than CPUs we may use (containers report the host's)."""
    import torch

    if params.use_cpu is False:
        return
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = params.cpu_threads or min(torch.get_num_threads(), allowed or 1)
    if threads != torch.get_num_threads():
        torch.set_num_threads(max(1, threads))
