"""Typed run configuration: recipe presets (YAML) + profiles + `dotted.key=value` overrides.

A run is described by one `RunConfig`. It is built from a preset in `src/judgeflow/recipes/`, an
optional profile overlay (`recipes/profiles/tiny.yaml` for CPU), then user overrides, and only
then validated, so every error names the dotted key that caused it.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from judgeflow.home import judgeflow_home
from judgeflow.modes import Mode


class ConfigError(ValueError):
    """A recipe, profile or override is invalid; the message names the key and what to do."""


class IgnoredKeyWarning(UserWarning):
    """A key was set that only another engine or backend reads; this run ignores it."""


#: Settings that name data to download (`judgeflow.storage.download`); a URL there may hold the
#: credentials its server wants (`judgeflow.config.secrets.keep_url_credentials`).
DATA_URL_KEYS = ("data.source", "data.val_source", "sft.source")


class SecretParameterWarning(UserWarning):
    """A secret-looking value was passed as an override: a flow parameter Prefect shows."""


class _Section(BaseModel):
    # allow_inf_nan: every number a recipe sets is finite (one rule for every numeric key)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class ModelConfig(_Section):
    """The policy model that training starts from."""

    path: str = Field("Qwen/Qwen3-8B", description="HF model id or local directory of the policy")


class GrrmDataConfig(_Section):
    """TowerBlocks-MT-Ranking-style columns and the RL augmentation of the GRRM recipe."""

    src_key: str = Field("src_text", description="column with the source texts")
    src_lang_key: str = Field("src_lang", description="column with the source languages")
    trg_lang_key: str = Field("trg_lang", description="column with the target languages")
    mt_key: str = Field("mt_texts", description="column with the candidate translations")
    score_key: str = Field("scores", description="column with the integer scores")
    analysis_key: str = Field(
        "analysis", description="column with the analysis text (the SFT target)"
    )
    subgroup_augment: int = Field(4, ge=0, description="subgroups sampled per group of n > 2")
    shuffle_augment: int = Field(4, ge=0, description="extra candidate orders per (sub)group")


class DataConfig(_Section):
    """Where the training data comes from and how it is prepared."""

    source: str = Field(..., description="file://, hf://, s3://, sample:// URI or a local path")
    revision: str | None = Field(None, description="dataset revision (hf:// commit or tag)")
    val_source: str | None = Field(None, description="separate validation source; else split")
    format: Literal["auto", "openjudge", "rewardbench2"] = Field(
        "auto",
        description="judge data format: `openjudge`, `rewardbench2`, or `auto` (from the columns)",
    )
    val_fraction: float = Field(
        0.1,
        ge=0.0,
        lt=1.0,
        description="share of data.source held out for validation when data.val_source is unset",
    )
    balance_positions: bool = Field(
        False, description="pairwise: swap A/B in half the rows so position is no shortcut"
    )
    seed: int = Field(
        0,
        description="seed of the validation split, the A/B swaps, the augmentation and the trainers",
    )
    max_prompt_length: int = Field(4096, gt=0, description="longest prompt, in tokens")
    max_response_length: int = Field(2048, gt=0, description="longest completion, in tokens")
    filter_overlong_prompts: bool = Field(
        True, description="drop prompts longer than max_prompt_length (the model's tokenizer)"
    )
    skip_invalid: bool = Field(False, description="drop invalid rows (reported) instead of failing")
    chosen_label: int = Field(4, ge=0, le=4, description="pointwise label of a RewardBench2 chosen")
    rejected_label: int = Field(0, ge=0, le=4, description="pointwise label of a rejected")
    grrm: GrrmDataConfig = Field(
        default_factory=GrrmDataConfig, description="GRRM columns and augmentation"
    )
    shards: int = Field(1, ge=1, description="fan preparation out over this many Ray tasks")
    ray_address: str | None = Field(
        None, description="Ray cluster for sharded preparation; local if unset"
    )


class SftConfig(_Section):
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


class GrpoConfig(_Section):
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


class RlvrConfig(_Section):
    """Policy RLVR's reward, as open-instruct's `grpo_fast` composes it (`judgeflow.rewards.rlvr`):
    each verifier's verdict x `verification_reward`, summed over a row's verifiers, then the R1
    format reward and the non-stop penalty. Read by both engines (TRL's reward functions, verl's
    `custom_reward_function.reward_kwargs`) and by the evaluation."""

    verification_reward: float = Field(
        10.0, description="what a correct verifier verdict pays (open-instruct's default: 10)"
    )
    r1_style_format: Literal["gated", "additive", "off"] = Field(
        "gated",
        description="the R1 format (`</think>` then `<answer>…</answer>`): `gated` pays the "
        "verifiable reward only when it holds, `additive` adds r1_style_format_reward, `off`",
    )
    r1_style_format_reward: float = Field(
        1.0, description="what the R1 format pays with r1_style_format=additive"
    )
    non_stop_penalty: bool = Field(
        False, description="a response cut off at the length limit scores non_stop_penalty_value"
    )
    non_stop_penalty_value: float = Field(-10.0, description="the truncated response's score")
    remap_verifier: dict[str, str] = Field(
        default_factory=dict,
        description="dataset name -> verifier (open-instruct's --remap_verifier), e.g. "
        "{math_ground_truth: math}; applied when the data is prepared",
    )
    verifier_timeout_s: float = Field(
        10.0, gt=0, description="one check's time limit; past it the response scores 0"
    )
    verifier_max_chars: int = Field(
        100_000, gt=0, description="longer responses are not checked and score 0"
    )
    verifier_memory_mb: int = Field(2048, gt=0, description="the verifier process's memory cap")

    @field_validator("r1_style_format", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        """YAML 1.1 reads a bare `off` as false: `--set rlvr.r1_style_format=off` means "off"."""
        return "off" if value is False else value

    def reward_kwargs(self) -> dict[str, Any]:
        """`judgeflow.rewards.rlvr.score.compute_score`'s keywords. Not `remap_verifier`: it is
        applied once, when the data is prepared (the prepared rows name their verifiers)."""
        return self.model_dump(mode="json", exclude={"remap_verifier"})


class ClusterConfig(_Section):
    """Where the GPU stages run; generic resource names, validated before anything is submitted."""

    backend: Literal["local", "slurm"] = Field(
        "local", description="`local` (this machine) or `slurm`"
    )
    partition: str | None = Field(None, description="Slurm partition")
    account: str | None = Field(None, description="Slurm account")
    qos: str | None = Field(None, description="Slurm quality of service")
    nodes: int = Field(1, gt=0, description="nodes of a training stage")
    gpus_per_node: int = Field(8, ge=0, description="GPUs per node of a training stage")
    cpus_per_task: int | None = Field(
        None, gt=0, description="CPUs per node; unset: the scheduler's default"
    )
    mem_gb: int | None = Field(
        None, gt=0, description="memory per node in GB; unset: the scheduler's default"
    )
    timeout_min: int = Field(24 * 60, gt=0, description="time limit of a stage's job, in minutes")
    constraint: str | None = Field(None, description="Slurm node features (`--constraint`)")
    extra_sbatch: list[str] = Field(default_factory=list, description="extra #SBATCH lines")
    setup: list[str] = Field(default_factory=list, description="shell lines run before a stage")
    python: str | None = Field(
        None,
        description="interpreter command on the nodes, e.g. `apptainer exec --nv img.sif python`",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="environment of the stage; secret-looking names reach only the job",
    )
    secrets: dict[str, str] = Field(
        default_factory=dict,
        description="job variable -> env:VAR or prefect:SECRET_BLOCK (where, never the value)",
    )
    shared_dir: str = Field(
        "${JUDGEFLOW_HOME}/jobs",
        validate_default=True,
        description="directory on the shared filesystem: job folders, logs, rendezvous",
    )
    retries: int = Field(2, ge=0, description="resubmissions of a stage killed from outside")
    retry_delay_s: float = Field(10.0, ge=0, description="seconds between resubmissions")
    poll_s: float = Field(2.0, gt=0, description="how often a running stage is checked")
    ray_num_cpus: int | None = Field(None, gt=0, description="CPUs Ray may use per node")
    ray_object_store_mb: int | None = Field(None, ge=75, description="object store per node")
    ray_dashboard: bool = Field(False, description="dashboard on a per-job port, head only")
    node_timeout_s: float = Field(
        60.0, gt=0, description="a node silent this long fails a multi-node stage, retryably"
    )
    orphan_timeout_s: float = Field(
        600.0, gt=0, description="a job nothing follows this long (its flow died) stops"
    )

    @field_validator("shared_dir")
    @classmethod
    def _expand_home(cls, value: str) -> str:
        return value.replace("${JUDGEFLOW_HOME}", str(judgeflow_home()))

    @field_validator("env", "secrets")
    @classmethod
    def _variable_names(cls, value: dict[str, str], info: Any) -> dict[str, str]:
        """Names go into `export NAME=…` lines of a shell script: identifiers only; a secret's
        value says where the secret is, never what it is."""
        for name, where in value.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if info.field_name == "secrets" and not re.fullmatch(r"(env|prefect):[\w.\-/]+", where):
                raise ValueError(
                    f"cluster.secrets.{name} must say where the secret is — env:VARIABLE or "
                    "prefect:SECRET_BLOCK — not hold it (the value is not shown)"
                )
        return value

    @field_validator("partition", "account", "qos", "constraint", "extra_sbatch", "shared_dir")
    @classmethod
    def _one_sbatch_line(cls, value: Any) -> Any:
        """Each becomes one `#SBATCH` line: a line break would start a shell command."""
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and re.search(r"[\x00-\x1f\x7f]", text):
                raise ValueError(f"{text!r} holds a line break or control character")
        return value


class EvaluationConfig(_Section):
    """The judge's evaluation before training, after SFT and after GRPO."""

    enabled: bool = Field(
        True, description="evaluate the judge before training, after SFT and after GRPO"
    )
    gpus: int = Field(
        1, ge=0, description="GPUs of the evaluation job, on one node (not the training allocation)"
    )
    max_new_tokens: int = Field(2048, gt=0, description="longest generated answer, in tokens")
    temperature: float = Field(0.0, ge=0, description="sampling temperature; 0: greedy")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling share")
    limit: int | None = Field(None, gt=0, description="evaluate at most this many rows")
    batch_size: int = Field(
        8,
        gt=0,
        description="prompts per generation batch (TRL runs; verl uses grpo.val_batch_size)",
    )
    samples: int = Field(
        1, gt=0, description="completions per item, averaged; >1 needs temperature"
    )
    rows_per_verl_run: int = Field(
        4096,
        gt=0,
        description="judging on GPUs (verl): rows one verl run judges; verl and vLLM start "
        "once a run, and a lost node loses at most one run's rows",
    )
    allow_overlap: bool = Field(
        False,
        description="score rows whose prompt the model trained on (reported) instead of refusing",
    )

    @model_validator(mode="after")
    def _sampling(self) -> EvaluationConfig:
        if self.samples > 1 and self.temperature == 0:
            raise ValueError(
                "evaluation.samples > 1 needs evaluation.temperature > 0 (greedy repeats)"
            )
        return self


