"""Run configuration: presets, profiles, overrides, and errors that name the key."""

from pathlib import Path

import pytest
import yaml

from judgeflow.config import (
    PROFILES_DIR,
    RECIPES_DIR,
    ConfigError,
    load_config,
    parse_override,
)
from judgeflow.config.load import profile_recipes
from judgeflow.config.redaction import flatten

RECIPE_FILES = sorted(RECIPES_DIR.rglob("*.yaml"))


@pytest.mark.parametrize("path", [p for p in RECIPE_FILES if p.parent == RECIPES_DIR], ids=str)
@pytest.mark.parametrize("profile", [None, *sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))])
def test_every_preset_loads_with_every_profile(path: Path, profile: str | None) -> None:
    """...or, with a profile made for some recipes only (`recipes:`), is refused by name."""
    meant_for = (
        yaml.safe_load((PROFILES_DIR / f"{profile}.yaml").read_text()).get("recipes")
        if profile
        else None
    )
    if meant_for and path.stem not in meant_for:
        with pytest.raises(ConfigError, match=f"profile '{profile}' is for recipe"):
            load_config(path.stem, profile=profile)
        return
    cfg = load_config(path.stem, profile=profile)
    assert cfg.recipe == path.stem


def test_a_profile_for_other_recipes_is_refused_naming_its_file_and_what_to_do() -> None:
    with pytest.raises(ConfigError) as refused:
        load_config("grpo-pairwise", profile="tiny-verified")
    message = str(refused.value)
    assert str(PROFILES_DIR / "tiny-verified.yaml") in message
    assert "is for recipe(s) grpo-pointwise only, not 'grpo-pairwise'" in message
    assert "use --profile tiny for other recipes, or one of: grpo-pointwise" in message


@pytest.mark.parametrize(
    "value", ["grpo-pointwise", "grpo-pointwise, rlvr", [], ["grpo-pointwise", 3], [""],
              {"grpo-pointwise": True}],
)  # fmt: skip
def test_a_profiles_recipes_must_be_a_list_of_names(value: object) -> None:
    """A string would make `in` a substring test (`rlvr` in "rlvr-judged") and list characters."""
    where = "/profiles/mine.yaml"
    with pytest.raises(ConfigError, match=r"^/profiles/mine.yaml: recipes: must be a list of"):
        profile_recipes(value, where)
    assert profile_recipes(["grpo-pointwise", "rlvr"], where) == ["grpo-pointwise", "rlvr"]
    assert profile_recipes(None, where) is None  # every recipe


def test_presets_were_found() -> None:
    names = {p.stem for p in RECIPE_FILES}
    assert {"grpo-pointwise", "grpo-pairwise", "tiny"} <= names


def test_pointwise_preset_has_reference_defaults() -> None:
    g = load_config("grpo-pointwise").grpo
    assert (g.train_batch_size, g.val_batch_size, g.learning_rate) == (96, 192, 1e-6)
    assert (g.use_kl_loss, g.kl_loss_type, g.kl_loss_coef, g.use_kl_in_reward) == (
        True,
        "low_var_kl",
        0.001,
        False,
    )
    assert (g.rollout_n, g.gpu_memory_utilization, g.ppo_mini_batch_size) == (4, 0.6, 24)
    assert (g.ppo_micro_batch_size_per_gpu, g.total_epochs, g.save_freq, g.test_freq) == (
        1,
        1,
        20,
        10,
    )
    assert g.gradient_checkpointing and g.use_remove_padding and g.ref_param_offload
    cfg = load_config("grpo-pointwise")
    assert cfg.model.path == "Qwen/Qwen3-8B"
    assert (cfg.cluster.gpus_per_node, cfg.cluster.nodes) == (8, 1)
    assert (cfg.data.max_prompt_length, cfg.data.max_response_length) == (4096, 2048)


def test_pairwise_preset_differs_where_the_reference_does() -> None:
    g = load_config("grpo-pairwise").grpo
    assert (g.total_epochs, g.test_freq) == (30, 4)
    assert load_config("grpo-pairwise").mode == "pairwise"


