"""Which engine, backend or recipe family reads a config key, and why a key set for a run does
nothing in it. Every key not declared here is read by whatever runs (tests walk every field)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from judgeflow.config.run_config import RunConfig

#: Keys only one engine or backend reads. Every other key is read by whatever runs (a test walks
#: every field and checks that changing it changes what the running engine is given).
ONLY_READ_BY: dict[str, tuple[str, ...]] = {
    # verl's trainer; TRL has no such knob (or a fixed one: k3 KL, one rollout engine, …)
    "verl": (
        *(
            f"grpo.{key}"
            for key in [
                "val_batch_size",
                "kl_loss_type",
                "use_kl_in_reward",
                "gpu_memory_utilization",
                "ppo_mini_batch_size",
                "ppo_micro_batch_size_per_gpu",
                "use_remove_padding",
                "ref_param_offload",
                "reward_manager",
                "strategy",
                "model_dtype",
                "entropy_coeff",
                "kl_ctrl_coef",
                "actor_shuffle",
                "truncation",
                "param_offload",
                "optimizer_offload",
                "ulysses_sequence_parallel_size",
                "use_dynamic_bsz",
                "ppo_max_token_len_per_gpu",
                "log_prob_micro_batch_size_per_gpu",
                "ref_log_prob_micro_batch_size_per_gpu",
                "rollout_name",
                "rollout_mode",
                "rollout_tensor_model_parallel_size",
                "calculate_log_probs",
                "val_temperature",
                "val_top_p",
                "val_top_k",
                "val_do_sample",
                "overlong_buffer_enable",
                "overlong_buffer_len",
                "overlong_buffer_penalty_factor",
                "overlong_buffer_log",
                "max_resp_len",
                "val_before_train",
                "resume_mode",
                "logger",
                "extra_overrides",
            ]
        ),
        "evaluation.rows_per_verl_run",  # judging on GPUs: rows per verl validation run
        "reward.judge_gpus",  # the allocation's GPUs that serve a paying judge (Slurm, verl)
    ),
    # the HF generator of the TRL runs' evaluation; verl's validation uses grpo.val_batch_size
    "trl": (
        "evaluation.batch_size",
        # verl 0.6.1's main_ppo has no group filtering (DAPO's filter_groups is its own trainer)
        "grpo.filter_zero_std_samples",
        # a panel of judges pays in the training process; verl (and Slurm) serve one judge
        "reward.judge_panel",
        # TRL's GRPOConfig fields judgeflow does not name (verl's: grpo.extra_overrides)
        "grpo.trl_extra",
        # verl 0.6.1's RolloutConfig refuses a `stop` key: its vLLM rollout cannot be given one
        "grpo.stop_strings",
    ),
    # the preparation of judge data (GRRM's data has its own train and test files; policy RLVR
    # rows have no judge format or labels, and split off validation as the judges do)
    "judge": ("data.format", "data.val_fraction", "data.chosen_label", "data.rejected_label"),
    # GRRM's columns and augmentation, and its sharded preparation on Ray
    "grrm": ("data.grrm", "data.shards", "data.ray_address"),
    # a policy's verifiable reward (`judgeflow.rewards.rlvr`)
    "rlvr": (
        "rlvr",
        "reward",
        "data.val_fraction",
        "data.system_prompt",
        "data.mixer",
        "data.eval_mixer",
        "data.mixer_seed",
        "data.chat_template",
    ),
    # sbatch and the Ray cluster of an allocation; the local backend runs one process here
    "slurm": tuple(
        f"cluster.{key}"
        for key in [
            "partition",
            "account",
            "qos",
            "constraint",
            "extra_sbatch",
            "setup",
            "python",
            "nodes",
            "ray_num_cpus",
            "ray_object_store_mb",
            "ray_dashboard",
            "node_timeout_s",
        ]
    ),
    # a cluster the user runs: where its job server is, how to reach it, and (as on Slurm) how
    # a node starts judgeflow's Python
    "ray": (
        "cluster.ray_address",
        "cluster.ray_token_path",
        "cluster.ray_runtime_env",
        "cluster.python",
        "cluster.nodes",
    ),
}

_READER_KIND = {"verl": "engine", "trl": "engine", "slurm": "backend", "local": "backend"}
_READER_KIND |= {"ray": "backend"}
_READER_KIND |= {"judge": "recipes", "grrm": "recipes", "rlvr": "recipes"}


def recipe_family(cfg: RunConfig) -> str:
    """`judge`, `grrm` or `rlvr`: the recipe family whose keys a run reads."""
    return cfg.mode if cfg.mode in ("grrm", "rlvr") else "judge"


def ignored_keys(cfg: RunConfig, keys: Iterable[str]) -> list[str]:
    """Why each of `keys` (dotted, as the user set them) does nothing in this run, if it does not."""
    running = {
        "engine": cfg.resolved_engine,
        "backend": cfg.cluster.backend,
        "recipes": recipe_family(cfg),
    }
    reasons = []
    for key in keys:
        readers: dict[str, list[str]] = {}  # kind -> the readers of that kind that read `key`
        for reader, owned in ONLY_READ_BY.items():
            if any(key == k or key.startswith(f"{k}.") for k in owned):
                readers.setdefault(_READER_KIND[reader], []).append(reader)
        for kind, names in readers.items():
            if running[kind] not in names:
                reasons.append(
                    f"{key} is read only by the {' and '.join(names)} {kind}; this run uses "
                    f"{running[kind]} and ignores it"
                )
        if unused := _lora_unused(cfg, key):
            reasons.append(unused)
        if key == "sft.template" and cfg.mode == "rlvr" and cfg.data.chat_template_jinja:
            reasons.append(
                "sft.template applies only without data.chat_template: judgeflow renders the SFT "
                "rows with the chat template itself, and sft.template is ignored"
            )
        if key == "data.mixer_seed" and not (cfg.data.mixer or cfg.data.eval_mixer):
            reasons.append(
                "data.mixer_seed applies only with data.mixer or data.eval_mixer (this run has "
                "neither) and is ignored"
            )
    return reasons


def _lora_unused(cfg: RunConfig, key: str) -> str | None:
    """Why a LoRA setting does nothing in a run without LoRA, if it does not."""
    if (key == "sft.lora" or key.startswith("sft.lora.")) and cfg.sft.finetuning_type != "lora":
        return (
            f"{key} applies only with sft.finetuning_type=lora (this run: "
            f"{cfg.sft.finetuning_type}) and is ignored"
        )
    if key in ("grpo.lora.alpha", "grpo.lora.target") and not cfg.grpo.lora.enabled:
        return f"{key} applies only with grpo.lora.rank > 0 (this run: 0, no LoRA) and is ignored"
    return None


#: Where a paying judge is named by URL; credentials there reach verl's command line.
JUDGE_URL_KEYS = ("reward.judge_url", "reward.judge")


def secret_overrides(items: Iterable[tuple[str, object]]) -> list[str]:
    """Why each secret-looking `cluster.env` override (key, value) should have been a
    `cluster.secrets` one, a tracking URI with credentials should have left them to MLflow's
    variables, and a data URL with credentials to the environment of the flow."""
    from judgeflow.config.inputs import DATA_URL_KEYS
    from judgeflow.config.secrets import url_variable

    said = "holds credentials, and an override is a flow parameter (kept, and shown, by Prefect)"
    return [
        f"{key} {said}: give the URI without user:password@ and set MLFLOW_TRACKING_USERNAME and "
        "MLFLOW_TRACKING_PASSWORD where the flow runs instead (`judgeflow run --set` does this "
        "for you)"
        if key == "tracking.tracking_uri"
        else f"{key} {said}: give the URL without them and set {url_variable(str(value))} to the "
        "whole URL where the flow runs instead, where the download finds it (`judgeflow run "
        "--set` does this for you)"
        if key in DATA_URL_KEYS
        else f"{key} {said}, and it reaches the reward's keywords (verl's command line): serve "
        "the judge where no credentials are needed, or behind a gateway on the cluster's network"
        if key in JUDGE_URL_KEYS
        else f"{key} looks like a secret, and an override is a flow parameter (kept, and shown, "
        f"by Prefect): pass it as cluster.secrets.{key.removeprefix('cluster.env.')}="
        "env:VARIABLE or =prefect:SECRET_BLOCK instead (`judgeflow run --set` does this for you)"
        for key, value in items
    ]