class RegisterConfig(_Section):
    """The MLflow model registry: every trained model becomes a version; `champion` moves only
    to a version that beats the current champion on the same evaluation."""

    enabled: bool = Field(True, description="register the trained model(s) as MLflow versions")
    model_name: str | None = Field(
        None, description="registered model; unset: the recipe name (SFT models: <name>-sft)"
    )
    primary_metric: str | None = Field(
        None,
        description="the gate's metric; unset: exact_match (pointwise), consistent_accuracy "
        "(pairwise), ranking_accuracy (grrm)",
    )
    margin: float = Field(
        0.0, ge=0, description="the new version must beat the champion by more than this"
    )
    force: bool = Field(False, description="promote whatever the numbers say (recorded as forced)")


class TrackingConfig(_Section):
    """Where MLflow records the run: its experiment and tracking server."""

    experiment: str = Field("judgeflow", description="MLflow experiment")
    tracking_uri: str | None = Field(None, description="default: $MLFLOW_TRACKING_URI or sqlite")


class StorageConfig(_Section):
    """Where artifacts go: downloaded sources, prepared data and each run's outputs."""

    root: str = Field(
        "${JUDGEFLOW_HOME}/artifacts",
        validate_default=True,
        description="local dir or s3:// prefix",
    )
    credentials_block: str | None = Field(
        None,
        description="name of a Prefect Secret block holding the S3 credentials as JSON; "
        "else the environment's (AWS_ACCESS_KEY_ID, a profile, an instance role)",
    )

    @field_validator("root")
    @classmethod
    def _expand_home(cls, value: str) -> str:  # the default is not in the YAML, so expand here
        return value.replace("${JUDGEFLOW_HOME}", str(judgeflow_home()))


