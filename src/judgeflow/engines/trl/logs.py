"""TRL's logs as judgeflow's metrics: stable names for the sink, one readable line per step.

TRL and the Trainer log dicts with their own keys; `map_trl_logs` renames them to the names
every engine reports (verl's through `engines.verl_log`), so dashboards compare engines.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from judgeflow.engines.trl.reward_adapter import (
    CORRECT_SUFFIX,
    FORMAT_FAILURE,
    VERIFIABLE_CORRECT,
)

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

__all__ = [
    "LineSink",
    "MetricsCallback",
    "MetricsSink",
    "Progress",
    "log_line",
    "map_trl_logs",
    "step_line",
]

MetricsSink = Callable[[dict[str, float], int], None]
Progress = Callable[[int, int], None]
LineSink = Callable[[str], None]
logger = logging.getLogger(__name__)

_PER_VERIFIER = re.compile(rf"rewards/(.+){CORRECT_SUFFIX}/mean")
#: TRL 0.24 log keys -> the stable names judgeflow reports (same names for every engine).
_RENAMES = {
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "zero_std_frac",
    "kl": "kl",
    "loss": "loss",
    "completions/mean_length": "completion_length",
    f"rewards/{FORMAT_FAILURE}/mean": "format_failure_rate",
    f"rewards/{VERIFIABLE_CORRECT}/mean": "verifiable_correct_rate",
    "learning_rate": "learning_rate",
    "rewards/judge_reward/mean": "judge_reward",
    "rewards/reference_f1/mean": "reference_f1",
    "rewards/judge_format_failure/mean": "judge_format_failure_rate",
    "rewards/judge_inconsistent/mean": "judge_inconsistent_rate",
}
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_\-. /]")  # what MLflow accepts in a metric name


def _per_verifier(key: str) -> str:
    """`rewards/<verifier>_correct/mean` -> `verifiable_correct_rate/<verifier>`."""
    found = _PER_VERIFIER.fullmatch(key)
    return f"{_RENAMES[f'rewards/{VERIFIABLE_CORRECT}/mean']}/{found[1]}" if found else key


def map_trl_logs(logs: Mapping[str, Any]) -> dict[str, float]:
    """TRL/Trainer log keys -> judgeflow metric names (`train/…`, `val/…`, `train/summary/…`).

    The end-of-training summary (`train_runtime`, `train_loss`, …) goes under `train/summary/`
    so it cannot overwrite the last step's `train/loss`.
    """
    summary = "train_runtime" in logs
    out: dict[str, float] = {}
    for key, value in logs.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isnan(value):  # a per-verifier probe with none of its rows in the step
            continue
        if summary:
            name = f"train/summary/{key.removeprefix('train_')}"
        elif key.startswith("eval_"):
            base = key.removeprefix("eval_")
            name = f"val/{_RENAMES.get(base, base)}"
        else:
            name = f"train/{_RENAMES.get(key, _per_verifier(key))}"
        out[_UNSAFE_NAME_CHARS.sub("_", name)] = float(value)
    return out


#: What a step line shows, in order: (metric, label, format).
_LINE_FIELDS = (
    ("reward_mean", "reward", "{:.3f}"),
    ("reward_std", "±", "{:.3f}"),
    ("format_failure_rate", "format_fail", "{:.2f}"),
    ("zero_std_frac", "zero_std", "{:.2f}"),
    ("kl", "kl", "{:.4f}"),
    ("loss", "loss", "{:.4f}"),
    ("completion_length", "len", "{:.1f}"),
)


def step_line(step: int, total: int, metrics: Mapping[str, float]) -> str:
    """One readable line for a logging step: `grpo step 12/40 | reward 0.625 ± 0.310 | …`."""
    parts = [f"grpo step {step}/{total}" if total > 0 else f"grpo step {step}"]
    for prefix, what in (("train/", ""), ("val/", "val ")):
        shown = [
            f"{what}{label} {fmt.format(metrics[prefix + key])}"
            for key, label, fmt in _LINE_FIELDS
            if prefix + key in metrics
        ]
        parts += shown
    if len(parts) == 1:
        return ""
    return " | ".join(parts).replace(" | ± ", " ± ")


class MetricsCallback(TrainerCallback):
    """Streams renamed metrics to the sink on every log, reports step progress, and writes one
    readable line per logging step."""

    def __init__(
        self, sink: MetricsSink | None, progress: Progress | None, on_line: LineSink | None = None
    ) -> None:
        self.sink = sink
        self.progress = progress
        self.on_line = on_line
        self.latest: dict[str, float] = {}

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not state.is_world_process_zero or not logs:
            return
        metrics = map_trl_logs(logs)
        self.latest.update(metrics)
        if self.sink is not None and metrics:
            self.sink(metrics, state.global_step)
        line = step_line(state.global_step, state.max_steps, metrics)
        if self.on_line is not None and line:
            self.on_line(line)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.progress is not None and state.is_world_process_zero:
            self.progress(state.global_step, state.max_steps)


def log_line(line: str) -> None:
    """The default `LineSink`: an INFO record, which a stage's job shows on its output, a line
    at a time (`judgeflow.log_setup`)."""
    logger.info(line)
