"""The judge that pays a policy (`reward.judge`, `reward.judge_url`): which version it is, what it
needs to run, and the reward keywords the engines and the evaluation pass on.

A pipeline resolves `models:/NAME@champion` once, at its start, and pins the run to the version
it found (`pin_judge`): the cache keys, the lineage tags and every stage then name one judge, and a
champion that moves later makes the next retraining train again instead of reusing a policy
another judge paid. A judge served at a URL (`reward.judge_url`) is asked which model answers
there (`inference.served_judge_client.served_model`), and the run is pinned to that model
(`reward.judge_model`): another model behind the same URL is another judge.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from judgeflow.config import ConfigError, RunConfig
from judgeflow.modes import JUDGE_MODELS

__all__ = [
    "TAG_REWARD_JUDGE",
    "TAG_REWARD_JUDGE_PANEL",
    "PayingJudge",
    "paying_judge",
    "pin_judge",
]

#: Tags of a policy's run and registered version: the judge version that paid it, its run, data.
TAG_REWARD_JUDGE = "judgeflow.reward.judge"
TAG_REWARD_JUDGE_RUN = "judgeflow.reward.judge_run_id"
TAG_REWARD_JUDGE_DATA = "judgeflow.reward.judge_data_hash"
TAG_REWARD_JUDGE_MODE = "judgeflow.reward.judge_mode"
#: What answered at a served judge's URL: the OpenAI model, the weights an MLflow judge serves.
TAG_REWARD_JUDGE_MODEL = "judgeflow.reward.judge_model"
#: `reward.judge_panel`'s judges (comma-separated, in order): versions, their runs, their data.
TAG_REWARD_JUDGE_PANEL = "judgeflow.reward.judge_panel"
TAG_REWARD_JUDGE_PANEL_RUNS = "judgeflow.reward.judge_panel_run_ids"
TAG_REWARD_JUDGE_PANEL_DATA = "judgeflow.reward.judge_panel_data_hashes"
#: What that tag says of an MLflow model that does not say what it serves.
UNKNOWN_MODEL = "unknown: the server does not say"


@dataclass(frozen=True)
class PayingJudge:
    """A judge that pays: `ref` is `models:/NAME/VERSION` for a registered one (resolved), the
    store URI or URL as given otherwise."""

    ref: str
    mode: str
    max_new_tokens: int
    weights: str | None = None  # the judge's weights (a store URI); None for a served judge
    url: str | None = None
    run_id: str | None = None
    data_hash: str | None = None
    served_model: str | None = None  # what answers at `url` (None: the server does not say)
    panel: tuple[PayingJudge, ...] = ()  # `reward.judge_panel`'s judges, resolved

    @property
    def judges(self) -> tuple[PayingJudge, ...]:
        """This judge and its panel's: every judge that pays."""
        return (self, *self.panel)

    def tags(self) -> dict[str, str]:
        """The lineage a policy's MLflow run and registered version carry."""
        from judgeflow.config.redaction import strip_credentials

        tags = {TAG_REWARD_JUDGE: strip_credentials(self.ref), TAG_REWARD_JUDGE_MODE: self.mode}
        if self.run_id:
            tags[TAG_REWARD_JUDGE_RUN] = self.run_id
        if self.data_hash:
            tags[TAG_REWARD_JUDGE_DATA] = self.data_hash
        if self.url:
            tags[TAG_REWARD_JUDGE_MODEL] = strip_credentials(self.served_model or UNKNOWN_MODEL)
        if self.panel:  # each panel judge's version, run and data, in the panel's order
            for key, values in (
                (TAG_REWARD_JUDGE_PANEL, [strip_credentials(p.ref) for p in self.panel]),
                (TAG_REWARD_JUDGE_PANEL_RUNS, [p.run_id or "" for p in self.panel]),
                (TAG_REWARD_JUDGE_PANEL_DATA, [p.data_hash or "" for p in self.panel]),
            ):
                if any(values):
                    tags[key] = ", ".join(values)
        return tags

    def to_dict(self) -> dict[str, Any]:
        """Plain values for the run summary (a flow's return value): URLs without credentials."""
        from judgeflow.config.redaction import strip_credentials

        out = asdict(self)
        out["panel"] = [p.to_dict() for p in self.panel]
        for key in ("ref", "url", "weights", "served_model"):
            if out[key]:
                out[key] = strip_credentials(out[key])
        return out


def _recorded_max_new_tokens(run_id: str | None, tracking_uri: str | None) -> int | None:
    """`evaluation.max_new_tokens` of the run that registered the judge: how long it answers."""
    if not run_id:
        return None
    from judgeflow.tracking import Tracker

    params = Tracker.attach(run_id, tracking_uri).client.get_run(run_id).data.params
    value = params.get("evaluation.max_new_tokens")
    return int(value) if value and value.isdigit() else None


def _served_model(cfg: RunConfig) -> str | None:
    """Which model answers at `reward.judge_url`; a pinned MLflow judge must still be it."""
    from judgeflow.config.redaction import strip_credentials
    from judgeflow.inference.served_judge_client import served_model

    r = cfg.reward
    assert r.judge_url and r.judge_mode  # the schema's check
    found = served_model(
        r.judge_url,
        r.judge_mode,
        api=r.judge_api,
        model=r.judge_model,
        timeout_s=r.judge_timeout_s,
        retry_s=r.judge_retry_s,
    )
    if r.judge_model and found != r.judge_model:  # only MLflow's answer can differ
        raise ConfigError(
            f"reward.judge_model={r.judge_model}, but the judge at "
            f"{strip_credentials(r.judge_url)} serves {found or 'a model that does not say'}: "
            "unset reward.judge_model, or serve that judge there"
        )
    return found


