"""A judge-paid recipe that says which recipe trains its judge (`reward.judge_recipe`,
`reward.judge_profile`) has that judge trained first, and only while the judge has no version
at the alias it names. The whole loop (the judge trained, then the policy it pays) runs in
`benchmarks/demo.py judged`; here, what decides it, against a real MLflow registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient

from judgeflow.config import ConfigError, RunConfig, load_config
from judgeflow.registry.judge_first import judge_overrides, judges_to_train


def _policy(tmp_path: Path, *overrides: str) -> tuple[str, RunConfig]:
    """The tiny judge-paid policy's config, on a registry of its own; and that registry."""
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = load_config(
        "rlvr-judged", profile="tiny", overrides=[f"tracking.tracking_uri={tracking}", *overrides]
    )
    return tracking, cfg


def _make_champion(tracking: str, name: str, weights: Path) -> None:
    client = MlflowClient(tracking, registry_uri=tracking)
    client.create_registered_model(name)
    version = client.create_model_version(name, str(weights), run_id=None)
    client.set_registered_model_alias(name, "champion", version.version)


def test_the_judge_is_trained_first_only_while_it_has_no_champion(tmp_path: Path) -> None:
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = load_config(
        "rlvr-judged", profile="tiny", overrides=[f"tracking.tracking_uri={tracking}"]
    )
    assert (cfg.reward.judge_recipe, cfg.reward.judge_profile) == (
        "grpo-pointwise",
        "tiny-verified",
    )
    trainings = judges_to_train(cfg)
    assert len(trainings) == 1 + len(cfg.reward.judge_panel)
    first = trainings[0]
    assert (first.name, first.recipe, first.profile) == (
        "judge-tiny-verified",
        "grpo-pointwise",
        "tiny-verified",
    )
    assert f"tracking.tracking_uri={tracking}" in first.overrides  # the policy's server
    assert first.command.startswith("judgeflow run grpo-pointwise --profile tiny-verified --set ")
    trained = load_config(first.recipe, profile=first.profile, overrides=first.overrides)
    assert trained.registered_model_name == "judge-tiny-verified"
    assert trained.data.source == "sample://rlvr_judged/verified_judge.jsonl"

    _make_champion(tracking, "judge-tiny-verified", tmp_path)
    # a champion: the policy is paid by it, nothing trains (but the panel's judges)
    assert [t.name for t in judges_to_train(cfg)] == [
        ref.removeprefix("models:/").split("@")[0] for ref in cfg.reward.judge_panel
    ]


def test_without_a_judge_recipe_nothing_is_trained_and_pinning_says_what_to_run(
    tmp_path: Path,
) -> None:
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = load_config(
        "rlvr-judged", profile="tiny",
        overrides=[f"tracking.tracking_uri={tracking}", "reward.judge_recipe=null",
                   "reward.judge_profile=null"],
    )  # fmt: skip
    assert judges_to_train(cfg) == []


def test_a_judge_recipe_that_registers_another_model_is_refused(tmp_path: Path) -> None:
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = load_config(
        "rlvr-judged", profile="tiny",
        overrides=[f"tracking.tracking_uri={tracking}", "reward.judge_profile=tiny"],
    )  # fmt: skip
    with pytest.raises(
        ConfigError, match="registers judge-grpo-pointwise, not judge-tiny-verified"
    ):
        judges_to_train(cfg)


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (
            ["reward.judge=/models/judge", "reward.judge_mode=pointwise"],
            "needs to be models:/NAME@ALIAS",
        ),
        (["reward.judge_recipe=null"], "reward.judge_profile needs reward.judge_recipe"),
    ],
)
def test_a_judge_recipe_needs_a_judge_named_by_alias(overrides: list[str], said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        load_config("rlvr-judged", profile="tiny", overrides=overrides)


def test_a_shared_profile_can_start_from_another() -> None:
    """tiny-hackable is the tiny profile (`base: tiny`) under another name; tiny-verified is the
    tiny profile plus the verified judge's data and registered name."""
    tiny = load_config("grpo-pointwise", profile="tiny")
    hackable = load_config("grpo-pointwise", profile="tiny-hackable")
    verified = load_config("grpo-pointwise", profile="tiny-verified")
    for based in (hackable, verified):
        assert based.model.path == tiny.model.path and based.engine == tiny.engine == "trl"
        assert based.grpo.train_batch_size == tiny.grpo.train_batch_size
    assert hackable.data.source == tiny.data.source
    assert verified.data.source == "sample://rlvr_judged/verified_judge.jsonl"
    assert verified.registered_model_name == "judge-tiny-verified"


def test_the_judges_run_gets_the_tracking_server_without_its_credentials() -> None:
    cfg = load_config(
        "rlvr-judged", profile="tiny",
        overrides=["tracking.tracking_uri=https://alice:s3cret@mlflow.example:5000"],
    )  # fmt: skip
    shared = judge_overrides(cfg)
    assert "tracking.tracking_uri=https://mlflow.example:5000" in shared
    assert not any("s3cret" in item or "alice" in item for item in shared)


def test_only_the_champion_alias_can_be_trained_first(tmp_path: Path) -> None:
    """A judge's pipeline moves only `champion`: another alias would stay unset after it."""
    _, cfg = _policy(tmp_path, "reward.judge=models:/judge-tiny-verified@production")
    with pytest.raises(ConfigError, match="moves only the champion alias"):
        judges_to_train(cfg)


def test_a_judge_kept_as_challenger_stops_the_policy_run_saying_why() -> None:
    from judgeflow.registry.judge_first import JudgeTraining, judge_trained

    training = JudgeTraining("judge-tiny-verified", "grpo-pointwise", "tiny-verified", [])
    kept = {"registry": {"final": {"promoted": False, "reason": "kept as challenger: unchecked"}}}
    with pytest.raises(ConfigError, match="did not become judge-tiny-verified's champion: kept"):
        judge_trained(training, kept)
    with pytest.raises(ConfigError, match="its run registered no version"):
        judge_trained(training, {"registry": {}})
    judge_trained(training, {"registry": {"final": {"promoted": True}}})  # champion: goes on


def test_each_judge_of_a_panel_is_trained_apart_under_its_own_name(tmp_path: Path) -> None:
    """A panel's judges come from the same recipe, each registered as its own model with
    data.seed + its place, so their blind spots differ; a judge with a champion is not trained."""
    tracking, cfg = _policy(
        tmp_path, "reward.judge_panel=[models:/judge-b@champion, models:/judge-c@champion]"
    )
    seed = load_config("grpo-pointwise", profile="tiny-verified").data.seed
    trainings = judges_to_train(cfg)
    assert [t.name for t in trainings] == ["judge-tiny-verified", "judge-b", "judge-c"]
    for place, training in enumerate(trainings):
        trained = load_config(
            training.recipe, profile=training.profile, overrides=training.overrides
        )
        assert trained.registered_model_name == training.name
        assert trained.data.seed == seed + place
        assert trained.data.source == "sample://rlvr_judged/verified_judge.jsonl"

    _make_champion(tracking, "judge-b", tmp_path)
    assert [t.name for t in judges_to_train(cfg)] == ["judge-tiny-verified", "judge-c"]
