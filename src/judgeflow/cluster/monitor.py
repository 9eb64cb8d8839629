"""Follow a running stage: stream its log, report its progress, return its result.

The caller injects where lines and progress go (the Prefect task log and progress artifact, or a
terminal), so this stays free of any orchestrator.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from judgeflow.cluster.ray_jobs import RayJobHandle
from judgeflow.cluster.submit import JobHandle


@dataclass(frozen=True)
class JobProgress:
    """What a running stage last wrote to its progress file: step / total and a few metrics."""

    step: int
    total: int
    metrics: dict[str, float] = field(default_factory=dict)


def watch(
    handle: JobHandle | RayJobHandle,
    *,
    on_log: Callable[[str], None],
    on_progress: Callable[[JobProgress], None] | None = None,
    poll_s: float = 2.0,
) -> dict[str, Any]:
    """Poll until the job ends; then return its result (or raise JobFailed)."""
    offset, pending, last_progress, beats = 0, "", None, 0
    while True:
        beats += 1  # the job stops itself when this goes quiet (its flow is gone)
        with contextlib.suppress(OSError):
            handle.spec.flow_heartbeat_path.write_text(str(beats))
        finished = handle.done()
        text, offset = handle.log_tail(offset)
        pending = _emit_lines(pending + text, on_log)
        progress = _read_progress(handle)
        if on_progress and progress and progress != last_progress:
            on_progress(progress)
            last_progress = progress
        if finished:
            break
        time.sleep(poll_s)
    if pending.strip():
        on_log(_last_segment(pending))
    return handle.result()


def _emit_lines(text: str, on_log: Callable[[str], None]) -> str:
    """Send every complete line; keep the unfinished tail for the next poll."""
    *lines, tail = text.split("\n")
    for line in lines:
        shown = _last_segment(line)
        if shown.strip():
            on_log(shown)
    return tail


def _last_segment(line: str) -> str:
    """Progress bars redraw with carriage returns; the last redraw is what a terminal shows."""
    return line.rstrip("\r").rsplit("\r", 1)[-1]


def _read_progress(handle: JobHandle | RayJobHandle) -> JobProgress | None:
    try:
        data = json.loads(handle.spec.progress_path.read_text())
        metrics = {str(k): float(v) for k, v in (data.get("metrics") or {}).items()}
        return JobProgress(int(data["step"]), int(data["total"]), metrics)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