class RewardConfig(_Section):
    """A trained judge as a policy's reward (mode=rlvr): rows whose `dataset` is one of
    `judge_datasets` are scored by it, beside the verifiers, and paid as a verifier is
    (`judgeflow.inference.judge_reward`): x `rlvr.verification_reward`, behind the R1 format gate."""

    judge: str | None = Field(
        None,
        description="the judge that pays: models:/NAME@alias, models:/NAME/VERSION or the store "
        "URI of its weights (then set judge_mode); a run records the version it resolved to",
    )
    judge_url: str | None = Field(
        None,
        description="an already-served judge instead (`mlflow models serve -m models:/…`: "
        "its /invocations URL); needs judge_mode and judge_max_new_tokens",
    )
    judge_mode: Literal["pointwise", "pairwise", "grrm"] | None = Field(
        None, description="the judge's mode; a registered judge's own is used when unset"
    )
    judge_datasets: list[str] = Field(
        default_factory=lambda: ["judge", "general-quality", "general-quality_ref"],
        description="row `dataset` names the judge pays (open-instruct's LM-judge names too)",
    )
    judge_batch_size: int = Field(
        16,
        gt=0,
        description="judge rows per generation call (per request when served): a rollout "
        "pointwise, a rollout in both orders pairwise, a prompt's group for GRRM",
    )
    judge_max_new_tokens: int | None = Field(
        None, gt=0, description="the judge's reply length; unset: the registered judge's own"
    )
    judge_concurrency: int = Field(
        4, gt=0, description="a served judge (judge_url, or verl's): requests in flight at once"
    )
    judge_gpus: int = Field(
        1,
        ge=0,
        description="Slurm/verl: GPUs of the training node set aside to serve the judge in "
        "the allocation (the policy trains on the rest)",
    )

    @model_validator(mode="after")
    def _one_judge(self) -> RewardConfig:
        if self.judge and self.judge_url:
            raise ValueError("reward.judge and reward.judge_url both name a judge: set one")
        if self.judge_url and not (self.judge_mode and self.judge_max_new_tokens):
            raise ValueError(
                "reward.judge_url needs reward.judge_mode and reward.judge_max_new_tokens"
            )
        if self.judge and not self.judge.startswith("models:/") and not self.judge_mode:
            raise ValueError(
                f"reward.judge={self.judge} is not a registered version: say which judge it is "
                "with reward.judge_mode (pointwise, pairwise or grrm)"
            )
        return self

    @property
    def paid_by_judge(self) -> bool:
        return bool(self.judge or self.judge_url)


