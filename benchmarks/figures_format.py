"""What the region renderers share: the repository root, reading a results file, and the
phrasings several regions use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def read_json(source: Path) -> Any:
    return json.loads(source.read_text(encoding="utf-8"))


def cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def raised(changes: list[float], joint: str = " and") -> str:
    """'X of N runs and lowered it in Y': how many per-run changes went up, and down."""
    up, down = sum(d > 0 for d in changes), sum(d < 0 for d in changes)
    return f"{up} of {len(changes)} runs{joint} lowered it in {down}"
