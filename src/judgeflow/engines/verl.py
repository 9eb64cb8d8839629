"""verl engine: GRPO / RLVR on a GPU cluster with `verl.trainer.main_ppo` (verl 0.6.1).

verl's trainer cannot run on CPU, so this module is split in two halves:

- Pure builders, unit-tested and validated against verl's own config code on CPU:
  `verl_overrides` renders a `RunConfig` as hydra overrides, `main_ppo_command` wraps them into
  the driver command, `merge_command` and `latest_global_step` handle what verl leaves on disk.
- `params_from` / `train_verl` / `VerlResult`, the shape of every engine: the thin part that runs
  on the Ray head inside a Slurm stage (main_ppo, then verl's model merger when verl saved no HF
  copy); the training stage publishes the model, as it does TRL's.

MLflow linking (verl 0.6.1, `verl/utils/tracking.py`): with `trainer.logger` containing `mlflow`,
verl calls `mlflow.set_tracking_uri($MLFLOW_TRACKING_URI or sqlite:////tmp/mlruns.db)`,
`mlflow.set_experiment(trainer.project_name)` and then
`mlflow.start_run(experiment_id=…, run_name=trainer.experiment_name)`. `start_run` resumes the
run named by `$MLFLOW_RUN_ID` when it is set, but (mlflow 3.x) only if that run belongs to the
experiment just set, and it renames the run to `run_name`. So a linked run needs all three:
`project_name` = the pipeline's MLflow experiment, `experiment_name` = the pipeline run's name,
and both variables in the environment of the process that builds verl's `Tracking` -- the
TaskRunner Ray actor, whose environment comes from Ray (not from the driver's shell). The runner
therefore passes them through `ray_kwargs.ray_init.runtime_env.env_vars`. Credentials
(MLFLOW_TRACKING_TOKEN/USERNAME/PASSWORD) are deliberately not forwarded that way: verl logs its
whole config as MLflow params. They must already be in the job's environment, which the Ray
processes of the allocation inherit.

Imports of verl, hydra and omegaconf stay inside functions: importing this module is cheap and
works in the control environment, where verl is not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from judgeflow.cluster.procs import run_tree
from judgeflow.config import RunConfig
from judgeflow.engines.lora import merge_adapter
from judgeflow.engines.verl_log import VerlLogFollower, gradient_accumulation
from judgeflow.rewards import REWARD_FUNCTION_NAME, reward_module_path

if TYPE_CHECKING:
    from omegaconf import DictConfig

MAIN_PPO = "verl.trainer.main_ppo"
MODEL_MERGER = "verl.model_merger"
#: verl writes the number of the last saved step here (`trainer.default_local_dir`).
TRACKER_FILE = "latest_checkpointed_iteration.txt"
#: Where `train_verl` puts the merged HF model, inside the step's checkpoint folder.
MERGED_DIRNAME = "merged_hf"
#: Where verl's merger puts a LoRA actor's adapter (inside MERGED_DIRNAME), and where judgeflow
#: merges it into the base weights.
VERL_ADAPTER_DIRNAME = "lora_adapter"
MERGED_LORA_DIRNAME = "merged_lora_hf"
#: Environment the MLflow logger inside verl's TaskRunner needs to attach to our run.
MLFLOW_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID")
#: Reward managers that call `compute_score` once per sample, as judgeflow's rewards expect.
PER_SAMPLE_MANAGERS = ("naive", "dapo", "prime")

#: Runs a command: `runner(command, env)` or, to follow its output, `runner(…, on_line=f)`.
Runner = Callable[..., int]


class VerlStageError(RuntimeError):
    """main_ppo or the model merger failed, or verl left no checkpoint to publish."""


# ---------------------------------------------------------------------------- hydra values

_BARE = re.compile(r"[A-Za-z_/][A-Za-z0-9_/.:@+\-]*")
_RESERVED = {"true", "false", "null", "inf", "nan", "+inf", "-inf"}


def hydra_value(value: Any) -> str:
    """Format a Python value so hydra's override parser reads back exactly that value.

    Strings stay bare when hydra would read them as the same string, otherwise they are quoted
    (a path with a space or comma, `~/x`, `1e-5` meant as text, `true` meant as text). List
    elements are always quoted, as in `trainer.logger=['console','mlflow']`.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        bare = _BARE.fullmatch(value) and value.lower() not in _RESERVED
        return value if bare else _quote(value)
    if isinstance(value, list | tuple):
        return (
            "[" + ",".join(_quote(v) if isinstance(v, str) else hydra_value(v) for v in value) + "]"
        )
    raise TypeError(f"cannot render {type(value).__name__} {value!r} as a hydra value")