def test_tiny_profile_points_at_home_and_mode_sample(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path))
    cfg = load_config("grpo-pairwise", profile="tiny")
    assert cfg.model.path == str(tmp_path / "tiny-model")
    assert cfg.data.source == "sample://tinyjudge_pairwise.jsonl"
    assert cfg.resolved_engine == "trl"
    # The judge recipes' own tiny profile turns the SFT warm start on, with its mode's sample.
    assert cfg.sft.enabled and cfg.sft.source == "sample://tinyjudge_pairwise_sft.jsonl"
    assert cfg.data.val_source == "sample://tinyjudge_pairwise_val.jsonl"
    assert cfg.storage.root == str(tmp_path / "artifacts")  # a default, expanded too


def test_overrides_parse_yaml_values() -> None:
    cfg = load_config(
        "grpo-pointwise",
        overrides=[
            "grpo.learning_rate=3e-5",
            "grpo.use_kl_loss=false",
            "cluster.extra_sbatch=[--exclusive]",
        ],
    )
    assert cfg.grpo.learning_rate == 3e-5
    assert cfg.grpo.use_kl_loss is False
    assert cfg.cluster.extra_sbatch == ["--exclusive"]


def test_override_into_a_dict_field() -> None:
    cfg = load_config("grpo-pointwise", overrides=["cluster.env.NCCL_DEBUG=INFO"])
    assert cfg.cluster.env == {"NCCL_DEBUG": "INFO"}


def test_unknown_key_is_named_with_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown config key 'grpo.learnin_rate'.*learning_rate"):
        load_config("grpo-pointwise", overrides=["grpo.learnin_rate=1"])


def test_bad_value_names_the_key() -> None:
    with pytest.raises(
        ConfigError, match=r"grpo.rollout_n: .*greater than or equal to 2 \(got 1\)"
    ):
        load_config("grpo-pointwise", overrides=["grpo.rollout_n=1"])
    with pytest.raises(
        ConfigError, match=r"mode: .*'pointwise', 'pairwise', 'grrm' or 'rlvr' \(got 'listwise'\)"
    ):
        load_config("grpo-pointwise", overrides=["mode=listwise"])


def test_section_replaced_by_a_value_is_an_error() -> None:
    with pytest.raises(ConfigError, match="'grpo' is a section"):
        load_config("grpo-pointwise", overrides=["grpo=3"])


@pytest.mark.parametrize("bad", ["noequals", "=1", "a..b=1", " =x"])
def test_malformed_override(bad: str) -> None:
    with pytest.raises(ConfigError, match="dotted.key=value"):
        parse_override(bad)


def test_unknown_recipe_and_profile_list_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown recipe 'nope'; available: .*grpo-pointwise"):
        load_config("nope")
    with pytest.raises(ConfigError, match="unknown profile 'huge'; available: tiny"):
        load_config("grpo-pointwise", profile="huge")


def test_balance_positions_is_pairwise_only() -> None:
    with pytest.raises(ConfigError, match="balance_positions only applies to mode=pairwise"):
        load_config("grpo-pointwise", overrides=["data.balance_positions=true"])


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("cluster.env.HF_TOKEN", True), ("cluster.env.MLFLOW_TRACKING_TOKEN", True),
        ("cluster.env.AWS_SECRET_ACCESS_KEY", True), ("cluster.env.AWS_SESSION_TOKEN", True),
        ("cluster.env.DB_PASSWORD", True), ("cluster.env.WANDB_API_KEY", True),
        ("cluster.env.my-private-key", True), ("cluster.env.SECRET", True),
        ("cluster.env.GIT_CREDENTIALS_FILE", True), ("cluster.env.HTTP_AUTH", True),
        ("evaluation.max_new_tokens", False), ("grpo.ppo_max_token_len_per_gpu", False),
        ("cluster.env.CUDA_VISIBLE_DEVICES", False), ("cluster.env.KEYBOARD", False),
        ("data.max_prompt_length", False),
    ],
)  # fmt: skip
def test_what_counts_as_a_secret_key(key: str, secret: bool) -> None:
    from judgeflow.config.redaction import is_secret_key

    assert is_secret_key(key) is secret