# `register` names ABCMeta.register, a method of the metaclass that instances never see; pydantic
# warns about the shadowing all the same. The key is `register.*` because users type it.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message='Field name "register"', category=UserWarning)

    class RunConfig(_Section):
        """One run's configuration: a recipe preset, a profile, then overrides, validated."""

        recipe: str = Field(
            ...,
            description="the preset's name: names the MLflow run and the default registered model",
        )
        mode: Mode = Field(
            ...,
            description="what is trained: `pointwise` or `pairwise` judge, `grrm`, or an `rlvr` "
            "policy",
        )
        engine: Literal["auto", "trl", "verl"] = Field(
            "auto",
            description="`trl` (CPU or 1 GPU) or `verl` (GPU cluster); `auto`: verl on Slurm, else TRL",
        )
        model: ModelConfig = Field(default_factory=ModelConfig, description="the policy model")
        data: DataConfig = Field(..., description="the training data and its preparation")
        grpo: GrpoConfig = Field(default_factory=GrpoConfig, description="GRPO / RLVR training")
        sft: SftConfig = Field(
            default_factory=SftConfig, description="LLaMA-Factory supervised fine-tuning"
        )
        rlvr: RlvrConfig = Field(
            default_factory=RlvrConfig, description="policy RLVR's verifiable reward (mode=rlvr)"
        )
        reward: RewardConfig = Field(
            default_factory=RewardConfig,
            description="a trained judge as the policy's reward (mode=rlvr)",
        )
        cluster: ClusterConfig = Field(
            default_factory=ClusterConfig,
            description="where and with what resources the GPU stages run",
        )
        evaluation: EvaluationConfig = Field(
            default_factory=EvaluationConfig,
            description="the judge's evaluation before and after training",
        )
        tracking: TrackingConfig = Field(
            default_factory=TrackingConfig, description="MLflow tracking"
        )
        register: RegisterConfig = Field(
            default_factory=RegisterConfig,
            description="the MLflow model registry and the champion gate",
        )
        storage: StorageConfig = Field(
            default_factory=StorageConfig, description="the artifact store"
        )

        @model_validator(mode="after")
        def _check(self) -> RunConfig:
            if self.data.balance_positions and self.mode != "pairwise":
                raise ValueError("data.balance_positions only applies to mode=pairwise")
            if (
                self.engine == "verl"
                and self.cluster.backend == "local"
                and not self.cluster.gpus_per_node
            ):
                raise ValueError("engine=verl needs GPUs: set cluster.gpus_per_node")
            if self.mode != "grrm" and self.sft.enabled and not self.sft.source:
                raise ValueError("sft.enabled needs sft.source: the `messages` rows to train on")
            if self.reward.paid_by_judge and self.mode != "rlvr":
                raise ValueError(
                    "reward.judge / reward.judge_url pay a policy: they need mode=rlvr "
                    f"(this recipe trains mode={self.mode})"
                )
            if self.mode == "rlvr" and self.reward.paid_by_judge and self.resolved_engine == "verl":
                self._check_judge_on_verl()
            if self.mode == "grrm" and (self.sft.enabled or self.sft.source):
                raise ValueError(
                    "sft.enabled / sft.source are for the judge recipes; GRRM's SFT runs on its own "
                    "data and `judgeflow run grrm-full --stage sft|rlvr|full` decides whether it runs"
                )
            return self

        def _check_judge_on_verl(self) -> None:
            """verl's batch reward manager calls the judge; one served inside the allocation
            listens on the head node, on GPUs of its own."""
            if self.grpo.reward_manager != "batch":
                raise ValueError(
                    "a judge-paid policy on verl is scored by verl's batch reward manager (all "
                    "rollouts of a step at once): set grpo.reward_manager=batch"
                )
            if self.reward.judge_url or self.cluster.backend != "slurm":
                return
            if self.cluster.nodes > 1:
                raise ValueError(
                    "the judge served inside the allocation listens on the head node only: with "
                    "cluster.nodes > 1, serve it yourself and set reward.judge_url"
                )
            if not 1 <= self.reward.judge_gpus < self.cluster.gpus_per_node:
                raise ValueError(
                    f"reward.judge_gpus={self.reward.judge_gpus}: the judge served beside verl "
                    f"needs at least one of the node's {self.cluster.gpus_per_node} GPUs and must "
                    "leave verl at least one"
                )

        @property
        def registered_model_name(self) -> str:
            """The registered model this run's final model becomes a version of."""
            return self.register.model_name or self.recipe

        def policy_reward_kwargs(self, *, judge_url: str | None = None) -> dict[str, Any]:
            """The reward's keywords for a policy run (`rlvr.score`'s, and
            `judgeflow.inference.judge_reward`'s when a judge pays): the RLVR rules, and which
            judge and how it is called: its weights' URI (fetched where the reward runs), or a
            URL (`reward.judge_url`, or `judge_url`: a judge served for the run). A registered
            judge (`models:/…`) must be pinned to its version's weights first
            (`judgeflow.registry.paying_judge.pin_judge`, which every pipeline does)."""
            if self.mode != "rlvr":
                return {}
            kwargs = self.rlvr.reward_kwargs()
            r = self.reward
            if not r.paid_by_judge:
                return kwargs
            if r.judge and r.judge.startswith("models:/"):
                raise ConfigError(
                    f"reward.judge={r.judge} is not resolved: a run pins it to the version's "
                    "weights first (judgeflow.registry.paying_judge.pin_judge)"
                )
            kwargs |= {
                "judge_mode": r.judge_mode,
                "judge_datasets": sorted({d.lower() for d in r.judge_datasets}),
                "judge_batch_size": r.judge_batch_size,
                "judge_max_new_tokens": r.judge_max_new_tokens,
                "judge_concurrency": r.judge_concurrency,
            }
            url = judge_url or r.judge_url
            kwargs |= {"judge_url": url} if url else {"judge_weights": r.judge}
            return kwargs

        @property
        def policy_gpus_per_node(self) -> int:
            """A node's GPUs the policy trains on: all of them, but those serving a judge-paid
            policy's judge inside the allocation (`reward.judge_gpus`; none when the judge is
            served elsewhere, `reward.judge_url`, or the engine is TRL)."""
            gpus = self.cluster.gpus_per_node
            if (
                self.mode == "rlvr"
                and self.reward.paid_by_judge
                and not self.reward.judge_url
                and self.resolved_engine == "verl"
            ):
                gpus -= self.reward.judge_gpus
            return gpus

        @property
        def resolved_engine(self) -> Literal["trl", "verl"]:
            """`auto` means verl on Slurm (GPU clusters) and TRL locally."""
            if self.engine != "auto":
                return self.engine
            return "verl" if self.cluster.backend == "slurm" else "trl"

        def fingerprint(self) -> str:
            """Content hash of the whole configuration (cache keys, lineage tags)."""
            blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
            return hashlib.sha256(blob).hexdigest()[:16]