def _quote(text: str) -> str:
    """Single-quote for hydra: backslashes before a quote or the end are doubled, quotes escaped."""
    text = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text)
    return "'" + text.replace("'", "\\'") + "'"


# ---------------------------------------------------------------------------- overrides


#: Where the judge the train job serves listens, rendered without a job (`judgeflow render`):
#: the job picks a free port when it starts (`judgeflow.stages.served_judge`).
RENDERED_JUDGE_PORT = "<free-port>"
RENDERED_JUDGE_URL = f"http://127.0.0.1:{RENDERED_JUDGE_PORT}/invocations"

#: The judge-paid policy's reward (verl's batch signature), loaded by path like the others.
JUDGE_REWARD_MODULE = str(Path(__file__).resolve().parents[1] / "inference" / "judge_reward.py")


def _reward_path(cfg: RunConfig, judged: bool) -> str:
    return JUDGE_REWARD_MODULE if judged else reward_module_path(cfg.mode)


def _reward_kwargs(
    cfg: RunConfig,
    judged: bool,
    unscored: bool = False,
    served_judge: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    if cfg.mode != "rlvr":
        return {}
    # verl's reward function sees the decoded text only: the length verifiers count it again
    # in the policy's tokens
    rules = {**cfg.rlvr.reward_kwargs(), "length_tokenizer": cfg.model.path}
    if not judged:
        return rules
    if unscored:
        datasets = sorted({d.lower() for d in cfg.reward.judge_datasets})
        return {**rules, "judge_datasets": datasets, "judge_unscored": True}
    # each call's judge counts as a line: verl 0.6.1 logs no reward column of a training step
    rendered = {"judge_url": RENDERED_JUDGE_URL} if cfg.serves_judge_in_allocation else None
    served = served_judge or rendered  # the job's judge, or as rendered without a job
    paid = cfg.policy_reward_kwargs(served=served)
    return {**paid, "length_tokenizer": cfg.model.path, "judge_log_counts": True}


def verl_overrides(
    cfg: RunConfig,
    *,
    train_files: Sequence[str],
    val_files: Sequence[str],
    checkpoint_dir: str,
    nnodes: int | None = None,
    n_gpus_per_node: int | None = None,
    experiment_name: str | None = None,
    reward_path: str | None = None,
    env_vars: Mapping[str, str] | None = None,
    unscored_judge: bool = False,
    served_judge: Mapping[str, Any] | None = None,
) -> list[str]:
    """The hydra overrides for `verl.trainer.main_ppo`, in a fixed order.

    `nnodes` / `n_gpus_per_node` default to the cluster section (pass the allocation's real
    numbers when known). `experiment_name` defaults to the recipe; it must be the pipeline's
    MLflow run name for verl to log into that run (see the module docstring). `reward_path`
    defaults to judgeflow's reward module for the mode in this installation. `env_vars` go to
    every Ray worker of the job through `ray_kwargs.ray_init.runtime_env.env_vars`.
    `grpo.extra_overrides` come last, so they can change anything rendered before them.
    A judge-paid policy's judge is `reward.judge_url`, or `served_judge`: the one the train job
    serves inside its allocation (`judgeflow.stages.served_judge`; rendered without a job, its
    port reads `<free-port>`); `unscored_judge` leaves its rows unscored instead (verl's
    validation mode, whose scores judgeflow recomputes).
    """
    g, d = cfg.grpo, cfg.data
    judged = cfg.mode == "rlvr" and cfg.reward.paid_by_judge
    manager = g.reward_manager  # judge-paid: `batch`, the judge scores a whole step at once
    if not judged and g.reward_manager not in PER_SAMPLE_MANAGERS:
        raise ValueError(
            f"grpo.reward_manager={g.reward_manager!r} calls a batched compute_score; judgeflow's "
            f"reward functions score one sample at a time: use one of {list(PER_SAMPLE_MANAGERS)}"
        )
    if not train_files or not val_files:
        raise ValueError("verl needs at least one train file and one validation file")
    nodes = cfg.cluster.nodes if nnodes is None else nnodes
    gpus = cfg.policy_gpus_per_node if n_gpus_per_node is None else n_gpus_per_node
    if nodes < 1 or gpus < 1:
        raise ValueError(f"verl needs GPUs: got nnodes={nodes}, n_gpus_per_node={gpus}")
    tp = g.rollout_tensor_model_parallel_size or gpus
    actor, rollout, ref = (
        "actor_rollout_ref.actor",
        "actor_rollout_ref.rollout",
        "actor_rollout_ref.ref",
    )
    items: list[tuple[str, Any]] = [
        ("algorithm.adv_estimator", g.adv_estimator),
        ("algorithm.norm_adv_by_std_in_grpo", g.norm_adv_by_std_in_grpo),
        ("algorithm.use_kl_in_reward", g.use_kl_in_reward),
        ("algorithm.kl_ctrl.kl_coef", g.kl_ctrl_coef),
        ("data.train_files", list(train_files)),
        ("data.val_files", list(val_files)),
        ("data.prompt_key", "prompt"),
        ("data.reward_fn_key", "data_source"),
        ("data.train_batch_size", g.train_batch_size),
        ("data.val_batch_size", g.val_batch_size),
        ("data.max_prompt_length", d.max_prompt_length),
        ("data.max_response_length", d.max_response_length),
        ("data.filter_overlong_prompts", d.filter_overlong_prompts),
        ("data.truncation", g.truncation),
        ("data.shuffle", g.data_shuffle),
        ("data.seed", d.seed),
        ("actor_rollout_ref.model.path", cfg.model.path),
        ("actor_rollout_ref.model.use_remove_padding", g.use_remove_padding),
        ("actor_rollout_ref.model.enable_gradient_checkpointing", g.gradient_checkpointing),
        *_lora_items(cfg),
        (f"{actor}.strategy", g.strategy),
        (f"{actor}.optim.lr", g.learning_rate),
        (f"{actor}.optim.lr_scheduler_type", g.lr_scheduler_type),
        (f"{actor}.optim.lr_warmup_steps_ratio", g.lr_warmup_steps_ratio),
        (f"{actor}.optim.min_lr_ratio", g.min_lr_ratio),
        (f"{actor}.ppo_mini_batch_size", g.ppo_mini_batch_size),
        (f"{actor}.ppo_micro_batch_size_per_gpu", g.ppo_micro_batch_size_per_gpu),
        (f"{actor}.use_dynamic_bsz", g.use_dynamic_bsz),
        (f"{actor}.ppo_max_token_len_per_gpu", g.ppo_max_token_len_per_gpu),
        (f"{actor}.policy_loss.loss_mode", g.loss_mode),
        (f"{actor}.loss_agg_mode", g.loss_agg_mode),
        (f"{actor}.clip_ratio_low", g.clip_ratio_low),
        (f"{actor}.clip_ratio_high", g.clip_ratio_high),
        (f"{actor}.entropy_coeff", g.entropy_coeff),
        (f"{actor}.use_kl_loss", g.use_kl_loss),
        (f"{actor}.kl_loss_coef", g.kl_loss_coef),
        (f"{actor}.kl_loss_type", g.kl_loss_type),
        (f"{actor}.shuffle", g.actor_shuffle),
        (f"{actor}.ulysses_sequence_parallel_size", g.ulysses_sequence_parallel_size),
        (f"{actor}.fsdp_config.param_offload", g.param_offload),
        (f"{actor}.fsdp_config.optimizer_offload", g.optimizer_offload),
        (f"{actor}.fsdp_config.model_dtype", g.model_dtype),
        (f"{rollout}.name", g.rollout_name),
        (f"{rollout}.mode", g.rollout_mode),
        (f"{rollout}.n", g.rollout_n),
        (f"{rollout}.temperature", g.temperature),
        (f"{rollout}.top_p", g.top_p),
        (f"{rollout}.top_k", g.top_k),
        (f"{rollout}.gpu_memory_utilization", g.gpu_memory_utilization),
        (f"{rollout}.tensor_model_parallel_size", tp),
        (f"{rollout}.calculate_log_probs", g.calculate_log_probs),
        (f"{rollout}.log_prob_micro_batch_size_per_gpu", g.log_prob_micro_batch_size_per_gpu),
        (f"{rollout}.log_prob_use_dynamic_bsz", g.use_dynamic_bsz),
        (f"{rollout}.val_kwargs.temperature", g.val_temperature),
        (f"{rollout}.val_kwargs.top_p", g.val_top_p),
        (f"{rollout}.val_kwargs.top_k", g.val_top_k),
        (f"{rollout}.val_kwargs.do_sample", g.val_do_sample),
        (f"{ref}.log_prob_micro_batch_size_per_gpu", g.ref_log_prob_micro_batch_size_per_gpu),
        (f"{ref}.log_prob_use_dynamic_bsz", g.use_dynamic_bsz),
        (f"{ref}.fsdp_config.param_offload", g.ref_param_offload),
        ("reward_model.reward_manager", manager),
    ]
    if manager == "dapo":  # DAPORewardManager dereferences overlong_buffer_cfg always
        kwargs = "+reward_model.reward_kwargs"
        items += [
            (f"{kwargs}.overlong_buffer_cfg.enable", g.overlong_buffer_enable),
            (f"{kwargs}.overlong_buffer_cfg.len", g.overlong_buffer_len),
            (f"{kwargs}.overlong_buffer_cfg.penalty_factor", g.overlong_buffer_penalty_factor),
            (f"{kwargs}.overlong_buffer_cfg.log", g.overlong_buffer_log),
            (f"{kwargs}.max_resp_len", g.max_resp_len or d.max_response_length),
        ]
    items += [
        ("custom_reward_function.path", reward_path or _reward_path(cfg, judged)),
        ("custom_reward_function.name", REWARD_FUNCTION_NAME),
        *(
            (f"+custom_reward_function.reward_kwargs.{key}", value)
            for key, value in _reward_kwargs(cfg, judged, unscored_judge, served_judge).items()
        ),
        ("trainer.logger", _loggers(cfg)),
        ("trainer.project_name", cfg.tracking.experiment),
        ("trainer.experiment_name", experiment_name or cfg.recipe),
        ("trainer.nnodes", nodes),
        ("trainer.n_gpus_per_node", gpus),
        ("trainer.critic_warmup", 0),
        ("trainer.val_before_train", g.val_before_train),
        ("trainer.total_epochs", g.total_epochs),
        ("trainer.save_freq", g.save_freq),
        ("trainer.test_freq", g.test_freq),
        ("trainer.resume_mode", g.resume_mode),
        ("trainer.default_local_dir", checkpoint_dir),
    ]
    if cfg.mode == "rlvr" and (template := cfg.data.chat_template_jinja) is not None:
        items += [  # the driver's dataset renders with the first, the workers' tokenizers hold it
            ("+data.apply_chat_template_kwargs.chat_template", template),
            ("actor_rollout_ref.model.custom_chat_template", template),
        ]
    if g.max_steps is not None:
        items.append(("trainer.total_training_steps", g.max_steps))
    if g.max_actor_ckpt_to_keep is not None:
        items.append(("trainer.max_actor_ckpt_to_keep", g.max_actor_ckpt_to_keep))
    for name, value in (env_vars or {}).items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"not an environment variable name: {name!r}")
        items.append((f"+ray_kwargs.ray_init.runtime_env.env_vars.{name}", str(value)))
    return [f"{key}={hydra_value(value)}" for key, value in items] + list(g.extra_overrides)


