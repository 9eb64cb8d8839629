"""`${NAME}` in a recipe, a profile or a `--set` value is expanded, and nothing else is: a `$`
in a prompt, a URL or a password reaches the run as written; an unset `${NAME}` is an error
naming the key, where it was written and the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from judgeflow.config import ConfigError, load_config

# What `$` looks like where it is meant: a prompt-like text, a URL's query, a password, a shell
# line for the job (its `$HOME` is the job's, not this machine's).
PROMPT = "Is $5 a fair price? Answer in $USD, not ${ currency }."
URL = "http://mlflow.example:5000/?q=$x&path=$HOME"
PASSWORD = "pa$$word$HOME$"
SHELL = 'echo "cost $5" > $HOME/x'


def _recipe(folder: Path, text: str, name: str = "mine.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def _variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")  # set: a bare $HOME is still not expanded
    monkeypatch.setenv("USD", "dollars")
    monkeypatch.setenv("JF_TEST_HOST", "mlflow.internal")
    monkeypatch.setenv("JF_TEST_PW", "s3cret$x")
    monkeypatch.delenv("JF_TEST_UNSET", raising=False)


def test_a_bare_dollar_is_kept_as_written(tmp_path: Path) -> None:
    recipe = _recipe(
        tmp_path,
        "base: grpo-pointwise\n"
        f"tracking: {{experiment: {PROMPT!r}, tracking_uri: {URL!r}}}\n"
        f"cluster: {{env: {{DB_PASSWORD: {PASSWORD!r}}}, setup: [{SHELL!r}]}}\n",
    )
    cfg = load_config(recipe, report=lambda _: None)
    assert cfg.tracking.experiment == PROMPT
    assert cfg.tracking.tracking_uri == URL
    assert cfg.cluster.env["DB_PASSWORD"] == PASSWORD
    assert cfg.cluster.setup == [SHELL]


def test_a_bare_dollar_in_a_set_value_is_kept_as_written() -> None:
    cfg = load_config(
        "grpo-pointwise",
        overrides=[
            f"tracking.experiment={PROMPT}",
            f"tracking.tracking_uri={URL}",
            f"cluster.env.DB_PASSWORD={PASSWORD}",
        ],
        report=lambda _: None,
    )
    assert (cfg.tracking.experiment, cfg.tracking.tracking_uri) == (PROMPT, URL)
    assert cfg.cluster.env["DB_PASSWORD"] == PASSWORD


def test_braced_names_expand_in_files_lists_and_set_values(tmp_path: Path) -> None:
    recipe = _recipe(
        tmp_path,
        "base: grpo-pointwise\n"
        "cluster: {env: {DB_PASSWORD: '${JF_TEST_PW}'}, setup: ['cd ${HOME}/work']}\n",
    )
    cfg = load_config(
        recipe,
        overrides=["tracking.tracking_uri=http://${JF_TEST_HOST}:5000/?q=$x"],
        report=lambda _: None,
    )
    assert cfg.cluster.env["DB_PASSWORD"] == "s3cret$x"  # the value itself is not expanded again
    assert cfg.cluster.setup == ["cd /home/someone/work"]
    assert cfg.tracking.tracking_uri == "http://mlflow.internal:5000/?q=$x"
    assert cfg.register.model_name == "judge-grpo-pointwise"  # ${mode}, as before


def test_an_unset_name_in_a_recipe_names_the_key_the_file_and_the_variable(
    tmp_path: Path,
) -> None:
    recipe = _recipe(
        tmp_path, "base: grpo-pointwise\ncluster: {env: {DB_PASSWORD: 'pw-${JF_TEST_UNSET}'}}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(recipe, report=lambda _: None)
    said = str(caught.value)
    assert "cluster.env.DB_PASSWORD" in said and str(recipe) in said
    assert "${JF_TEST_UNSET}" in said and "environment variable JF_TEST_UNSET" in said
    assert "pw-" not in said  # the value (a password, perhaps) is not echoed


def test_an_unset_name_is_traced_to_the_file_that_wrote_it(tmp_path: Path) -> None:
    """In a base recipe's list, and in a recipe's own profile section: the file that wrote the
    value is named, with the list item's place."""
    base = _recipe(
        tmp_path,
        "base: grpo-pointwise\ncluster: {setup: [module load cuda, 'cd ${JF_TEST_UNSET}']}\n",
        "base.yaml",
    )
    recipe = _recipe(tmp_path, f"base: {base}\nrecipe: mine\n")
    with pytest.raises(ConfigError, match=r"^cluster\.setup\[1\], from .*base\.yaml: "):
        load_config(recipe, report=lambda _: None)
    profiled = _recipe(
        tmp_path,
        "base: grpo-pointwise\nprofiles: {tiny: {tracking: {experiment: '${JF_TEST_UNSET}'}}}\n",
        "profiled.yaml",
    )
    load_config(profiled, report=lambda _: None)  # not chosen: never expanded
    with pytest.raises(ConfigError) as caught:
        load_config(profiled, profile="tiny", report=lambda _: None)
    assert str(caught.value).startswith(f"tracking.experiment, from {profiled}: ")


def test_an_unset_name_in_a_set_value_names_the_override() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config("grpo-pointwise", overrides=["tracking.tracking_uri=http://${JF_TEST_UNSET}"])
    said = str(caught.value)
    assert said.startswith("tracking.tracking_uri, from --set: ${JF_TEST_UNSET} ")
    assert "environment variable JF_TEST_UNSET, which is not set" in said


def test_a_value_replaced_later_is_not_expanded(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, "base: grpo-pointwise\ntracking: {experiment: '${JF_TEST_UNSET}'}\n")
    cfg = load_config(recipe, overrides=["tracking.experiment=mine"], report=lambda _: None)
    assert cfg.tracking.experiment == "mine"
