"""The base of every configuration section: strict, so a misspelt or impossible value fails as it
is set, naming its key."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A section of `RunConfig`: unknown keys fail, assignments are validated."""

    # allow_inf_nan: every number a recipe sets is finite (one rule for every numeric key)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)