def _lora_items(cfg: RunConfig) -> list[tuple[str, Any]]:
    """verl's LoRA (`grpo.lora`, rank > 0); vLLM's rollout then loads the actor's weights as
    safetensors (verl's LoRA guide), and the reference is the actor with the adapter off."""
    lora = cfg.grpo.lora
    if not lora.enabled:
        return []
    return [
        ("actor_rollout_ref.model.lora_rank", lora.rank),
        ("actor_rollout_ref.model.lora_alpha", lora.scale_numerator),
        ("actor_rollout_ref.model.target_modules", lora.target),
        ("actor_rollout_ref.rollout.load_format", "safetensors"),
    ]


def _loggers(cfg: RunConfig) -> list[str]:
    """verl's loggers: `grpo.logger`, with wandb when tracking.wandb names a project."""
    logger = list(cfg.grpo.logger)
    return [*logger, "wandb"] if cfg.tracking.wandb.project and "wandb" not in logger else logger


def main_ppo_command(cfg: RunConfig, *, python: str = sys.executable, **kwargs: Any) -> list[str]:
    """`[python, -m, verl.trainer.main_ppo, *overrides]`; keywords as for `verl_overrides`."""
    return [python, "-m", MAIN_PPO, *verl_overrides(cfg, **kwargs)]


