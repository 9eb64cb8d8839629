"""The paying judges trained first: a judge-paid recipe may say which judge recipe (and profile)
trains the judge it names (`reward.judge_recipe`, `reward.judge_profile`), and its panel's
(`reward.judge_panel`). When a judge has no version at the alias it names yet, the policy's
flow runs the judge's pipeline before its own,
so one command goes from nothing to a judge and a policy paid by it, with the lineage from the
policy to the judge version to the judge's data (`judgeflow.registry.paying_judge`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from judgeflow.config import ConfigError, RunConfig, load_config
from judgeflow.config.redaction import strip_credentials
from judgeflow.registry.models import CHAMPION

__all__ = ["JudgeTraining", "judge_overrides", "judge_trained", "judges_to_train"]


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


def judges_to_train(cfg: RunConfig) -> list[JudgeTraining]:
    """The judge runs `cfg` needs first, in order: when `reward.judge_recipe` is set, each of
    `reward.judge` and `reward.judge_panel` that is `models:/NAME@ALIAS` with no version at
    ALIAS. The judges train with the policy's tracking server and store (`judge_overrides`);
    `reward.judge`'s recipe must register NAME (a `ConfigError` otherwise), and the k-th judge
    of the panel is the same recipe registered as its own NAME, with `data.seed` + k, so that
    the panel's judges are trained apart."""
    r = cfg.reward
    if not r.judge_recipe or not r.judge:
        return []
    shared = judge_overrides(cfg)
    first: list[JudgeTraining] = []
    for place, ref in enumerate([r.judge, *r.judge_panel]):
        if not ref.startswith("models:/"):
            continue
        name, _, alias = ref.removeprefix("models:/").partition("@")
        if not alias:  # a fixed version: nothing to train
            continue
        if alias != CHAMPION:
            raise ConfigError(
                f"{ref} with reward.judge_recipe: a judge's pipeline moves only the "
                f"{CHAMPION} alias, so {alias!r} would stay unset after training; name "
                f"models:/{name}@{CHAMPION}, or set reward.judge_recipe=null"
            )
        if _has_alias(cfg, name, alias):
            continue
        overrides = list(shared)
        if place:  # a panel judge: the same recipe, trained apart, under its own name
            seed = load_config(r.judge_recipe, profile=r.judge_profile, overrides=overrides)
            overrides += [f"register.model_name={name}", f"data.seed={seed.data.seed + place}"]
        trains = load_config(r.judge_recipe, profile=r.judge_profile, overrides=overrides)
        if trains.registered_model_name != name or not trains.register.enabled:
            registers = trains.registered_model_name if trains.register.enabled else "nothing"
            raise ConfigError(
                f"reward.judge_recipe={r.judge_recipe} (profile {r.judge_profile}) registers "
                f"{registers}, not {name} that reward.judge={ref} names: set "
                "register.model_name (and register.enabled) in the judge's recipe, or name its "
                "model in reward.judge"
            )
        first.append(JudgeTraining(name, r.judge_recipe, r.judge_profile, overrides))
    return first


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
