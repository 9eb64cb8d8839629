"""Which judge pays a policy (`reward.*`): what each way of naming one needs, and the errors that
say what to run. A registered judge resolving and pinning is exercised end to end after `make
demo` (tests/test_quickstart.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from judgeflow.config import ConfigError, load_config
from judgeflow.registry.paying_judge import paying_judge, pin_judge


def test_without_a_registered_champion_the_error_names_the_command_to_run(tmp_path: Path) -> None:
    cfg = load_config(
        "rlvr-judged", profile="tiny-hackable",
        overrides=[f"tracking.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}"],
    )  # fmt: skip
    with pytest.raises(ConfigError) as failed:
        pin_judge(cfg)
    message = str(failed.value)
    assert "reward.judge=models:/judge-grpo-pointwise@champion" in message
    assert "judgeflow run grpo-pointwise --profile tiny" in message and "make demo" in message


def test_a_judges_weights_by_path_need_its_mode_and_reply_length() -> None:
    with pytest.raises(ConfigError, match="reward.judge_mode"):
        load_config("rlvr-judged", overrides=["reward.judge=/models/judge"])
    cfg = load_config(
        "rlvr-judged", overrides=["reward.judge=/models/judge", "reward.judge_mode=grrm"]
    )
    with pytest.raises(ConfigError, match="reward.judge_max_new_tokens"):
        paying_judge(cfg)


def test_a_served_judge_and_a_path_reach_the_reward_as_the_engines_pass_them() -> None:
    served = load_config(
        "rlvr-judged",
        overrides=["reward.judge=null", "reward.judge_url=http://judge:5001/invocations",
                   "reward.judge_mode=pairwise", "reward.judge_max_new_tokens=32"],
    )  # fmt: skip
    kwargs = served.policy_reward_kwargs()
    assert kwargs["judge_url"] == "http://judge:5001/invocations"
    assert kwargs["judge_mode"] == "pairwise" and kwargs["judge_max_new_tokens"] == 32
    assert "judge_weights" not in kwargs
    assert kwargs["judge_api"] == "auto" and "judge_model" not in kwargs  # pinned by a run
    assert kwargs["judge_timeout_s"] == kwargs["judge_retry_s"] == 600.0
    path = load_config(
        "rlvr-judged",
        overrides=["reward.judge=s3://bucket/judge", "reward.judge_mode=pointwise",
                   "reward.judge_max_new_tokens=8", "reward.judge_datasets=[Judge]"],
    )  # fmt: skip
    kwargs = path.policy_reward_kwargs()
    assert kwargs["judge_weights"] == "s3://bucket/judge"  # fetched where the reward runs
    assert kwargs["judge_datasets"] == ["judge"]


def test_an_unpinned_registered_judge_never_reaches_an_engine() -> None:
    cfg = load_config("rlvr-judged")
    with pytest.raises(ConfigError, match="pins it to the version's weights"):
        cfg.policy_reward_kwargs()


def test_a_judge_and_a_url_at_once_or_a_judge_for_a_judge_are_refused() -> None:
    with pytest.raises(ConfigError, match="set one"):
        load_config("rlvr-judged", overrides=["reward.judge_url=http://x/invocations",
                                              "reward.judge_mode=pointwise",
                                              "reward.judge_max_new_tokens=8"])  # fmt: skip
    with pytest.raises(ConfigError, match="need mode=rlvr"):
        load_config("grpo-pointwise", overrides=["reward.judge=models:/j@champion"])


def test_a_judge_url_with_credentials_is_warned_about_and_never_shown() -> None:
    from judgeflow.config import SecretParameterWarning
    from judgeflow.registry.paying_judge import PayingJudge

    secret = "https://user:s3cr3t@judge.example/invocations?token=abc"
    with pytest.warns(SecretParameterWarning, match="reward.judge_url holds credentials"):
        load_config("rlvr-judged", overrides=["reward.judge=null", f"reward.judge_url={secret}",
                                              "reward.judge_mode=pointwise",
                                              "reward.judge_max_new_tokens=8"])  # fmt: skip
    judge = PayingJudge(secret, "pointwise", 8, url=secret)
    shown = str(judge.to_dict()) + str(judge.tags())
    assert "s3cr3t" not in shown and "abc" not in shown


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("grpo.reward_manager=naive", "set grpo.reward_manager=batch"),
        ("cluster.nodes=2", "serve it yourself and set reward.judge_url"),
        ("reward.judge_gpus=8", "must leave verl at least one"),
        ("reward.judge_gpus=0", "needs at least one"),
    ],
)
def test_a_judge_served_beside_verl_is_checked_before_anything_is_submitted(
    override: str, said: str
) -> None:
    with pytest.raises(ConfigError, match=said):
        load_config("rlvr-judged", overrides=["cluster.backend=slurm", override])


_SERVED = ["reward.judge=null", "reward.judge_mode=pointwise", "reward.judge_max_new_tokens=8"]


@pytest.mark.parametrize(
    ("url", "api"),
    [
        ("http://judge:5001/invocations", "mlflow"),
        ("http://judge:8000/v1", "openai"),
        ("https://api.example.com/v1/chat/completions", "openai"),
        ("http://gateway/team/v1/", "openai"),
    ],
)
def test_a_served_judges_protocol_is_read_from_its_url(url: str, api: str) -> None:
    from judgeflow.config.policy_reward import served_api

    cfg = load_config("rlvr-judged", overrides=[*_SERVED, f"reward.judge_url={url}"])
    assert served_api(url, cfg.reward.judge_api) == api


def test_a_url_that_names_no_protocol_needs_judge_api_and_judge_api_needs_a_url() -> None:
    url = "https://user:pw@judge.example/predict"
    with pytest.raises(ConfigError, match="set reward.judge_api") as failed:
        load_config("rlvr-judged", overrides=[*_SERVED, f"reward.judge_url={url}"])
    assert "pw" not in str(failed.value)
    cfg = load_config(
        "rlvr-judged",
        overrides=[*_SERVED, "reward.judge_url=https://judge.example/predict",
                   "reward.judge_api=openai", "reward.judge_model=my-judge"],
    )  # fmt: skip
    assert cfg.policy_reward_kwargs()["judge_model"] == "my-judge"
    for key in ("reward.judge_api=openai", "reward.judge_model=my-judge"):
        with pytest.raises(ConfigError, match="served at reward.judge_url"):
            load_config("rlvr-judged", overrides=["reward.judge=/models/judge",
                                                  "reward.judge_mode=pointwise", key])  # fmt: skip


def test_a_panel_is_pinned_judge_by_judge_and_reaches_the_reward_with_its_lineage(
    tmp_path: Path,
) -> None:
    """reward.judge_panel: each judge resolved to its version's weights, one reply length (the
    longest), each version in the policy's lineage; a judge of another mode is refused."""
    from mlflow import MlflowClient

    from judgeflow.registry.models import TAG_MODE, TAG_MODEL_URI
    from judgeflow.registry.paying_judge import TAG_REWARD_JUDGE, TAG_REWARD_JUDGE_PANEL

    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking, registry_uri=tracking)
    for name, mode in (("judge-a", "pointwise"), ("judge-b", "pointwise"), ("judge-p", "pairwise")):
        client.create_registered_model(name)
        weights = str(tmp_path / name)
        tags = {TAG_MODE: mode, TAG_MODEL_URI: weights}
        version = client.create_model_version(name, weights, run_id=None, tags=tags)
        client.set_registered_model_alias(name, "champion", version.version)
    base = [f"tracking.tracking_uri={tracking}", "reward.judge=models:/judge-a@champion",
            "reward.judge_recipe=null", "reward.judge_profile=null",
            "reward.judge_max_new_tokens=12"]  # fmt: skip
    cfg = load_config(
        "rlvr-judged",
        profile="tiny",
        overrides=[*base, "reward.judge_panel=[models:/judge-b@champion]"],
    )
    pinned, judge = pin_judge(cfg)
    assert judge is not None and [j.ref for j in judge.judges] == [
        "models:/judge-a/1",
        "models:/judge-b/1",
    ]
    assert pinned.reward.judge_panel == [str(tmp_path / "judge-b")]
    kwargs = pinned.policy_reward_kwargs()
    assert kwargs["judge_weights"] == str(tmp_path / "judge-a")
    assert kwargs["judge_panel_weights"] == [str(tmp_path / "judge-b")]
    assert kwargs["judge_mode"] == "pointwise" and kwargs["judge_max_new_tokens"] == 12
    tags = judge.tags()
    assert tags[TAG_REWARD_JUDGE] == "models:/judge-a/1"
    assert tags[TAG_REWARD_JUDGE_PANEL] == "models:/judge-b/1"
    assert judge.to_dict()["panel"][0]["ref"] == "models:/judge-b/1"

    mixed = load_config(
        "rlvr-judged",
        profile="tiny",
        overrides=[*base, "reward.judge_panel=[models:/judge-p@champion]"],
    )
    with pytest.raises(ConfigError, match="judge-p/1 is a pairwise judge"):
        pin_judge(mixed)


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (["reward.judge_panel=[models:/judge-tiny-verified@champion]"], "names a judge twice"),
        (["reward.judge_panel=[/models/b]"], "say which judges they are with reward.judge_mode"),
        (
            [
                "reward.judge=null",
                "reward.judge_url=http://j:5001/invocations",
                "reward.judge_mode=pointwise",
                "reward.judge_max_new_tokens=8",
                "reward.judge_recipe=null",
                "reward.judge_profile=null",
                "reward.judge_panel=[models:/b@champion]",
            ],
            "pays beside reward.judge",
        ),
        (
            ["reward.judge_panel=[models:/b@champion]", "cluster.backend=slurm"],
            "judged in the training process",
        ),
    ],
)
def test_a_panel_that_cannot_pay_is_refused_with_why(overrides: list[str], said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        load_config("rlvr-judged", profile="tiny", overrides=overrides)


def test_a_judge_lists_the_policies_it_paid_alone_or_on_a_panel(tmp_path: Path) -> None:
    """`judgeflow models NAME` shows a judge version's paid policies: by the policies' lineage
    tags, the judge's own and a panel's."""
    from mlflow import MlflowClient

    from judgeflow.cli.models import _policies_paid
    from judgeflow.registry.models import TAG_MANAGED, ModelRegistry
    from judgeflow.registry.paying_judge import TAG_REWARD_JUDGE, TAG_REWARD_JUDGE_PANEL

    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking, registry_uri=tracking)
    client.create_registered_model("policy", tags={TAG_MANAGED: "true"})
    for tags in (
        {TAG_REWARD_JUDGE: "models:/judge-a/1"},
        {TAG_REWARD_JUDGE: "models:/judge-a/2", TAG_REWARD_JUDGE_PANEL: "models:/judge-b/1"},
    ):
        client.create_model_version("policy", str(tmp_path), run_id=None, tags=tags)
    paid = _policies_paid(ModelRegistry(tracking))
    assert paid == {"judge-a/1": ["policy/1"], "judge-a/2": ["policy/2"], "judge-b/1": ["policy/2"]}
