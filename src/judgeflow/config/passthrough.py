"""The engines' passthroughs (`sft.extra`, `grpo.trl_extra`), checked against the engines' own
definitions when a config is read: a key the engine lacks is refused with the closest names it
has, and so is one judgeflow writes itself (it has its `sft.*` or `grpo.*` key, or is fixed).

What judgeflow writes is listed here, beside the config; tests/engines hold each list to what
the engine modules write (`engines.llamafactory.train_config`, `engines.trl.grpo_config`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from difflib import get_close_matches
from typing import Any

__all__ = ["LLAMAFACTORY_WRITTEN", "TRL_SET", "checked", "llamafactory_problems", "trl_problems"]

#: The LLaMA-Factory train arguments judgeflow writes.
LLAMAFACTORY_WRITTEN = frozenset({
    "bf16", "cutoff_len", "dataloader_num_workers", "dataset", "dataset_dir", "ddp_timeout",
    "deepspeed", "do_train", "finetuning_type", "flash_attn", "fp16",
    "gradient_accumulation_steps", "learning_rate", "logging_steps", "lora_alpha",
    "lora_dropout", "lora_rank", "lora_target", "lr_scheduler_type",
    "max_steps", "model_name_or_path", "num_train_epochs", "output_dir", "overwrite_cache",
    "overwrite_output_dir", "per_device_train_batch_size", "plot_loss",
    "preprocessing_num_workers", "report_to", "save_steps", "seed", "stage", "template",
    "warmup_ratio",
})  # fmt: skip
#: The fields of TRL's GRPOConfig judgeflow sets.
TRL_SET = frozenset({
    "beta", "bf16", "dataloader_num_workers", "epsilon", "epsilon_high", "eval_steps",
    "eval_strategy", "gradient_accumulation_steps", "gradient_checkpointing",
    "importance_sampling_level", "learning_rate", "log_completions", "logging_steps",
    "loss_type", "lr_scheduler_kwargs", "lr_scheduler_type", "max_completion_length",
    "max_grad_norm", "max_prompt_length", "max_steps", "num_generations", "num_train_epochs",
    "output_dir", "per_device_eval_batch_size", "per_device_train_batch_size", "report_to",
    "reward_weights", "save_steps", "save_strategy", "save_total_limit", "scale_rewards", "seed",
    "shuffle_dataset", "temperature", "top_k", "top_p", "use_cpu", "use_vllm", "warmup_ratio",
})  # fmt: skip


def checked(extra: dict[str, Any], engine: str) -> dict[str, Any]:
    """`extra` when the engine (`llamafactory` or `trl`) has every key of it; else a ValueError
    naming each problem. The engine is imported only to check keys someone set."""
    if extra:
        problems = (llamafactory_problems if engine == "llamafactory" else trl_problems)(extra)
        if problems:
            raise ValueError("; ".join(problems))
    return extra


def llamafactory_problems(extra: Mapping[str, Any]) -> list[str]:
    """What is wrong with `sft.extra`'s keys: each must be an argument of LLaMA-Factory's own
    classes (model, data, training, fine-tuning, generation: what `llamafactory-cli train`
    parses, unknown keys refused) that judgeflow does not write."""
    from llamafactory.hparams import (
        DataArguments,
        FinetuningArguments,
        GeneratingArguments,
        ModelArguments,
        TrainingArguments,
    )

    classes = (ModelArguments, DataArguments, TrainingArguments, FinetuningArguments,
               GeneratingArguments)  # fmt: skip
    known = {f.name for c in classes for f in dataclasses.fields(c)}
    return _problems(extra, known, LLAMAFACTORY_WRITTEN, "an argument of LLaMA-Factory's "
                     "train command", "written by judgeflow (its sft.* key, or fixed)")  # fmt: skip


def trl_problems(extra: Mapping[str, Any]) -> list[str]:
    """What is wrong with `grpo.trl_extra`'s keys: each must be a field of TRL's GRPOConfig
    that judgeflow does not set."""
    from trl import GRPOConfig

    known = {f.name for f in dataclasses.fields(GRPOConfig)}
    return _problems(extra, known, TRL_SET, "a field of TRL's GRPOConfig",
                     "set by judgeflow (its grpo.* key, or fixed)")  # fmt: skip


def _problems(
    extra: Iterable[str], known: set[str], owned: frozenset[str], what: str, whose: str
) -> list[str]:
    problems = []
    for key in extra:
        if key in owned:
            problems.append(f"{key} is {whose}: not here")
        elif key not in known:
            near = get_close_matches(key, sorted(known), n=3)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            problems.append(f"{key} is not {what}{hint}")
    return problems