def test_flatten_redacts_secrets_and_fingerprint_tracks_changes() -> None:
    cfg = load_config(
        "grpo-pointwise",
        overrides=["cluster.env.HF_TOKEN=hf_abc", "cluster.env.AWS_SECRET_ACCESS_KEY=x"],
    )
    flat = flatten(cfg)
    assert flat["cluster.env.HF_TOKEN"] == "***"
    assert flat["cluster.env.AWS_SECRET_ACCESS_KEY"] == "***"
    assert "hf_abc" not in "".join(flat.values())
    assert flat["grpo.learning_rate"] == "1e-06"
    # Settings that merely mention tokens are numbers a user needs to see (and evaluation reads
    # them back from a registered run), not secrets.
    assert flat["evaluation.max_new_tokens"] == "2048"
    assert flat["grpo.ppo_max_token_len_per_gpu"] == "16384"
    other = load_config("grpo-pointwise", overrides=["grpo.learning_rate=2e-6"])
    assert other.fingerprint() != load_config("grpo-pointwise").fingerprint()
    assert (
        load_config("grpo-pointwise").fingerprint() == load_config("grpo-pointwise").fingerprint()
    )


def test_engine_auto_follows_backend() -> None:
    assert load_config("grpo-pointwise").resolved_engine == "trl"
    assert (
        load_config("grpo-pointwise", overrides=["cluster.backend=slurm"]).resolved_engine == "verl"
    )
    assert (
        load_config(
            "grpo-pointwise", overrides=["cluster.backend=slurm", "engine=trl"]
        ).resolved_engine
        == "trl"
    )


def test_recipe_base_and_own_profile_section(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path))
    full = load_config("grrm-full")
    rlvr = load_config("grrm-rlvr")
    # grrm-full starts from grrm-rlvr: the RLVR preset is shared, not copied
    assert full.grpo == rlvr.grpo and full.cluster == rlvr.cluster
    assert (full.recipe, full.model.path, full.sft.deepspeed) == (
        "grrm-full",
        "Qwen/Qwen2.5-7B",
        "zero3",
    )
    # --profile tiny = profiles/tiny.yaml, then the recipe's own `profiles: {tiny: …}`
    tiny = load_config("grrm-full", profile="tiny")
    assert tiny.data.source == "sample://grrm_tiny" and tiny.engine == "trl"
    assert tiny.sft.deepspeed is None and tiny.cluster.backend == "local"
    assert tiny.model.path == str(tmp_path / "tiny-model")
    assert tiny.data.val_source is None  # the judges' validation file is theirs alone


def test_a_recipe_over_a_base_merges_mappings_and_an_empty_one_clears_the_bases(tmp_path) -> None:
    """`rlvr` remaps `ifeval` to `ifeval_old`; a recipe over it adds to that mapping key by key,
    and `{}` clears it (as an imported script that remaps nothing writes)."""
    assert load_config("rlvr").rlvr.remap_verifier == {"ifeval": "ifeval_old"}
    added = tmp_path / "added.yaml"
    added.write_text("base: rlvr\nrlvr:\n  remap_verifier: {my_numbers: gsm8k}\n")
    assert load_config(str(added)).rlvr.remap_verifier == {
        "ifeval": "ifeval_old", "my_numbers": "gsm8k",
    }  # fmt: skip
    cleared = tmp_path / "cleared.yaml"
    cleared.write_text("base: rlvr\nrlvr:\n  remap_verifier: {}\n")
    assert load_config(str(cleared)).rlvr.remap_verifier == {}


def test_recipe_base_loop_is_an_error(tmp_path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(f"base: {b}\nrecipe: a\n")
    b.write_text(f"base: {a}\nrecipe: b\n")
    with pytest.raises(ConfigError, match="base chain loops"):
        load_config(a)


def test_sampled_evaluation_needs_a_temperature() -> None:
    with pytest.raises(
        ConfigError, match="evaluation.samples > 1 needs evaluation.temperature > 0"
    ):
        load_config("grpo-pointwise", overrides=["evaluation.samples=4"])
    cfg = load_config(
        "grpo-pointwise", overrides=["evaluation.samples=4", "evaluation.temperature=0.7"]
    )
    assert cfg.evaluation.samples == 4


def test_sft_settings_are_checked_against_the_recipe() -> None:
    with pytest.raises(ConfigError, match="sft.enabled needs sft.source"):
        load_config("grpo-pointwise", overrides=["sft.enabled=true"])
    with pytest.raises(ConfigError, match="for the judge recipes"):
        load_config("grrm-full", overrides=["sft.enabled=true"])
