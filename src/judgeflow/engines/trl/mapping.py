"""The config mapping: the run config -> `GrpoParams` (engine-neutral) -> TRL's `GRPOConfig`.

`params_from` refuses a `grpo` key TRL cannot honour, so a config error shows before a job runs;
its `GrpoParams` are what the golden files in `tests/golden/trl/` hold. `grpo_config` is the one
place TRL's own argument names appear.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from judgeflow.engines.trl.reward_adapter import reward_functions
from judgeflow.modes import Mode

if TYPE_CHECKING:
    from judgeflow.config import RunConfig

__all__ = [
    "LOSS_MODES",
    "LOSS_TYPES",
    "GrpoParams",
    "grpo_config",
    "params_from",
]


@dataclass(frozen=True)
class GrpoParams:
    """Engine-neutral GRPO knobs; the run configuration maps onto these.

    Batch shape: each optimizer step generates `prompts_per_step * num_generations` completions
    and back-propagates them `micro_batch_size` at a time (gradient accumulation makes up the rest).
    """

    model_path: str
    output_dir: str
    reward: Mode  # rlvr: a policy paid by verifiers (`judgeflow.rewards.rlvr`)
    learning_rate: float = 1e-6
    num_generations: int = 4
    prompts_per_step: int = 1
    micro_batch_size: int = 4
    max_prompt_length: int = 4096
    max_completion_length: int = 2048
    max_steps: int = -1  # -1: run num_train_epochs
    num_train_epochs: float = 1.0
    beta: float = 0.001  # KL coefficient; 0 switches the reference model off
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo"] = "dapo"
    scale_rewards: Literal["group", "batch", "none"] = "group"  # "none": GRPO without std
    lr_scheduler_type: str = "constant"
    lr_scheduler_kwargs: Mapping[str, Any] = field(default_factory=dict)
    warmup_ratio: float = 0.0
    epsilon: float = 0.2  # clip range below 1
    epsilon_high: float | None = None  # clip range above 1; None: epsilon
    importance_sampling_level: Literal["token", "sequence"] = "token"  # "sequence": GSPO
    shuffle_dataset: bool = True
    max_grad_norm: float = 1.0
    save_steps: int = 20
    save_total_limit: int | None = None
    logging_steps: int = 1
    eval_steps: int | None = None  # None: evaluate every save_steps when an eval file is given
    seed: int = 0
    use_cpu: bool | None = None  # None: CPU exactly when CUDA is unavailable
    bf16: bool | None = None  # None: bf16 on a GPU that supports it, fp32 otherwise
    gradient_checkpointing: bool = False
    cpu_threads: int | None = None  # None: at most the CPUs this process may use
    #: open-instruct's --filter_zero_std_samples: completions of groups without reward variance
    #: are not trained on (their micro-batches skipped; `engines.zero_variance`).
    filter_zero_std_samples: bool = False
    #: reward="rlvr": the reward's settings (`judgeflow.rewards.rlvr.score.compute_score`'s
    #: keywords: RewardRules fields and the sandbox's bounds).
    rlvr_rules: Mapping[str, Any] = field(default_factory=dict)
    #: Any other field of TRL's GRPOConfig, by its name (`grpo.trl_extra`, checked by
    #: `config.passthrough`).
    trl_extra: Mapping[str, Any] = field(default_factory=dict)
    #: LoRA (`grpo.lora`, rank > 0): peft's `r`, `lora_alpha` and `target_modules`; empty: off
    lora: Mapping[str, Any] = field(default_factory=dict)
    #: "wandb": TRL reports to W&B too (tracking.wandb; the job's WANDB_* variables say where)
    report_to: Literal["none", "wandb"] = "none"
    #: open-instruct's --stop_strings (`grpo.stop_strings`): generation ends where one appears
    stop_strings: Sequence[str] = ()
    #: `data.chat_template` (Jinja): the prompts are rendered with it, not the tokenizer's own
    chat_template: str | None = None

    def __post_init__(self) -> None:
        completions = self.prompts_per_step * self.num_generations
        if self.num_generations < 2:
            raise ValueError(f"num_generations must be at least 2 (got {self.num_generations})")
        if self.prompts_per_step < 1 or self.micro_batch_size < 1:
            raise ValueError("prompts_per_step and micro_batch_size must be positive")
        if self.filter_zero_std_samples and self.loss_type != "dapo":
            # The other losses average within each micro-batch: a micro-batch the filtering
            # left part-full would weigh each of its completions more.
            raise ValueError(
                "filter_zero_std_samples needs the token-mean loss (loss_type 'dapo'), "
                f"not {self.loss_type!r}"
            )
        if completions % self.micro_batch_size:
            raise ValueError(
                f"prompts_per_step * num_generations ({completions}) must be a multiple of "
                f"micro_batch_size ({self.micro_batch_size})"
            )

    @property
    def gradient_accumulation_steps(self) -> int:
        return self.prompts_per_step * self.num_generations // self.micro_batch_size


#: verl's loss aggregation -> TRL's loss type (TRL has no seq-mean-token-sum).
LOSS_TYPES: dict[str, Literal["grpo", "dapo", "dr_grpo", "bnpo"]] = {
    "token-mean": "dapo",  # token mean over the whole batch
    "seq-mean-token-mean": "grpo",
    "seq-mean-token-sum-norm": "dr_grpo",
}
#: verl's policy loss -> TRL's importance-sampling level; the others are verl-only.
LOSS_MODES: dict[str, Literal["token", "sequence"]] = {"vanilla": "token", "gspo": "sequence"}


def params_from(
    cfg: RunConfig, output_dir: str | Path, served_judge: Mapping[str, Any] | None = None
) -> GrpoParams:
    """The run config as TRL's GRPO knobs; a `grpo` key TRL cannot honour is a config error.
    `served_judge`: the paying judge the job serves inside its allocation
    (`stages.served_judge`), which the reward calls instead of loading the judge itself."""
    from judgeflow.config import ConfigError

    g = cfg.grpo
    if g.loss_agg_mode not in LOSS_TYPES:
        raise ConfigError(
            f"grpo.loss_agg_mode={g.loss_agg_mode} has no TRL equivalent; use one of "
            f"{', '.join(LOSS_TYPES)} or engine=verl"
        )
    if g.filter_zero_std_samples and g.loss_agg_mode != "token-mean":
        raise ConfigError(
            "grpo.filter_zero_std_samples=true needs grpo.loss_agg_mode=token-mean on TRL (the "
            "other losses average within a micro-batch, and a part-full one would weigh more)"
        )
    if g.loss_mode not in LOSS_MODES:
        raise ConfigError(
            f"grpo.loss_mode={g.loss_mode} is verl-only; TRL has {', '.join(LOSS_MODES)}"
        )
    scheduler: str = g.lr_scheduler_type
    kwargs: dict[str, float] = {}
    if scheduler == "cosine" and g.min_lr_ratio > 0:
        scheduler, kwargs = "cosine_with_min_lr", {"min_lr_rate": g.min_lr_ratio}
    return GrpoParams(
        model_path=cfg.model.path,
        output_dir=str(output_dir),
        reward=cfg.mode,
        learning_rate=g.learning_rate,
        lr_scheduler_type=scheduler,
        lr_scheduler_kwargs=kwargs,
        warmup_ratio=g.lr_warmup_steps_ratio,
        num_generations=g.rollout_n,
        prompts_per_step=g.train_batch_size,
        micro_batch_size=g.rollout_n,  # one prompt's group per forward/backward pass
        max_prompt_length=cfg.data.max_prompt_length,
        max_completion_length=cfg.data.max_response_length,
        max_steps=g.max_steps or -1,
        num_train_epochs=g.total_epochs,
        beta=g.kl_loss_coef if g.use_kl_loss else 0.0,
        temperature=g.temperature,
        top_p=g.top_p,
        top_k=g.top_k if g.top_k > 0 else None,
        loss_type=LOSS_TYPES[g.loss_agg_mode],
        scale_rewards="group" if g.norm_adv_by_std_in_grpo else "none",
        epsilon=g.clip_ratio_low,
        epsilon_high=g.clip_ratio_high,
        importance_sampling_level=LOSS_MODES[g.loss_mode],
        shuffle_dataset=g.data_shuffle,
        save_steps=g.save_freq,
        save_total_limit=g.max_actor_ckpt_to_keep,
        eval_steps=g.test_freq,
        seed=cfg.data.seed,
        gradient_checkpointing=g.gradient_checkpointing,
        filter_zero_std_samples=g.filter_zero_std_samples,
        rlvr_rules=cfg.policy_reward_kwargs(served=served_judge),  # and the paying judge
        trl_extra=dict(g.trl_extra),
        lora=(
            {
                "r": g.lora.rank,
                "lora_alpha": g.lora.scale_numerator,
                "target_modules": g.lora.target,
            }
            if g.lora.enabled
            else {}
        ),
        report_to="wandb" if cfg.tracking.wandb.project else "none",
        stop_strings=tuple(g.stop_strings),
        chat_template=cfg.data.chat_template_jinja if cfg.mode == "rlvr" else None,
    )


def grpo_config(params: GrpoParams, *, has_eval: bool, rewards: int | None = None) -> Any:
    """TRL's config; `rewards`: how many reward functions there are (the first pays), by default
    as many as `reward_functions` gives without per-verifier probes. `trl_extra` adds the fields
    judgeflow does not set."""
    from trl import GRPOConfig

    arguments = _config_arguments(params, has_eval=has_eval, rewards=rewards)
    extra = dict(params.trl_extra)
    if params.stop_strings:  # beside any generation_kwargs of the user's own
        given = dict(extra.pop("generation_kwargs", None) or {})
        if "stop_strings" in given:
            raise ValueError("set stop strings with grpo.stop_strings, not in generation_kwargs")
        if extra.get("mask_truncated_completions"):
            raise ValueError(
                "grpo.stop_strings with mask_truncated_completions: TRL counts a rollout that "
                "stopped at a string as truncated (it ends in no end-of-sequence token) and "
                "would train on none of them"
            )
        # transformers' generate stops at these (the trainer hands it the tokenizer it needs)
        arguments["generation_kwargs"] = {**given, "stop_strings": list(params.stop_strings)}
    if clash := sorted(set(arguments) & set(extra)):
        raise ValueError(f"grpo.trl_extra sets {clash}, which judgeflow sets itself")
    return GRPOConfig(**arguments, **extra)


def _config_arguments(
    params: GrpoParams, *, has_eval: bool, rewards: int | None = None
) -> dict[str, Any]:
    """GRPOConfig's arguments that judgeflow sets."""
    import torch

    use_cpu = not torch.cuda.is_available() if params.use_cpu is None else params.use_cpu
    bf16 = params.bf16
    if bf16 is None:  # GRPOConfig would default to bf16 even on CPU
        bf16 = not use_cpu and torch.cuda.is_bf16_supported()
    eval_steps = params.eval_steps or params.save_steps
    return dict(
        output_dir=params.output_dir,
        learning_rate=params.learning_rate,
        lr_scheduler_type=params.lr_scheduler_type,
        lr_scheduler_kwargs=dict(params.lr_scheduler_kwargs) or None,
        warmup_ratio=params.warmup_ratio,
        max_grad_norm=params.max_grad_norm,
        per_device_train_batch_size=params.micro_batch_size,
        gradient_accumulation_steps=params.gradient_accumulation_steps,
        num_generations=params.num_generations,
        max_prompt_length=params.max_prompt_length,
        max_completion_length=params.max_completion_length,
        max_steps=params.max_steps,
        num_train_epochs=params.num_train_epochs,
        beta=params.beta,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k,
        loss_type=params.loss_type,
        epsilon=params.epsilon,
        epsilon_high=params.epsilon_high,
        importance_sampling_level=params.importance_sampling_level,
        shuffle_dataset=params.shuffle_dataset,
        scale_rewards=params.scale_rewards,
        # The score pays; the format-failure (and verifiable-correct) probes only report.
        reward_weights=[1.0] + [0.0] * ((rewards or len(reward_functions(params.reward))) - 1),
        save_strategy="steps",
        save_steps=params.save_steps,
        save_total_limit=params.save_total_limit,
        logging_steps=params.logging_steps,
        eval_strategy="steps" if has_eval else "no",
        eval_steps=eval_steps if has_eval else None,
        per_device_eval_batch_size=params.num_generations,  # whole prompt groups
        seed=params.seed,
        use_cpu=use_cpu,
        bf16=bf16,
        gradient_checkpointing=params.gradient_checkpointing,
        use_vllm=False,
        dataloader_num_workers=0,
        report_to=params.report_to,  # metrics reach MLflow through the sink only
        log_completions=False,
    )