def verl_config_dir() -> Path:
    """`verl/trainer/config` of the installed verl (where `ppo_trainer.yaml` lives)."""
    import verl

    return Path(verl.__file__).resolve().parent / "trainer" / "config"


def compose_verl_config(overrides: Iterable[str]) -> DictConfig:
    """verl's own `ppo_trainer` config with our overrides, composed by hydra as main_ppo does."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        return compose(config_name="ppo_trainer", overrides=list(overrides))


# ---------------------------------------------------------------------------- checkpoints


def latest_global_step(checkpoint_dir: str | Path) -> int | None:
    """The step verl last saved under `checkpoint_dir` (its tracker file), or None if none."""
    tracker = Path(checkpoint_dir) / TRACKER_FILE
    if not tracker.is_file():
        return None
    text = tracker.read_text().strip()
    if not text.isdigit():
        raise VerlStageError(f"{tracker}: expected a step number, found {text!r}")
    step = int(text)
    if not (Path(checkpoint_dir) / f"global_step_{step}").is_dir():
        raise VerlStageError(f"{tracker} names step {step}, but global_step_{step}/ is missing")
    return step


def actor_dir(checkpoint_dir: str | Path, step: int) -> Path:
    return Path(checkpoint_dir) / f"global_step_{step}" / "actor"


def saved_hf_model(actor: str | Path) -> Path | None:
    """`actor/huggingface` when verl saved full HF weights there (save_contents has hf_model).

    verl always writes the config and tokenizer to that folder; only weights make it a model.
    """
    hf = Path(actor) / "huggingface"
    weights = [*hf.glob("*.safetensors"), *hf.glob("pytorch_model*.bin")]
    return hf if weights else None


def merge_command(
    checkpoint_dir: str | Path,
    target_dir: str | Path,
    *,
    step: int | None = None,
    python: str = sys.executable,
) -> list[str]:
    """verl's FSDP -> HF merger for the latest (or given) step; fsdp and fsdp2 both use it."""
    if step is None:
        step = latest_global_step(checkpoint_dir)
        if step is None:
            raise VerlStageError(f"no verl checkpoint under {checkpoint_dir} ({TRACKER_FILE})")
    return [
        python, "-m", MODEL_MERGER, "merge",
        "--backend", "fsdp",
        "--local_dir", str(actor_dir(checkpoint_dir, step)),
        "--target_dir", str(target_dir),
    ]  # fmt: skip


