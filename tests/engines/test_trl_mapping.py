"""The run config's GRPO section as TRL's knobs: golden files per recipe, and every key that
TRL can honour reaches TRL's own `GRPOConfig` (schedule, warm-up, sampling, advantages, clip)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from judgeflow.config import ConfigError, list_recipes, load_config
from judgeflow.engines.trl import params_from
from judgeflow.engines.trl.mapping import grpo_config

#: A judge-paid recipe as a pipeline runs it: `reward.judge` pinned to a version's weights.
PINNED_JUDGE = ["reward.judge=/store/runs/judge/final", "reward.judge_mode=pointwise",
                "reward.judge_max_new_tokens=24"]  # fmt: skip


def pinned(recipe: str) -> list[str]:
    return PINNED_JUDGE if load_config(recipe).reward.paid_by_judge else []


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "trl"
UPDATE_GOLDEN = os.environ.get("JUDGEFLOW_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("recipe", list_recipes())
def test_recipe_maps_onto_the_golden_trl_params(recipe: str) -> None:
    params = params_from(load_config(recipe, overrides=["engine=trl", *pinned(recipe)]), "/out")
    text = json.dumps(asdict(params), indent=2, sort_keys=True) + "\n"
    golden = GOLDEN / f"{recipe}.json"
    if UPDATE_GOLDEN:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.is_file(), f"{golden} missing; run with JUDGEFLOW_UPDATE_GOLDEN=1"
    assert text == golden.read_text(), "TRL mapping changed; review, then regenerate"


def test_grrm_rlvr_knobs_reach_trls_grpo_config() -> None:
    cfg = load_config("grrm-rlvr", overrides=["engine=trl", "grpo.lr_warmup_steps_ratio=0.05"])
    args = grpo_config(params_from(cfg, "/tmp/jf-out"), has_eval=False)
    g = cfg.grpo
    assert args.lr_scheduler_type == "cosine_with_min_lr"
    assert args.lr_scheduler_kwargs == {"min_lr_rate": g.min_lr_ratio}
    assert args.warmup_ratio == 0.05
    assert args.scale_rewards == "none"  # norm_adv_by_std_in_grpo: false
    assert args.loss_type == "grpo"  # seq-mean-token-mean
    assert args.importance_sampling_level == "sequence"  # loss_mode: gspo
    assert (args.epsilon, args.epsilon_high) == (g.clip_ratio_low, g.clip_ratio_high)
    assert (args.temperature, args.top_p, args.top_k) == (g.temperature, g.top_p, None)


def test_judge_defaults_reach_trls_grpo_config() -> None:
    cfg = load_config("grpo-pointwise", overrides=["engine=trl", "grpo.top_p=0.9"])
    args = grpo_config(params_from(cfg, "/tmp/jf-out"), has_eval=False)
    assert args.lr_scheduler_type == "constant"
    assert args.scale_rewards == "group"
    assert args.loss_type == "dapo"  # verl's token-mean
    assert args.top_p == 0.9


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("grpo.loss_agg_mode=seq-mean-token-sum", "grpo.loss_agg_mode"),
        ("grpo.loss_mode=clip_cov", "grpo.loss_mode"),
        (
            "grpo.filter_zero_std_samples=true grpo.loss_agg_mode=seq-mean-token-mean",
            "grpo.filter_zero_std_samples=true needs grpo.loss_agg_mode=token-mean",
        ),
    ],
)
def test_a_knob_trl_cannot_honour_is_a_config_error(override: str, named: str) -> None:
    cfg = load_config("grpo-pointwise", overrides=["engine=trl", *override.split()])
    with pytest.raises(ConfigError, match=named):
        params_from(cfg, "/out")


def test_trl_extra_sets_grpo_config_fields_judgeflow_does_not_name() -> None:
    cfg = load_config(
        "grpo-pointwise",
        profile="tiny",
        overrides=["grpo.trl_extra={weight_decay: 0.05, adam_beta2: 0.99}"],
    )
    config = grpo_config(params_from(cfg, "/out"), has_eval=False)
    assert (config.weight_decay, config.adam_beta2) == (0.05, 0.99)
    plain = grpo_config(params_from(load_config("grpo-pointwise", profile="tiny"), "/out"),
                        has_eval=False)  # fmt: skip
    assert (plain.weight_decay, plain.adam_beta2) == (0.0, 0.999)  # TRL's own defaults


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("{weight_decy: 0.1}", "weight_decy is not a field of TRL's GRPOConfig (did you mean weight_decay?)"),
        ("{beta: 0.1}", "beta is set by judgeflow (its grpo.* key, or fixed)"),
        ("{report_to: wandb}", "report_to is set by judgeflow"),
    ],
)  # fmt: skip
def test_trl_extra_refuses_what_grpo_config_lacks_and_what_judgeflow_sets(
    extra: str, said: str
) -> None:
    import re

    with pytest.raises(ConfigError, match=re.escape(said)):
        load_config("grpo-pointwise", overrides=[f"grpo.trl_extra={extra}"])


def test_trl_extra_under_verl_warns_by_name() -> None:
    from judgeflow.config import IgnoredKeyWarning

    with pytest.warns(IgnoredKeyWarning, match=r"grpo.trl_extra is read only by the trl engine"):
        load_config(
            "grpo-pointwise", overrides=["engine=verl", "grpo.trl_extra={weight_decay: 0.1}"]
        )


def test_the_config_knows_every_field_judgeflow_sets_in_grpo_config() -> None:
    """`config.passthrough.TRL_SET` (what grpo.trl_extra may not set) is what the engine sets."""
    from judgeflow.config.passthrough import TRL_SET
    from judgeflow.engines.trl.mapping import GrpoParams, _config_arguments

    assert set(_config_arguments(GrpoParams("m", "o", "pointwise"), has_eval=True)) == TRL_SET
