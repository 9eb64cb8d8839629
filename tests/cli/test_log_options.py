"""`judgeflow --quiet|--verbose COMMAND`: how much of judgeflow's log the command line shows."""

from __future__ import annotations

import logging

import pytest
from typer.testing import CliRunner

from judgeflow.cli import recipes
from judgeflow.cli.typer_app import app

runner = CliRunner()


@pytest.fixture
def profiles_that_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """`judgeflow recipes` with a core call that logs at every level on its way."""
    listed = recipes.list_profiles

    def list_profiles() -> list[str]:
        core = logging.getLogger("judgeflow.config.load")
        core.debug("a debug record")
        core.info("an info record")
        core.warning("a warning record")
        return listed()

    monkeypatch.setattr(recipes, "list_profiles", list_profiles)


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ([], ["an info record", "a warning record"]),
        (["--quiet"], ["a warning record"]),
        (["--verbose"], ["a debug record", "an info record", "a warning record"]),
    ],
)
@pytest.mark.usefixtures("profiles_that_log")
def test_quiet_and_verbose_choose_the_records_shown(options: list[str], shown: list[str]) -> None:
    result = runner.invoke(app, [*options, "recipes"])
    assert result.exit_code == 0, result.output
    assert [line.rsplit(" - ", 1)[1] for line in result.stderr.splitlines()] == shown
    assert "profiles: " in result.stdout  # the command's own output is not a log record


def test_quiet_and_verbose_together_is_a_usage_error() -> None:
    result = runner.invoke(app, ["--quiet", "--verbose", "recipes"])
    assert result.exit_code == 2
    assert "exclude each other" in result.output