# ---------------------------------------------------------------------------- stage runner


def mlflow_env(tracking_uri: str | None, run_id: str | None) -> dict[str, str]:
    """MLflow variables to forward to verl's Ray workers (never credentials; see module doc)."""
    env: dict[str, str] = {}
    if tracking_uri:
        if "@" in urlsplit(tracking_uri).netloc:
            raise ValueError(
                "the MLflow tracking URI holds credentials, which verl would log as a param; "
                "use MLFLOW_TRACKING_USERNAME/PASSWORD or MLFLOW_TRACKING_TOKEN in the job env"
            )
        env["MLFLOW_TRACKING_URI"] = tracking_uri
    if run_id:
        env["MLFLOW_RUN_ID"] = run_id
    return env


def run_streaming(
    command: Sequence[str],
    env: Mapping[str, str],
    on_line: Callable[[str], None] | None = None,
) -> int:
    """Run a command with its output on ours (so the job log streams), as a process tree:
    verl's driver leaves children behind, and an interrupted stage must stop them all.
    `on_line` also gets every line (verl's step log, see `verl_log`)."""
    return run_tree(command, env, grace_s=60.0, on_line=on_line)


@dataclass(frozen=True)
class VerlParams:
    """What `train_verl` runs: the run's config (rendered as hydra overrides by
    `verl_overrides`), where verl checkpoints, the allocation's shape, and the MLflow server
    verl's own logger links to."""

    cfg: RunConfig
    checkpoint_dir: str
    nnodes: int
    n_gpus_per_node: int
    tracking_uri: str | None
    python: str = sys.executable
    #: the judge the train job serves inside its allocation (`stages.served_judge`), if any
    served_judge: Mapping[str, Any] | None = None


