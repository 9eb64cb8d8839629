"""Checkpoints: which `checkpoint-N` a run resumes from, and the step it holds.

The Trainer writes the checkpoints (every `save_steps`); a killed job may leave the newest one
half-written, and resuming from it would fail every retry.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["checkpoint_step", "last_complete_checkpoint"]


def last_complete_checkpoint(output_dir: Path) -> Path | None:
    """The newest `checkpoint-N` that was saved completely.

    A job killed while saving leaves a partial directory; the Trainer writes trainer_state.json
    last, so a checkpoint without it is skipped and the previous one is used. The Trainer does
    not write that file atomically either: one cut short (empty, or not a JSON object) would
    fail every resume, so it counts as missing.
    """
    if not output_dir.is_dir():
        return None
    steps = [
        (int(p.name.removeprefix("checkpoint-")), p)
        for p in output_dir.glob("checkpoint-*")
        if p.name.removeprefix("checkpoint-").isdigit()
    ]
    for _, path in sorted(steps, reverse=True):
        if _state_readable(path / "trainer_state.json"):
            return path
    return None


def _state_readable(path: Path) -> bool:
    try:
        return isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        return False


def checkpoint_step(checkpoint: Path | None) -> int:
    return int(checkpoint.name.removeprefix("checkpoint-")) if checkpoint else 0