def paying_judge(cfg: RunConfig) -> PayingJudge | None:
    """The judge `cfg.reward` names, resolved (a registry lookup for `models:/…`); None when no
    judge pays. An unknown or missing judge is a `ConfigError` that says what to run."""
    r = cfg.reward
    if r.judge_url:
        assert r.judge_mode and r.judge_max_new_tokens  # the schema's check
        found = _served_model(cfg)
        return PayingJudge(
            r.judge_url, r.judge_mode, r.judge_max_new_tokens, url=r.judge_url, served_model=found
        )
    if not r.judge:
        return None
    judge = _judge(cfg, r.judge)
    panel = tuple(_judge(cfg, ref, key="reward.judge_panel") for ref in r.judge_panel)
    if odd := [p for p in panel if p.mode != judge.mode]:
        raise ConfigError(
            f"reward.judge_panel: {odd[0].ref} is a {odd[0].mode} judge and {judge.ref} a "
            f"{judge.mode} one: a panel's judges score alike, so they have one mode"
        )
    return replace(judge, panel=panel) if panel else judge


def _judge(cfg: RunConfig, ref: str, key: str = "reward.judge") -> PayingJudge:
    """The judge at `ref` (`models:/…`, resolved in the registry, or a store URI)."""
    r = cfg.reward
    if not ref.startswith("models:/"):
        if not r.judge_max_new_tokens:
            raise ConfigError(
                f"{key}={ref} is not a registered version: set "
                "reward.judge_max_new_tokens (how long the judge's replies are)"
            )
        assert r.judge_mode  # the schema's check
        return PayingJudge(ref, r.judge_mode, r.judge_max_new_tokens, weights=ref)

    from judgeflow.registry.models import TAG_MODE, ModelRegistry, RegistryError

    try:
        info = ModelRegistry(cfg.tracking.tracking_uri).resolve(ref)
    except RegistryError as exc:
        name = ref.removeprefix("models:/").split("@")[0].split("/")[0]
        recipe = {"judge-grpo-pointwise": "grpo-pointwise", "judge-grpo-pairwise": "grpo-pairwise"}
        run = recipe.get(name)
        how = (
            f"`judgeflow run {run} --profile tiny` (or `make demo`)"
            if run
            else "the pipeline that trains it"
        )
        raise ConfigError(
            f"{key}={ref}: no such judge version ({exc}). Train and register the "
            f"judge first with {how}, or name another with --set reward.judge=models:/NAME/VERSION"
        ) from None
    mode = info.tags.get(TAG_MODE, "")
    if mode not in JUDGE_MODELS:
        raise ConfigError(
            f"{key}={ref} is {info.ref}, a model of mode {mode or 'unknown'}: a policy "
            "is paid by a judge (pointwise, pairwise or grrm)"
        )
    if r.judge_mode and r.judge_mode != mode:
        raise ConfigError(
            f"reward.judge_mode={r.judge_mode}, but {info.ref} is a {mode} judge: unset it"
        )
    tokens = r.judge_max_new_tokens or _recorded_max_new_tokens(
        info.run_id, cfg.tracking.tracking_uri
    )
    if not tokens:
        raise ConfigError(
            f"{info.ref}: its run records no evaluation.max_new_tokens; set "
            "reward.judge_max_new_tokens"
        )
    return PayingJudge(
        ref=f"models:/{info.name}/{info.version}",
        mode=mode,
        max_new_tokens=tokens,
        weights=info.model_uri,
        run_id=info.run_id,
        data_hash=info.tags.get("judgeflow.data.manifest_hash"),
    )


def pin_judge(cfg: RunConfig) -> tuple[RunConfig, PayingJudge | None]:
    """`cfg` with `reward.judge` (and `reward.judge_panel`'s) pinned to the weights of the
    version it resolves to (and its mode and reply length written out), or a served judge's
    `reward.judge_model` to the model that answers at its URL (when the server says), and that
    judge (whose `ref` names the version, for the lineage); `cfg` itself when no judge pays. Every stage then reads the judge
    from `cfg` alone (`RunConfig.policy_reward_kwargs`), and the cache keys change with it."""
    judge = paying_judge(cfg)
    if judge is None:
        return cfg, None
    update: dict[str, Any]
    if judge.url:
        update = {"judge_model": judge.served_model} if judge.served_model else {}
    else:
        update = {
            "judge": judge.weights,
            "judge_panel": [p.weights for p in judge.panel],
            "judge_mode": judge.mode,
            # a panel's judges are asked alike: the longest reply any of them gives
            "judge_max_new_tokens": max(j.max_new_tokens for j in judge.judges),
            # a fixed judge: nothing is left to train first (`registry.judge_first`)
            "judge_recipe": None,
            "judge_profile": None,
        }
    reward = cfg.reward.model_copy(update=update)
    return cfg.model_copy(update={"reward": reward}), judge