def params_from(
    cfg: RunConfig, output_dir: str | Path, served_judge: Mapping[str, Any] | None = None
) -> VerlParams:
    """The engine's inputs from a run config; checkpoints go to `output_dir/verl`;
    `served_judge`: the judge the job serves (`stages.served_judge`)."""
    from judgeflow.tracking import resolve_tracking_uri

    return VerlParams(
        cfg=cfg,
        checkpoint_dir=str(Path(output_dir) / "verl"),
        nnodes=cfg.cluster.nodes,
        n_gpus_per_node=cfg.policy_gpus_per_node,
        tracking_uri=resolve_tracking_uri(cfg.tracking.tracking_uri),
        served_judge=served_judge,
    )


@dataclass(frozen=True)
class VerlResult:
    final_model_dir: Path  # the HF model of the last step (merged when verl saved no HF copy)
    last_checkpoint: Path  # the verl checkpoint folder of that step (resumable)
    global_step: int
    resumed_from: str | None  # the checkpoint this attempt started from, if any
    metrics: dict[str, float]  # the last step's standard metrics (verl_log.STANDARD_NAMES)


def finish_checkpoint(
    checkpoint_dir: str | Path,
    *,
    python: str = sys.executable,
    runner: Runner | None = None,
    env: Mapping[str, str] | None = None,
    lora_alpha: int | None = None,
) -> tuple[int, Path]:
    """`(step, HF model dir)` for the last checkpoint, running verl's merger when it is needed.

    `lora_alpha`: the run trained a LoRA adapter with this alpha; verl's merger writes it apart
    from the base weights (`lora_adapter/`), and it is merged into them (`engines.lora`)."""
    run = runner or run_streaming
    step = latest_global_step(checkpoint_dir)
    if step is None:
        raise VerlStageError(
            f"verl finished but saved no checkpoint under {checkpoint_dir} "
            f"(no {TRACKER_FILE}); is trainer.save_freq > 0?"
        )
    hf = saved_hf_model(actor_dir(checkpoint_dir, step))
    if hf is not None and lora_alpha is None:  # verl's HF copy of a LoRA actor is not merged
        return step, hf
    target = Path(checkpoint_dir) / f"global_step_{step}" / MERGED_DIRNAME
    if target.exists():  # a half-written merge from an interrupted attempt
        shutil.rmtree(target)
    code = run(merge_command(checkpoint_dir, target, step=step, python=python), env or os.environ)
    if code != 0:
        raise VerlStageError(f"verl model merger exited with code {code} for step {step}")
    if lora_alpha is None:
        return step, target
    adapter = target / VERL_ADAPTER_DIRNAME
    if not (adapter / "adapter_model.safetensors").exists():
        raise VerlStageError(f"verl trained with LoRA but its merger wrote no adapter in {adapter}")
    merged = Path(checkpoint_dir) / f"global_step_{step}" / MERGED_LORA_DIRNAME
    return step, merge_adapter(target, adapter, merged, alpha=lora_alpha)


