"""The paying judge trained first: a judge-paid recipe may say which judge recipe (and profile)
trains the judge it names (`reward.judge_recipe`, `reward.judge_profile`). When that judge has no
version at the alias it names yet, the policy's flow runs the judge's pipeline before its own,
so one command goes from nothing to a judge and a policy paid by it, with the lineage from the
policy to the judge version to the judge's data (`judgeflow.registry.paying_judge`).
"""

from __future__ import annotations

from dataclasses import dataclass

from judgeflow.config import ConfigError, RunConfig, load_config
from judgeflow.config.redaction import strip_credentials

__all__ = ["JudgeTraining", "judge_overrides", "judge_to_train"]


@dataclass(frozen=True)
class JudgeTraining:
    """The judge run to start first: `judgeflow run RECIPE --profile PROFILE --set …`."""

    name: str  # the registered judge it makes
    recipe: str
    profile: str | None
    overrides: list[str]

    @property
    def command(self) -> str:
        profile = f" --profile {self.profile}" if self.profile else ""
        return f"judgeflow run {self.recipe}{profile}" + "".join(
            f" --set {o}" for o in self.overrides
        )


def judge_to_train(cfg: RunConfig) -> JudgeTraining | None:
    """The judge run `cfg` needs first: when `reward.judge_recipe` is set, `reward.judge` is
    `models:/NAME@ALIAS` and NAME has no version at ALIAS. The judge trains with the policy's
    tracking server and store (`judge_overrides`); its recipe must register NAME (a
    `ConfigError` otherwise)."""
    r = cfg.reward
    if not r.judge_recipe or not r.judge or not r.judge.startswith("models:/"):
        return None
    name, _, alias = r.judge.removeprefix("models:/").partition("@")
    if not alias:  # a fixed version: nothing to train
        return None
    from judgeflow.registry.models import ModelRegistry

    if ModelRegistry(cfg.tracking.tracking_uri).by_alias(name, alias) is not None:
        return None
    overrides = judge_overrides(cfg)
    trains = load_config(r.judge_recipe, profile=r.judge_profile, overrides=overrides)
    if trains.registered_model_name != name:
        raise ConfigError(
            f"reward.judge_recipe={r.judge_recipe} (profile {r.judge_profile}) registers "
            f"{trains.registered_model_name}, not {name} that reward.judge={r.judge} names: "
            "set register.model_name in the judge's recipe, or name its model in reward.judge"
        )
    return JudgeTraining(name, r.judge_recipe, r.judge_profile, overrides)


def judge_overrides(cfg: RunConfig) -> list[str]:
    """The policy run's settings the judge's run shares: the store, and the tracking server
    without credentials (they reach MLflow from this process's environment, where
    `tracking.take_credentials` put them, never through a flow parameter or a log)."""
    overrides = [f"storage.root={cfg.storage.root}"] if cfg.storage.root else []
    if cfg.tracking.tracking_uri:
        overrides.append(f"tracking.tracking_uri={strip_credentials(cfg.tracking.tracking_uri)}")
    return overrides
