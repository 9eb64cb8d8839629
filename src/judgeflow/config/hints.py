"""How each front end names the data functions' options in an error's hints.

A `judgeflow.data.DataError` carries its hints with the options as Python keywords
(`skip_invalid`); `str(error)` shows them so (`skip_invalid=True`). The command line renders
them with its flags (`--skip-invalid`), and a pipeline run with the `--set` of the config key
behind the option (`--set data.skip_invalid=true`): `error.render(JUDGE_FLAGS)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # importing judgeflow.data loads pyarrow: not for every CLI start
    from judgeflow.data.errors import OptionNamer


def _shown(value: Any) -> str:
    return "…" if value is ... else str(value)


def command_flags(**templates: str) -> OptionNamer:
    """Options named by a command's flags: `input_format="--format {}"` (`{}`: the value)."""

    def name(option: str, value: Any) -> str | None:
        template = templates.get(option)
        return None if template is None else template.format(_shown(value))

    return name


JUDGE_FLAGS = command_flags(skip_invalid="--skip-invalid", input_format="--format {}")
GRRM_FLAGS = command_flags(
    skip_invalid="--skip-invalid",
    input_format="--format {}",
    mt_key="--mt-key {}",
    score_key="--score-key {}",
    analysis_key="--analysis-key {}",
)


def config_override(option: str, value: Any) -> str | None:
    """`judgeflow run` / `evaluate`: an option as the `--set` of the config key that sets it."""
    if option == "skip_invalid":
        return "--set data.skip_invalid=true"
    if option == "input_format":  # GRRM's parquet/jsonl has no key: the file name says it
        return f"--set data.format={value}" if value in ("openjudge", "rewardbench2") else None
    if option.endswith("_key"):
        return f"--set data.grrm.{option}={_shown(value)}"
    return None
