"""Hostile recipe files and settings are refused early and cleanly: YAML that expands through
aliases, nests without end, is huge or carries tags is refused by name before anything is built
(exit 2 at the command line); every numeric setting refuses NaN and ±inf."""

from __future__ import annotations

import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from judgeflow.config import ConfigError, RunConfig, load_config
from judgeflow.config.safe_yaml import MAX_BYTES, MAX_DEPTH, MAX_NODES, UnsafeYaml, load_yaml

BIN = Path(sys.executable).parent


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    """'Billion laughs': width ** levels strings from a few hundred bytes."""
    lines = ["base: grpo-pointwise", "a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _mapping_bomb(levels: int = 12) -> str:
    """The same through a mapping's values: 4 ** levels."""
    lines = ["base: grpo-pointwise", "m0: &m0 {a: 1, b: 2, c: 3, d: 4}"]
    for i in range(1, levels):
        ref = f"*m{i - 1}"
        lines.append(f"m{i}: &m{i} {{a: {ref}, b: {ref}, c: {ref}, d: {ref}}}")
    return "\n".join(lines) + "\n"


def _merge_bomb(levels: int = 10) -> str:
    """Merge keys (`<<`) whose merged mappings hold aliases: 8 ** levels."""
    lines = ["base: grpo-pointwise", "m0: &m0 {k: [1, 2, 3, 4, 5, 6, 7, 8]}"]
    for i in range(1, levels):
        refs = ", ".join([f"*m{i - 1}"] * 8)
        lines.append(f"m{i}: &m{i} {{<<: *m{i - 1}, k{i}: [{refs}]}}")
    return "\n".join(lines) + "\n"


def _deep_block(levels: int = 200) -> str:
    keys = "".join(" " * i + f"k{i}:\n" for i in range(levels))
    return "base: grpo-pointwise\n" + keys + " " * levels + "v: 1\n"


DEEP_FLOW = "base: grpo-pointwise\nx: " + "[" * 50_000 + "]" * 50_000 + "\n"
HUGE = "base: grpo-pointwise\n" + "# padding\n" * (MAX_BYTES // 10 + 1)

HOSTILE: dict[str, tuple[str, str]] = {
    # name: (file text, what the refusal says)
    "alias bomb": (_alias_bomb(), "aliases are expanded"),
    "alias bomb through a mapping's values": (_mapping_bomb(), "aliases are expanded"),
    "recursive alias": ("base: grpo-pointwise\nx: &x [1, *x]\n", "aliases are expanded"),
    "merge keys that multiply": (_merge_bomb(), "aliases are expanded"),
    "deep flow nesting": (DEEP_FLOW, "levels deep"),
    "deep block nesting": (_deep_block(), "levels deep"),
    "huge file": (HUGE, "KiB"),
    "python object tag": (
        "base: grpo-pointwise\ngrpo: !!python/object/apply:os.system ['touch /tmp/pwned']\n",
        "tag",
    ),
    "set tag": ("base: grpo-pointwise\ndata: !!set {a, b}\n", "tag"),
    "binary tag": ("base: grpo-pointwise\nmodel:\n  path: !!binary aGVsbG8=\n", "tag"),
    "local tag": ("base: grpo-pointwise\nmodel:\n  path: !include /etc/passwd\n", "tag"),
    "explicit str tag": ("base: grpo-pointwise\nmodel:\n  path: !!str x\n", "tag"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_recipe_is_refused_naming_the_file(tmp_path: Path, name: str) -> None:
    text, says = HOSTILE[name]
    recipe = tmp_path / "hostile.yaml"
    recipe.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(recipe)
    message = str(caught.value)
    assert str(recipe) in message and "refused" in message and says in message, message


def test_the_bombs_are_bombs() -> None:
    """The cases above would expand past the limit (PyYAML builds them when asked)."""
    built = yaml.safe_load(_alias_bomb(levels=4))  # 9**3 strings at the deepest level: fine
    assert len(built["a3"]) == 9 and len(built["a3"][0][0]) == 9
    with pytest.raises(UnsafeYaml):
        load_yaml(_alias_bomb(levels=7))  # 9**6 = 531,441 strings > MAX_NODES
    assert MAX_NODES < 9**6


def test_the_limits_leave_room_for_real_recipes() -> None:
    recipes = Path(__file__).resolve().parents[2] / "src" / "judgeflow" / "recipes"
    for path in sorted(recipes.rglob("*.yaml")):
        text = path.read_text()
        assert load_yaml(text) == yaml.safe_load(text), path.name
    nested = "".join(" " * i + f"k{i}:\n" for i in range(MAX_DEPTH - 1)) + " " * 64 + "v: 1\n"
    assert load_yaml(nested)["k0"]["k1"]
    anchors = "base: &b {a: 1}\nx:\n  <<: *b\n  c: 2\n"  # a merge key is plain YAML
    assert load_yaml(anchors)["x"] == {"a": 1, "c": 2}


def test_dates_stay_the_text_that_was_written() -> None:
    assert load_yaml("run: 2026-01-01\nat: 2026-01-01 10:00:00") == {
        "run": "2026-01-01",
        "at": "2026-01-01 10:00:00",
    }


def test_an_override_is_held_to_the_same_rules() -> None:
    with pytest.raises(ConfigError, match="grpo.temperature.*tag"):
        load_config("grpo-pointwise", overrides=["grpo.temperature=!!python/name:os.system"])
    with pytest.raises(ConfigError, match="levels deep"):
        load_config("grpo-pointwise", overrides=["model.path=" + "[" * 100 + "]" * 100])


def test_the_command_line_refuses_an_alias_bomb_with_exit_2(tmp_path: Path) -> None:
    recipe = tmp_path / "bomb.yaml"
    recipe.write_text(_alias_bomb(levels=10))  # 9**9: a billion strings if built
    proc = subprocess.run(
        [BIN / "judgeflow", "config", str(recipe)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(recipe) in proc.stdout + proc.stderr
    assert "aliases are expanded" in proc.stdout + proc.stderr


# --------------------------------------------------------------------------- numbers


def _numeric_keys(model: type[BaseModel] = RunConfig, prefix: str = "") -> list[str]:
    """Every dotted key whose value is a number (int or float, optional or not)."""
    out = []
    for name, field in model.model_fields.items():
        annotation: Any = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out += _numeric_keys(annotation, f"{prefix}{name}.")
            continue
        args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) or (
            typing.get_origin(annotation) is typing.Union
        ) else (annotation,)  # fmt: skip
        if any(a in (int, float) for a in args) and bool not in args:
            out.append(f"{prefix}{name}")
    return out


NUMERIC = _numeric_keys()


def test_the_walk_finds_the_numeric_keys() -> None:
    named = {"grpo.temperature", "grpo.learning_rate", "sft.learning_rate", "data.seed"}
    assert named <= set(NUMERIC) and len(NUMERIC) > 30


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1e999", "nan", "-inf"])
def test_every_numeric_setting_refuses_nan_and_infinity(value: str) -> None:
    accepted = []
    for key in NUMERIC:
        recipe = "grrm-full" if key.startswith(("data.grrm.", "sft.")) else "grpo-pointwise"
        try:
            load_config(recipe, overrides=[f"{key}={value}"])
        except ConfigError as exc:
            assert key in str(exc), f"{key}: {exc}"
        else:
            accepted.append(key)
    assert not accepted, f"{value} was accepted for {accepted}"


def test_a_recipe_that_is_not_text_is_refused_naming_the_file(tmp_path: Path) -> None:
    recipe = tmp_path / "binary.yaml"
    recipe.write_bytes(b"base: grpo-pointwise\n\xff\xfe\x00garbage\n")
    with pytest.raises(ConfigError, match=f"{recipe}: not UTF-8 text"):
        load_config(recipe)
