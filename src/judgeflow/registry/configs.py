"""The run configuration a model reference is evaluated or judged with, and the MLflow tags that
say which judge an evaluation or judging run used.

A registered version (`models:/NAME@champion`, `models:/NAME/3`) brings its mode, its recipe
and the evaluation settings of the run that registered it, so `judgeflow evaluate` and
`judgeflow judge` measure and judge as the champion gate did; `--set` overrides them.
"""

from __future__ import annotations

import json
from pathlib import Path

from judgeflow.config import ConfigError, RunConfig, load_config
from judgeflow.registry.models import TAG_MODE, ModelRegistry
from judgeflow.registry.paying_judge import TAG_REWARD_JUDGE, TAG_REWARD_JUDGE_PANEL, pin_judge
from judgeflow.tracking import MAX_PARAM, Tracker, git_commit

__all__ = ["judge_tags", "resolve_config"]


def judge_tags(cfg: RunConfig, model: str, version: str | None) -> dict[str, str]:
    """The tags of a run that used a judge (`judgeflow evaluate`, `judgeflow judge`): the model
    as given, its weights, the registered version, the mode and judgeflow's commit."""
    return {
        "judgeflow.model": model,
        "judgeflow.model_uri": cfg.model.path,
        "judgeflow.registered_version": version or "",
        "judgeflow.mode": cfg.mode,
        "judgeflow.git_commit": git_commit(Path(__file__).parent) or "unknown",
    }


def resolve_config(
    model: str,
    *,
    mode: str | None,
    recipe: str | None,
    profile: str | None,
    overrides: list[str],
    tracking_uri: str | None,
) -> tuple[RunConfig, str, str | None]:
    """The run configuration to evaluate with, the weights' URI and the registered version.

    A registered version brings its mode, recipe and the evaluation settings of the run that
    registered it (so `judgeflow evaluate models:/NAME@champion` measures as the gate did);
    `--set` overrides them.
    """
    version = None
    recorded: list[str] = []
    model_uri = model
    if model.startswith("models:/"):
        info = ModelRegistry(tracking_uri).resolve(model)
        version, model_uri = info.ref, info.model_uri
        mode = mode or info.tags.get(TAG_MODE)
        recipe = recipe or info.tags.get("judgeflow.recipe")
        recorded = _recorded_evaluation(info.run_id, tracking_uri) if not profile else []
        if paid_by := info.tags.get(TAG_REWARD_JUDGE):  # a judge-paid policy: its own judge
            recorded.append(f"reward.judge={paid_by}")
            panel = info.tags.get(TAG_REWARD_JUDGE_PANEL)  # and its panel's
            recorded.append(f"reward.judge_panel=[{panel or ''}]")
    if not mode:
        raise ConfigError(f"{model}: say which judge it is with --mode pointwise|pairwise|grrm")
    recipe = recipe or {"grrm": "grrm-rlvr", "rlvr": "rlvr"}.get(mode, f"grpo-{mode}")
    base = [f"mode={mode}", f"model.path={model_uri}"]
    if tracking_uri:
        base.append(f"tracking.tracking_uri={tracking_uri}")
    cfg = load_config(recipe, profile=profile, overrides=[*base, *recorded, *overrides])
    cfg, _ = pin_judge(cfg)  # a judge-paid policy is measured by the judge version that paid it
    return cfg, model_uri, version


def _recorded_evaluation(run_id: str | None, tracking_uri: str | None) -> list[str]:
    """`evaluation.*` of the run that registered a version, and the chat template its prompts
    were rendered with (a run without one: the tokenizer's own), as overrides."""
    if not run_id:
        return []
    params = Tracker.attach(run_id, tracking_uri).client.get_run(run_id).data.params
    keep = ("max_new_tokens", "temperature", "top_p", "samples", "limit", "batch_size")
    recorded = [
        f"evaluation.{k}={params[f'evaluation.{k}']}"
        for k in keep
        if params.get(f"evaluation.{k}") not in (None, "None", "***")  # "***": redacted
    ]
    template = params.get("data.chat_template")  # absent: a run from before the key
    if params.get("mode") == "rlvr" and template is not None and len(template) < MAX_PARAM:
        template = "tokenizer" if template == "None" else template  # not cut short when logged
        recorded.append(f"data.chat_template={json.dumps(template)}")  # YAML reads it as text
    return recorded