def with_policy(cfg: RunConfig, model_dir: str | Path) -> RunConfig:
    """`cfg` whose policy (model.path, the weights a stage loads) is `model_dir`: RL starting
    from the SFT model, or an engine loading a local copy of the judge."""
    return cfg.model_copy(update={"model": cfg.model.model_copy(update={"path": str(model_dir)})})


def validate_config(raw: Mapping[str, Any]) -> RunConfig:
    _check_keys(RunConfig, raw, prefix="")
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc)) from None


def _check_keys(model: type[BaseModel], raw: Mapping[str, Any], prefix: str) -> None:
    """Unknown keys fail with the dotted name and the valid keys at that level."""
    fields = model.model_fields
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if key not in fields:
            valid = ", ".join(sorted(fields))
            raise ConfigError(f"unknown config key {dotted!r}; valid keys here: {valid}")
        annotation = fields[key].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{dotted!r} is a section; set its keys, e.g. {dotted}.<key>=…")
            _check_keys(annotation, value, prefix=f"{dotted}.")


def _format_validation_error(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "<config>"
        got = err.get("input")
        shown = "" if isinstance(got, dict) else f" (got {got!r})"
        lines.append(f"{key}: {err['msg']}{shown}")
    return "invalid configuration:\n  " + "\n  ".join(lines)
