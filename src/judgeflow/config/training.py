"""How a model is trained: LLaMA-Factory SFT and GRPO (verl's keys, which TRL maps)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from judgeflow.config.passthrough import checked
from judgeflow.config.section import Section


class SftLoraConfig(Section):
    """The adapter LLaMA-Factory trains with `sft.finetuning_type: lora` (its `lora_*` arguments);
    merged into the base model (LLaMA-Factory's export) before anything else uses it."""

    rank: int = Field(8, gt=0, description="LoRA rank (LLaMA-Factory `lora_rank`)")
    alpha: int | None = Field(
        None, gt=0, description="LoRA scale numerator (`lora_alpha`); unset: 2 x rank"
    )
    dropout: float = Field(0.0, ge=0, lt=1, description="dropout on the adapter's input")
    target: str = Field(
        "all",
        description="modules that get an adapter (`lora_target`): `all` linear layers, or "
        "comma-separated names such as `q_proj,v_proj`",
    )


class GrpoLoraConfig(Section):
    """LoRA for GRPO: TRL through peft (`peft_config`), verl through `actor_rollout_ref.model.
    lora_*`; off at rank 0. The registered model is the adapter merged into the start model."""

    rank: int = Field(0, ge=0, description="LoRA rank; 0: full fine-tuning (verl `lora_rank`)")
    alpha: int | None = Field(
        None, gt=0, description="LoRA scale numerator (verl `lora_alpha`); unset: 2 x rank"
    )
    target: str | list[str] = Field(
        "all-linear",
        description="modules that get an adapter: `all-linear`, or a list of module names "
        "(verl `target_modules`, peft `target_modules`)",
    )

    @property
    def enabled(self) -> bool:
        return self.rank > 0

    @property
    def scale_numerator(self) -> int:
        return self.alpha if self.alpha is not None else 2 * self.rank


class SftConfig(Section):
    """LLaMA-Factory supervised fine-tuning; the base model is model.path.

    GRRM always has it (its `--stage` picks sft / rlvr / full, data from the GRRM source). The
    judge recipes run it before GRPO when `enabled`, on the `messages` rows of `source`
    (OpenJudge's SFT format), and GRPO then starts from the SFT model.
    """

    enabled: bool = Field(False, description="judge recipes: SFT warm start before GRPO")
    source: str | None = Field(None, description="judge recipes: SFT data (`messages` rows)")
    template: str = Field(
        "chatml", description="LLaMA-Factory chat template (`chatml` for Qwen2.5 base models)"
    )
    cutoff_len: int = Field(12000, gt=0, description="longest tokenized example, in tokens")
    per_device_train_batch_size: int = Field(
        4, gt=0, description="examples per GPU and micro-batch"
    )
    gradient_accumulation_steps: int = Field(
        1, gt=0, description="micro-batches per optimizer step"
    )
    learning_rate: float = Field(6e-6, gt=0, description="peak learning rate")
    num_train_epochs: float = Field(3.0, gt=0, description="passes over the SFT data")
    lr_scheduler_type: str = Field(
        "cosine", description="learning-rate schedule (a transformers scheduler name)"
    )
    warmup_ratio: float = Field(
        0.1, ge=0, lt=1, description="share of the steps that warm the learning rate up"
    )
    bf16: bool | None = Field(None, description="None: on exactly when a GPU is present")
    deepspeed: str | None = Field("zero3", description="zero3, a JSON path, or null (CPU)")
    finetuning_type: Literal["full", "lora", "freeze"] = Field(
        "full", description="LLaMA-Factory fine-tuning: `full`, `lora` or `freeze`"
    )
    lora: SftLoraConfig = Field(
        default_factory=SftLoraConfig,
        description="the adapter of finetuning_type lora (ignored, with a warning, otherwise)",
    )
    flash_attn: Literal["auto", "disabled", "sdpa", "fa2", "fa3"] = Field(
        "fa2", description="LLaMA-Factory attention; auto leaves it to transformers (sdpa)"
    )
    max_steps: int | None = Field(
        None, gt=0, description="stop after this many steps; unset: num_train_epochs"
    )
    save_steps: int = Field(
        500000, gt=0, description="checkpoint every N steps (the default: only the final save)"
    )
    preprocessing_num_workers: int | None = Field(
        16, description="processes that tokenize the data; unset: the main process"
    )
    dataloader_num_workers: int = Field(4, ge=0, description="DataLoader worker processes")
    extra: dict[str, Any] = Field(
        default_factory=dict,
        description="any other argument of LLaMA-Factory's train command, by its name (e.g. "
        "{weight_decay: 0.01}); checked against LLaMA-Factory's own argument classes, and one "
        "judgeflow writes is refused (set it by its sft.* key)",
    )

    @field_validator("extra")
    @classmethod
    def _llamafactory_arguments(cls, extra: dict[str, Any]) -> dict[str, Any]:
        return checked(extra, "llamafactory")


class GrpoConfig(Section):
    """GRPO hyperparameters, named after verl's keys so `render` maps them one to one."""

    adv_estimator: Literal["grpo"] = Field(
        "grpo", description="advantage estimator (verl `algorithm.adv_estimator`)"
    )
    train_batch_size: int = Field(96, gt=0, description="prompts per step")
    val_batch_size: int = Field(192, gt=0, description="prompts per validation batch")
    learning_rate: float = Field(1e-6, gt=0, description="actor learning rate (peak)")
    use_kl_loss: bool = Field(True, description="KL loss against the reference model")
    kl_loss_coef: float = Field(0.001, ge=0, description="0 switches the reference model off")
    kl_loss_type: str = Field(
        "low_var_kl", description="KL estimator of the KL loss (`low_var_kl`, `mse`, …)"
    )
    use_kl_in_reward: bool = Field(
        False, description="subtract a KL penalty from the reward (coefficient: kl_ctrl_coef)"
    )
    rollout_n: int = Field(4, ge=2, description="completions per prompt (the group)")
    filter_zero_std_samples: bool = Field(
        False,
        description="skip the groups whose completions all got the same reward (open-instruct's "
        "flag, on in grpo_fast; TRL only: verl 0.6.1's main_ppo trains on them)",
    )
    temperature: float = Field(1.0, gt=0, description="rollout sampling temperature")
    gpu_memory_utilization: float = Field(
        0.6, gt=0, le=1, description="vLLM's share of GPU memory; lower it first on rollout OOM"
    )
    ppo_mini_batch_size: int = Field(24, gt=0, description="prompts per actor update")
    ppo_micro_batch_size_per_gpu: int = Field(
        1, gt=0, description="samples per GPU and forward/backward pass"
    )
    gradient_checkpointing: bool = Field(
        True, description="recompute activations in the backward pass (memory saver)"
    )
    use_remove_padding: bool = Field(
        True, description="pack sequences without padding (memory saver)"
    )
    ref_param_offload: bool = Field(
        True, description="offload the reference model's parameters (memory saver)"
    )
    reward_manager: Literal["naive", "dapo", "prime", "batch"] = Field(
        "naive",
        description="verl reward manager: `naive`, `dapo` or `prime` for judgeflow's per-sample "
        "rewards; `batch` for a judge-paid policy (reward.judge), which needs it",
    )
    total_epochs: int = Field(1, gt=0, description="passes over the training data")
    max_steps: int | None = Field(None, gt=0, description="stop after this many steps")
    save_freq: int = Field(20, gt=0, description="checkpoint every N steps")
    test_freq: int = Field(10, gt=0, description="validate every N steps")
    # verl-only knobs (the TRL engine ignores them). Defaults are the grpo-pointwise reference
    # (OpenJudge's run_pointwise.sh) or, where it is silent, verl 0.6.1's own default.
    strategy: Literal["fsdp", "fsdp2"] = Field("fsdp", description="actor (and ref) FSDP version")
    model_dtype: Literal["fp32", "bf16"] = Field("fp32", description="FSDP parameter dtype")
    lr_scheduler_type: Literal["constant", "cosine"] = Field(
        "constant", description="learning-rate schedule"
    )
    lr_warmup_steps_ratio: float = Field(
        0.0, ge=0, le=1, description="share of the steps that warm the learning rate up"
    )
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="cosine floor, share of the lr")
    loss_mode: str = Field("vanilla", description="policy loss: vanilla, gspo, clip_cov, …")
    loss_agg_mode: Literal[
        "token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"
    ] = Field("token-mean", description="how token losses are aggregated (TRL: `loss_type`)")
    clip_ratio_low: float = Field(
        0.2, gt=0, description="lower clip range of the policy ratio (TRL: `epsilon`)"
    )
    clip_ratio_high: float = Field(
        0.2, gt=0, description="upper clip range of the policy ratio (TRL: `epsilon_high`)"
    )
    entropy_coeff: float = Field(0.0, ge=0, description="entropy bonus coefficient")
    kl_ctrl_coef: float = Field(0.001, ge=0, description="in-reward KL coefficient")
    norm_adv_by_std_in_grpo: bool = Field(True, description="False: Dr.GRPO-style advantages")
    actor_shuffle: bool = Field(False, description="shuffle within a PPO mini-batch epoch")
    data_shuffle: bool = Field(True, description="shuffle the training data")
    truncation: Literal["error", "left", "right", "middle"] = Field(
        "right", description="what verl does with a prompt still too long after filtering"
    )
    param_offload: bool = Field(False, description="offload actor parameters (OOM relief)")
    optimizer_offload: bool = Field(
        False, description="offload the actor's optimizer state (OOM relief)"
    )
    ulysses_sequence_parallel_size: int = Field(
        1, gt=0, description="Ulysses sequence-parallel degree"
    )
    use_dynamic_bsz: bool = Field(False, description="pack by tokens, not by sample count")
    ppo_max_token_len_per_gpu: int = Field(16384, gt=0, description="with use_dynamic_bsz")
    log_prob_micro_batch_size_per_gpu: int = Field(1, gt=0, description="rollout log-probs")
    ref_log_prob_micro_batch_size_per_gpu: int = Field(
        1, gt=0, description="reference log-probs: samples per GPU and pass"
    )
    rollout_name: Literal["vllm", "sglang"] = Field("vllm", description="rollout engine")
    rollout_mode: Literal["sync", "async"] = Field("sync", description="rollout mode")
    rollout_tensor_model_parallel_size: int | None = Field(
        None, gt=0, description="vLLM tensor parallelism; unset: GPUs per node (the reference)"
    )
    calculate_log_probs: bool = Field(False, description="rollout returns its own log-probs")
    top_p: float = Field(1.0, gt=0, le=1, description="rollout nucleus sampling share")
    top_k: int = Field(-1, description="-1: off")
    stop_strings: list[str] = Field(
        default_factory=list,
        description="open-instruct's --stop_strings: a rollout (and the evaluation's reply) ends "
        "where one of these appears, the string kept in the reply, with finish reason `stop`. "
        "TRL only: verl 0.6.1's typed rollout config (RolloutConfig) refuses a `stop` key, so "
        "its vLLM rollout cannot be given one",
    )
    val_temperature: float = Field(0.0, ge=0, description="0 with val_do_sample=false: greedy")
    val_top_p: float = Field(1.0, gt=0, le=1, description="validation nucleus sampling share")
    val_top_k: int = Field(-1, description="validation top-k; -1: off")
    val_do_sample: bool = Field(False, description="sample during validation; false: greedy")
    overlong_buffer_enable: bool = Field(False, description="dapo: penalise near-limit answers")
    overlong_buffer_len: int = Field(1024, gt=0, description="dapo: tokens before the limit")
    overlong_buffer_penalty_factor: float = Field(
        1.0, ge=0, description="dapo: penalty at the limit"
    )
    overlong_buffer_log: bool = Field(False, description="dapo: log the overlong penalty")
    max_resp_len: int | None = Field(
        None, gt=0, description="dapo's limit for the buffer; unset: data.max_response_length"
    )
    val_before_train: bool = Field(False, description="validate once before the first step")
    resume_mode: Literal["auto", "disable", "resume_path"] = Field(
        "auto", description="verl checkpoint resumption"
    )
    max_actor_ckpt_to_keep: int | None = Field(None, gt=0, description="unset: keep all")
    logger: list[str] = Field(
        default_factory=lambda: ["console", "mlflow"], description="verl trainer.logger"
    )
    extra_overrides: list[str] = Field(
        default_factory=list,
        description="raw hydra overrides for verl, appended last (e.g. 'trainer.balance_batch=false')",
    )
    lora: GrpoLoraConfig = Field(
        default_factory=GrpoLoraConfig,
        description="LoRA for the policy update (rank 0: off); the reference model is then the "
        "start model without the adapter, so none is kept beside it",
    )
    trl_extra: dict[str, Any] = Field(
        default_factory=dict,
        description="TRL: any other field of TRL's GRPOConfig, by its name (e.g. "
        "{weight_decay: 0.01}); checked against GRPOConfig, and one judgeflow sets is refused "
        "(set it by its grpo.* key); verl's counterpart is grpo.extra_overrides",
    )

    @field_validator("trl_extra")
    @classmethod
    def _grpo_config_fields(cls, extra: dict[str, Any]) -> dict[str, Any]:
        return checked(extra, "trl")

    @field_validator("stop_strings")
    @classmethod
    def _non_empty_stop_strings(cls, stops: list[str]) -> list[str]:
        """An empty stop string would end every rollout before its first token."""
        if any(not stop for stop in stops):
            raise ValueError("a stop string must not be empty")
        return stops
