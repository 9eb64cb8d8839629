"""The paying judge trained first: a judge-paid recipe may say which judge recipe (and profile)
trains the judge it names (`reward.judge_recipe`, `reward.judge_profile`). When that judge has no
version at the alias it names yet, the policy's flow runs the judge's pipeline before its own,
so one command goes from nothing to a judge and a policy paid by it, with the lineage from the
policy to the judge version to the judge's data (`judgeflow.registry.paying_judge`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from judgeflow.config import ConfigError, RunConfig, load_config
from judgeflow.config.redaction import strip_credentials
from judgeflow.registry.models import CHAMPION

__all__ = ["JudgeTraining", "judge_overrides", "judge_to_train", "judge_trained"]


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
    if alias != CHAMPION:
        raise ConfigError(
            f"reward.judge={r.judge} with reward.judge_recipe: a judge's pipeline moves only "
            f"the {CHAMPION} alias, so {alias!r} would stay unset after training; name "
            f"models:/{name}@{CHAMPION}, or set reward.judge_recipe=null"
        )
    if _has_alias(cfg, name, alias):
        return None
    overrides = judge_overrides(cfg)
    trains = load_config(r.judge_recipe, profile=r.judge_profile, overrides=overrides)
    if trains.registered_model_name != name or not trains.register.enabled:
        registers = trains.registered_model_name if trains.register.enabled else "nothing"
        raise ConfigError(
            f"reward.judge_recipe={r.judge_recipe} (profile {r.judge_profile}) registers "
            f"{registers}, not {name} that reward.judge={r.judge} names: set "
            "register.model_name (and register.enabled) in the judge's recipe, or name its "
            "model in reward.judge"
        )
    return JudgeTraining(name, r.judge_recipe, r.judge_profile, overrides)


def judge_trained(training: JudgeTraining, summary: dict[str, Any]) -> None:
    """Check the judge's run made a champion of its model; a `ConfigError` saying why not
    (kept as challenger: the registry's reason) and what to do."""
    decision = (summary.get("registry") or {}).get("final") or {}
    if not decision.get("promoted"):
        why = decision.get("reason") or "its run registered no version"
        raise ConfigError(
            f"the judge trained first ({training.command}) did not become {training.name}'s "
            f"{CHAMPION}: {why}. Look at its run ({summary.get('mlflow_url') or 'MLflow'}), then "
            f"promote a version ({CHAMPION} alias) or rerun it with register.force=true"
        )


def _has_alias(cfg: RunConfig, name: str, alias: str) -> bool:
    """Whether `name` has a version at `alias`; an unknown model or alias is "no", any other
    failure (the server down, refused) is raised, so that a hiccup never starts a training."""
    from mlflow.exceptions import MlflowException

    from judgeflow.registry.models import ModelRegistry

    client = ModelRegistry(cfg.tracking.tracking_uri).client
    try:
        client.get_model_version_by_alias(name, alias)
    except MlflowException as exc:
        if exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            return False
        raise
    return True


def judge_overrides(cfg: RunConfig) -> list[str]:
    """The policy run's settings the judge's run shares: the store (and its credentials block),
    the cluster backend (its other settings are the judge recipe's), and the tracking server
    without credentials (they reach MLflow from this process's environment, where
    `tracking.take_credentials` put them, never through a flow parameter or a log)."""
    overrides = [f"storage.root={cfg.storage.root}"] if cfg.storage.root else []
    if cfg.storage.credentials_block:  # a block's name, not a secret
        overrides.append(f"storage.credentials_block={cfg.storage.credentials_block}")
    overrides.append(f"cluster.backend={cfg.cluster.backend}")
    if cfg.tracking.tracking_uri:
        overrides.append(f"tracking.tracking_uri={strip_credentials(cfg.tracking.tracking_uri)}")
    return overrides