def train_verl(
    params: VerlParams,
    train_files: Sequence[str],
    val_files: Sequence[str],
    *,
    mlflow_run_id: str | None = None,
    experiment_name: str | None = None,
    runner: Runner | None = None,
    progress: Callable[[int, int], None] | None = None,
    metrics_sink: Callable[[dict[str, float], int], None] | None = None,
) -> VerlResult:
    """Train with verl on the Ray cluster of this job, then merge; runs on the Ray head.

    verl's step log is followed (`verl_log.VerlLogFollower`): `progress(step, total)` and
    `metrics_sink(standard metrics, step)` get what it reports, under judgeflow's names.

    The environment must already point at the job's Ray cluster (`RAY_ADDRESS`, set by the
    stage bootstrap). A re-run resumes from the last checkpoint (`trainer.resume_mode=auto`).
    Publishing the model (and its lineage) is the stage's, as for every engine.
    """
    cfg = params.cfg
    uri = params.tracking_uri or cfg.tracking.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if "mlflow" in cfg.grpo.logger and not uri:
        raise ValueError(
            "trainer.logger has mlflow but no tracking URI is known: verl would log to "
            "sqlite:////tmp/mlruns.db; set tracking.tracking_uri or MLFLOW_TRACKING_URI"
        )
    tracker_file = Path(params.checkpoint_dir) / TRACKER_FILE
    resumed = tracker_file.read_text().strip() if tracker_file.exists() else None
    forwarded = mlflow_env(uri, mlflow_run_id) if "mlflow" in cfg.grpo.logger else {}
    if "wandb" in _loggers(cfg):  # W&B's variables (the job has them) reach the TaskRunner
        forwarded |= {
            k: v for k, v in os.environ.items() if k.startswith("WANDB_") and k != "WANDB_API_KEY"
        }
    command = main_ppo_command(
        cfg,
        python=params.python,
        train_files=train_files,
        val_files=val_files,
        checkpoint_dir=params.checkpoint_dir,
        nnodes=params.nnodes,
        n_gpus_per_node=params.n_gpus_per_node,
        experiment_name=experiment_name,
        env_vars=forwarded,
        served_judge=params.served_judge,
    )
    env = {**os.environ, **forwarded}
    runner = runner or run_streaming  # looked up at call time: tests replace the process layer
    g = cfg.grpo
    accumulation = None
    if not g.use_dynamic_bsz:  # with it verl's loss scale changes every step
        accumulation = gradient_accumulation(
            ppo_mini_batch_size=g.ppo_mini_batch_size,
            rollout_n=g.rollout_n,
            n_gpus=params.nnodes * params.n_gpus_per_node,
            ppo_micro_batch_size_per_gpu=g.ppo_micro_batch_size_per_gpu,
            ulysses_sequence_parallel_size=g.ulysses_sequence_parallel_size,
        )
    follower = VerlLogFollower(progress=progress, sink=metrics_sink, accumulation=accumulation)
    code = runner(command, env, on_line=follower.feed)
    if code != 0:
        why = f": {follower.judge_failing}" if follower.judge_failing else ""
        raise VerlStageError(f"{MAIN_PPO} exited with code {code}{why}")
    lora = params.cfg.grpo.lora
    step, hf_dir = finish_checkpoint(
        params.checkpoint_dir, python=params.python, runner=runner, env=env,
        lora_alpha=lora.scale_numerator if lora.enabled else None,
    )  # fmt: skip
    return VerlResult(
        final_model_dir=hf_dir,
        last_checkpoint=Path(params.checkpoint_dir) / f"global_step_{step}",
        global_step=step,
        resumed_from=f"global_step_{resumed}" if resumed else None,
        metrics=follower.last_metrics,
    )
