"""The docs' reference pages are generated from the code (`scripts/docs_reference.py`): the
committed pages are what the code generates, on any machine; they name every command, option and
config key; each preset's column shows what `load_config` resolves; every key is described."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer
from pydantic import BaseModel

from judgeflow.cli import app
from judgeflow.config import RunConfig, list_recipes, load_config

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "docs_reference.py"
REFERENCE = ROOT / "docs" / "reference"
PAGES = ("cli.md", "config.md")


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dotted_keys(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from dotted_keys(annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def all_fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, field in model.model_fields.items():
        yield f"{prefix}{name}", field
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from all_fields(annotation, f"{prefix}{name}.")


def section_models(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    yield model
    for field in model.model_fields.values():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from section_models(annotation)


def commands() -> Iterator[tuple[tuple[str, ...], Any, typer.Context]]:
    def walk(command: Any, ctx: typer.Context, path: tuple[str, ...]) -> Iterator[Any]:
        yield path, command, ctx
        for name in getattr(command, "list_commands", lambda _: [])(ctx):
            sub = command.get_command(ctx, name)
            yield from walk(sub, typer.Context(sub, info_name=name, parent=ctx), (*path, name))

    root = typer.main.get_command(app)
    yield from walk(root, typer.Context(root, info_name="judgeflow"), ())


def read(name: str) -> str:
    return (REFERENCE / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------- the check


def test_committed_pages_are_what_the_code_generates() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, (
        "docs/reference is stale: run `.venv/bin/python scripts/docs_reference.py`\n"
        + result.stdout
        + result.stderr
    )
    for name in PAGES:
        first = read(name).splitlines()[0]
        assert "scripts/docs_reference.py" in first and "do not edit" in first


@pytest.mark.parametrize("home", [None, "elsewhere/home"])
def test_pages_are_the_same_on_any_machine(
    script: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: str | None
) -> None:
    """Another checkout, working directory, JUDGEFLOW_HOME or terminal: the same pages, and
    none of the machine's paths in them."""
    monkeypatch.chdir(tmp_path)
    if home is None:
        monkeypatch.delenv("JUDGEFLOW_HOME", raising=False)
    else:
        monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / home))
    monkeypatch.setenv("COLUMNS", "37")
    monkeypatch.setenv("FORCE_COLOR", "1")
    pages = script.pages()
    assert os.environ.get("JUDGEFLOW_HOME") == (None if home is None else str(tmp_path / home))
    for name in PAGES:
        assert pages[name] == read(name), name
        for machine in (str(tmp_path), str(ROOT), str(Path.home())):
            assert machine not in pages[name]
        assert "\x1b[" not in pages[name]
    assert "`${JUDGEFLOW_HOME}/jobs`" in pages["config.md"]


