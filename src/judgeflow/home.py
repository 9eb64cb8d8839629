"""Where local state lives, in a module that imports nothing (the console script reads it before
anything heavy loads)."""

from __future__ import annotations

import os
from pathlib import Path


def judgeflow_home() -> Path:
    """Where local state lives (tiny model, MLflow db, artifacts): $JUDGEFLOW_HOME or ./.judgeflow."""
    return Path(os.environ.get("JUDGEFLOW_HOME", ".judgeflow")).absolute()
