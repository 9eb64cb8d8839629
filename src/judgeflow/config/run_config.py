"""Typed run configuration: recipe presets (YAML) + profiles + `dotted.key=value` overrides.

A run is described by one `RunConfig`. It is built from a preset in `src/judgeflow/recipes/`, an
optional profile overlay (`recipes/profiles/tiny.yaml` for CPU), then user overrides, and only
then validated, so every error names the dotted key that caused it.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from judgeflow.config.errors import ConfigError
from judgeflow.config.evaluation_and_registry import EvaluationConfig, RegisterConfig
from judgeflow.config.infrastructure import ClusterConfig, StorageConfig, TrackingConfig
from judgeflow.config.inputs import DataConfig, ModelConfig
from judgeflow.config.policy_reward import RewardConfig, RlvrConfig
from judgeflow.config.section import Section
from judgeflow.config.training import GrpoConfig, SftConfig
from judgeflow.modes import Mode

#: LLaMA-Factory data arguments it does not apply to a tokenized dataset (`tokenized_path`),
#: which is what SFT trains on under `data.chat_template`.
TOKENIZED_IGNORES = frozenset({
    "packing", "neat_packing", "val_size", "eval_dataset", "mask_history", "train_on_prompt",
    "dataset", "dataset_dir", "template", "cutoff_len", "max_samples", "streaming",
})  # fmt: skip

# `register` names ABCMeta.register, a method of the metaclass that instances never see; pydantic
# warns about the shadowing all the same. The key is `register.*` because users type it.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message='Field name "register"', category=UserWarning)

    class RunConfig(Section):
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
            description="`trl` (CPU or 1 GPU) or `verl` (GPU cluster); `auto`: verl on Slurm or Ray, else TRL",
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
            template = self.data.chat_template_jinja if self.mode == "rlvr" else None
            if template and "${" in template and self.resolved_engine == "verl":
                raise ValueError(
                    "data.chat_template holds `${`, which verl's config reads as an "
                    "interpolation: write it apart in the Jinja (`'$' ~ '{'`)"
                )
            ignored = sorted(set(self.sft.extra) & TOKENIZED_IGNORES)
            if template and self.sft.enabled and ignored:
                raise ValueError(
                    f"sft.extra sets {', '.join(ignored)}, which LLaMA-Factory ignores on the rows "
                    "judgeflow tokenizes with data.chat_template (it reads them as they are): "
                    "leave them out, or the chat template"
                )
            if (self.data.mixer or self.data.eval_mixer) and self.mode != "rlvr":
                raise ValueError(
                    "data.mixer / data.eval_mixer mix policy (rlvr) data; a judge's data is one "
                    f"data.source and data.val_source (this recipe trains mode={self.mode})"
                )
            if (
                self.engine == "verl"
                and self.cluster.backend == "local"
                and not self.cluster.gpus_per_node
            ):
                raise ValueError("engine=verl needs GPUs: set cluster.gpus_per_node")
            w = self.tracking.wandb
            if (
                w.project
                and self.resolved_engine == "verl"
                and w.project != self.tracking.experiment
            ):
                raise ValueError(
                    f"tracking.wandb.project={w.project}: verl names its W&B project and its "
                    f"MLflow experiment alike (trainer.project_name), so it must be "
                    f"tracking.experiment ({self.tracking.experiment})"
                )
            if self.mode != "grrm" and self.sft.enabled and not self.sft.source:
                raise ValueError("sft.enabled needs sft.source: the `messages` rows to train on")
            if self.reward.paid_by_judge and self.mode != "rlvr":
                raise ValueError(
                    "reward.judge / reward.judge_url pay a policy: they need mode=rlvr "
                    f"(this recipe trains mode={self.mode})"
                )
            if self.mode == "rlvr" and self.reward.paid_by_judge and self.resolved_engine == "verl":
                self._check_judge_on_verl()
            if self.serves_judge_in_allocation and self.cluster.backend == "ray":
                raise ValueError(
                    "a judge-paid policy under cluster.backend=ray: judgeflow serves the paying "
                    "judge inside a Slurm allocation only; serve it on the Ray cluster yourself "
                    "(e.g. Ray Serve, vLLM) and set reward.judge_url"
                )
            if self.serves_judge_in_allocation:
                self._check_judge_in_allocation()
                if self.reward.judge_panel:
                    raise ValueError(
                        "reward.judge_panel is judged in the training process (TRL run locally); "
                        f"this run serves its judge (engine {self.resolved_engine}, cluster."
                        f"backend {self.cluster.backend}), one judge: unset reward.judge_panel"
                    )
            if self.mode == "grrm" and (self.sft.enabled or self.sft.source):
                raise ValueError(
                    "sft.enabled / sft.source are for the judge recipes; GRRM's SFT runs on its own "
                    "data and `judgeflow run grrm-full --stage sft|rlvr|full` decides whether it runs"
                )
            return self

        def _check_judge_on_verl(self) -> None:
            """verl's batch reward manager calls the judge."""
            if self.grpo.reward_manager != "batch":
                raise ValueError(
                    "a judge-paid policy on verl is scored by verl's batch reward manager (all "
                    "rollouts of a step at once): set grpo.reward_manager=batch"
                )

        def _check_judge_in_allocation(self) -> None:
            """The judge served inside the allocation listens on the head node, on GPUs of its
            own (on CPU when the allocation has none: TRL)."""
            if self.cluster.backend != "slurm":
                return
            if self.cluster.nodes > 1:
                raise ValueError(
                    "the judge served inside the allocation listens on the head node only: with "
                    "cluster.nodes > 1, serve it yourself and set reward.judge_url"
                )
            if self.resolved_engine == "trl" and not self.cluster.gpus_per_node:
                return  # a CPU allocation: the judge is served on CPU beside TRL
            if not 1 <= self.reward.judge_gpus < self.cluster.gpus_per_node:
                raise ValueError(
                    f"reward.judge_gpus={self.reward.judge_gpus}: the judge served inside the "
                    f"allocation needs at least one of the node's {self.cluster.gpus_per_node} "
                    f"GPUs and must leave {self.resolved_engine} at least one"
                )

        @property
        def registered_model_name(self) -> str:
            """The registered model this run's final model becomes a version of."""
            return self.register.model_name or self.recipe

        def policy_reward_kwargs(
            self, *, served: Mapping[str, Any] | None = None
        ) -> dict[str, Any]:
            """The reward's keywords for a policy run (`rlvr.score`'s, and
            `judgeflow.inference.judge_reward`'s when a judge pays): the RLVR rules, and which
            judge and how it is called: its weights' URI (fetched where the reward runs), or a
            URL (`reward.judge_url`, or `served`: the judge the job serves inside its allocation,
            `judgeflow.stages.served_judge`: its `judge_url`, the `judge_model` it must say it
            serves and its `judge_server_status` file) and how it is asked there (protocol,
            served model, time limits). A registered judge (`models:/…`) must be pinned to its
            version's weights first (`judgeflow.registry.paying_judge.pin_judge`, which every
            pipeline does)."""
            if self.mode != "rlvr":
                return {}
            kwargs = self.rlvr.reward_kwargs()
            r = self.reward
            if not r.paid_by_judge:
                return kwargs
            if unpinned := [j for j in [r.judge or "", *r.judge_panel] if j.startswith("models:/")]:
                raise ConfigError(
                    f"reward.judge={unpinned[0]} is not resolved: a run pins it to the version's "
                    "weights first (judgeflow.registry.paying_judge.pin_judge)"
                )
            kwargs |= {
                "judge_mode": r.judge_mode,
                "judge_datasets": sorted({d.lower() for d in r.judge_datasets}),
                "judge_batch_size": r.judge_batch_size,
                "judge_max_new_tokens": r.judge_max_new_tokens,
                "judge_concurrency": r.judge_concurrency,
                "judge_max_failure_rate": r.judge_max_failure_rate,
            }
            times = {"judge_timeout_s": r.judge_timeout_s, "judge_retry_s": r.judge_retry_s}
            if r.judge_url:
                asked = {"judge_url": r.judge_url, "judge_api": r.judge_api, **times}
                return kwargs | asked | ({"judge_model": r.judge_model} if r.judge_model else {})
            if served:  # the judge served inside the allocation is MLflow's scoring server
                return kwargs | {"judge_api": "mlflow", **times} | dict(served)
            panel = {"judge_panel_weights": list(r.judge_panel)} if r.judge_panel else {}
            return kwargs | {"judge_weights": r.judge} | panel

        @property
        def serves_judge_in_allocation(self) -> bool:
            """Whether the train job serves a judge-paid policy's judge itself
            (`judgeflow.stages.served_judge`): on Slurm, and wherever verl trains; not when the
            judge is served elsewhere (`reward.judge_url`). TRL run locally loads it in its
            own process instead."""
            return (
                self.mode == "rlvr"
                and self.reward.paid_by_judge
                and not self.reward.judge_url
                and (self.resolved_engine == "verl" or self.cluster.backend == "slurm")
            )

        @property
        def policy_gpus_per_node(self) -> int:
            """A node's GPUs the policy trains on: all of them, but those serving a judge-paid
            policy's judge inside the allocation (`reward.judge_gpus`; none when the judge is
            served elsewhere or the allocation has no GPUs)."""
            gpus = self.cluster.gpus_per_node
            if self.serves_judge_in_allocation and gpus:
                gpus -= self.reward.judge_gpus
            return gpus

        @property
        def resolved_engine(self) -> Literal["trl", "verl"]:
            """`auto` means verl on a cluster (Slurm, Ray: GPU clusters) and TRL locally."""
            if self.engine != "auto":
                return self.engine
            return "trl" if self.cluster.backend == "local" else "verl"

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