def test_check_shows_a_diff_of_a_stale_page_and_changes_nothing(
    script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert script.main(["--check", "--out", str(tmp_path)]) == 1  # no pages yet
    assert list(tmp_path.iterdir()) == []
    assert "+# Command line reference" in capsys.readouterr().out

    assert script.main(["--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(PAGES)
    assert script.main(["--check", "--out", str(tmp_path)]) == 0
    capsys.readouterr()

    page = tmp_path / "config.md"
    edited = page.read_text().replace("| `grpo.learning_rate` |", "| `grpo.lr` |")
    page.write_text(edited)
    assert script.main(["--check", "--out", str(tmp_path)]) == 1
    diff = capsys.readouterr().out
    assert "--- config.md (on disk)" in diff.replace(str(tmp_path) + "/", "")
    assert "\n-| `grpo.lr` |" in diff and "\n+| `grpo.learning_rate` |" in diff
    assert page.read_text() == edited


# ---------------------------------------------------------------------------- the CLI page


def test_every_command_and_option_is_on_the_cli_page(script: ModuleType) -> None:
    text = read("cli.md")
    found = list(commands())
    assert len(found) >= 10  # the app, its commands and the prepare / dev sub-commands
    for path, command, ctx in found:
        name = " ".join(["judgeflow", *path])
        anchor = "-".join(["judgeflow", *path])
        heading = re.search(rf"^#+ `{name}` \{{ #{anchor} \}}$", text, re.M)
        assert heading, f"no section for `{name}`"
        assert f"[`{name}`](#{anchor})" in text  # in the index at the top
        section = re.split(r"^#+ ", text[heading.end() :], maxsplit=1, flags=re.M)[0]
        usage = " ".join([name, *command.collect_usage_pieces(ctx)])
        assert f"```text\n{usage}\n```" in section, name
        assert script.paragraphs(command.help)[0] in section, name
        for param in command.params:
            if param.param_type_name == "argument":
                assert f"| `{param.name}` |" in section, (name, param.name)
            else:
                for opt in (*param.opts, *param.secondary_opts):
                    assert f"`{opt}`" in section, (name, opt)
            if getattr(param, "help", None):
                assert script.prose(param.help) in section, (name, param.name)


# ---------------------------------------------------------------------------- the config page


def test_every_config_key_is_on_the_config_page() -> None:
    text = read("config.md")
    keys = list(dotted_keys(RunConfig))
    assert len(keys) > 100 and "grpo.learning_rate" in keys and "data.grrm.mt_key" in keys
    for key in keys:
        # one row in its section's key table, one in its presets table
        assert text.count(f"\n| `{key}` |") == 2, key
    for section in {key.rpartition(".")[0] for key in keys} - {""}:
        assert re.search(rf"^## `{re.escape(section)}` \{{ #", text, re.M), section


def preset_tables(text: str) -> dict[str, dict[str, str]]:
    """recipe -> key -> cell, from the presets tables (`| key | <recipe> | …`)."""
    recipes = list_recipes()
    out: dict[str, dict[str, str]] = {r: {} for r in recipes}
    header = "| key | " + " | ".join(recipes) + " |"
    for block in text.split(header)[1:]:
        for line in block.strip().splitlines()[1:]:
            if not line.startswith("| `"):
                break
            key, *cells = [c.strip() for c in line.strip("|").split(" | ")]
            for recipe, cell in zip(recipes, cells, strict=True):
                out[recipe][key.strip("`")] = cell
    return out


def test_each_presets_column_shows_what_load_config_resolves(script: ModuleType) -> None:
    tables = preset_tables(read("config.md"))
    keys = list(dotted_keys(RunConfig))
    assert sorted(tables) == sorted(list_recipes()) and len(tables) >= 4
    for recipe, cells in tables.items():
        assert sorted(cells) == sorted(keys), recipe
        cfg = load_config(recipe, report=lambda _: None)
        for key in keys:
            if "JUDGEFLOW_HOME" in cells[key]:
                continue  # load_config expanded it to this machine's path; the page does not
            value: Any = cfg
            for part in key.split("."):
                value = getattr(value, part)
            shown = cells[key].removeprefix("**").removesuffix("**")
            assert shown == script.value_text(value), (recipe, key)
    assert tables["grpo-pairwise"]["grpo.total_epochs"] == "**`30`**"  # not the default: bold
    assert tables["grpo-pointwise"]["grpo.total_epochs"] == "`1`"


def key_row(text: str, key: str) -> str:
    """The row of `key` in its section's key table (the first of its two rows)."""
    return next(line for line in text.splitlines() if line.startswith(f"| `{key}` | "))


def test_keys_only_one_engine_or_backend_reads_are_marked() -> None:
    from judgeflow.config.keys import ONLY_READ_BY

    text = read("config.md")
    marked = 0
    for key in dotted_keys(RunConfig):
        readers = [
            reader
            for reader, owned in ONLY_READ_BY.items()
            if any(key == o or key.startswith(f"{o}.") for o in owned)
        ]
        last_cell = key_row(text, key).rstrip(" |").rsplit(" | ", 1)[-1]
        for reader in readers:
            assert f"`{reader}`" in last_cell, key
            marked += 1
        if not readers:
            assert not re.search(r"(engine|backend|recipes)$", last_cell), key
    assert marked > 50  # the verl-only grpo keys alone are more


def test_every_config_field_and_section_is_described(script: ModuleType) -> None:
    missing = [key for key, field in all_fields(RunConfig) if not (field.description or "").strip()]
    assert not missing, f"fields without a description: {missing}"
    undocumented = [m.__name__ for m in section_models(RunConfig) if not m.__dict__.get("__doc__")]
    assert not undocumented, f"section models without a docstring: {undocumented}"
    text = read("config.md")
    leaves = set(dotted_keys(RunConfig))
    for key, field in all_fields(RunConfig):
        if key in leaves:
            assert f" | {script.prose(field.description)} |" in key_row(text, key), key
