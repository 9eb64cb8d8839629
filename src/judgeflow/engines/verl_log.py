"""verl's numbers where users look: follow verl 0.6.1's console log, map its metric names.

verl's trainer prints `Total training steps: N` once, then one line per step through its console
logger (`verl.utils.logger.aggregate_logger.concat_dict_to_str`): `step:3 - critic/score/mean:0.5
- actor/pg_loss:np.float64(-0.01) - …` (values through `pprint.pformat`, so numpy scalars keep
their repr; Ray prefixes actor output with `(TaskRunner pid=…)`). `VerlLogFollower` turns those
lines into progress (step / total) and the metric names the TRL engine logs and the judge
cookbook documents (`STANDARD_NAMES`), so dashboards and the local-vs-cluster comparison see the
same names. verl logs its own names to the same MLflow run itself, sanitised by its MLflow
adapter (`mlflow_name`: `@` becomes `_at_`, then any character MLflow refuses becomes `_`).

A paying judge's failures (`judgeflow.inference.judge_failures`): verl 0.6.1 logs the reward's
extra columns (`judged`, `judge_format_failure`, `judge_inconsistent`, …) for validation only,
as `val-aux/<source>/<column>/mean@N`, means over all of a data source's rollouts, the rows the
judge does not pay included; a training step's columns reach no metric. So the judged-only rates
are computed here: `val/judge_format_failure_rate` and `val/judge_inconsistent_rate` as each
source's mean of the column over its mean of `judged`, then the mean over sources (as
`val/reward_mean`); `train/…` from the counts line the reward prints at each call
(`judge_log_counts`). A step's training reward is computed before its validation
(`RayPPOTrainer.fit`, the reward in the TaskRunner), so the first counts line after a step line
is the next training step's; validation before training logs a step with no training metrics,
whose lines are dropped.

No verl import: this runs in the stage process that wraps verl's driver.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from judgeflow.inference.judge_failures import JudgeCounts

#: verl name -> judgeflow's standard name (the TRL engine's), one to one. verl 0.6.1 has no
#: per-step reward std or share of zero-std groups: `train/reward_std` and `train/zero_std_frac`
#: exist on the TRL engine only. `train/kl` and `train/loss` are derived (`standard_metrics`).
STANDARD_NAMES: Mapping[str, str] = {
    "critic/score/mean": "train/reward_mean",
    "actor/grad_norm": "train/grad_norm",
    "actor/entropy": "train/entropy",
    "actor/lr": "train/learning_rate",
    "response_length/mean": "train/completion_length",
}
#: Validation is per data source: `val-core/<source>/reward/mean@N` (judgeflow's rewards return
#: no `acc`, so verl's core variable is `reward`) and the format share in `val-aux/<source>/
#: valid_answer/mean@N`. The standard value is the mean over sources.
VAL_REWARD = re.compile(r"^val-core/(?P<source>.+)/reward/mean@\d+$")
VAL_VALID = re.compile(r"^val-aux/(?P<source>.+)/valid_answer/mean@\d+$")
#: The paying judge's columns in verl's validation metrics (means over all rollouts).
VAL_JUDGE = re.compile(
    r"^val-aux/(?P<source>.+)/(?P<column>judged|judge_format_failure|judge_inconsistent)"
    r"/mean@(?P<n>\d+)$"
)
#: Judge column -> judgeflow's rate (over the rollouts the judge pays), as the TRL engine's.
JUDGE_RATES = {
    "judge_format_failure": "judge_format_failure_rate",
    "judge_inconsistent": "judge_inconsistent_rate",
}

_STEP_LINE = re.compile(r"(?:^|\)\s+|\s)step:(?P<step>\d+)(?P<rest>(?: - [^\s:][^:]*:\S+)*)\s*$")
_TOTAL_LINE = re.compile(r"Total training steps: (?P<total>\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NUMPY_SCALAR = re.compile(r"^np\.\w+\((?P<value>.*)\)$")
_MLFLOW_INVALID = re.compile(r"[^/\w.\- :]")


def mlflow_name(name: str) -> str:
    """`name` as verl 0.6.1's MLflow adapter stores it (`verl/utils/tracking.py`)."""
    return _MLFLOW_INVALID.sub("_", name.replace("@", "_at_"))


def _number(text: str) -> float | None:
    m = _NUMPY_SCALAR.match(text)
    try:
        return float(m.group("value") if m else text)
    except ValueError:
        return None


def parse_step_line(line: str) -> tuple[int, dict[str, float]] | None:
    """`(step, {verl name: value})` for one console step line, None for any other line."""
    m = _STEP_LINE.search(_ANSI.sub("", line.rstrip("\n")))
    if m is None:
        return None
    metrics: dict[str, float] = {}
    for item in m.group("rest").split(" - ")[1:]:
        key, _, text = item.rpartition(":")
        value = _number(text)
        if key and value is not None:
            metrics[key] = value
    return int(m.group("step")), metrics


def parse_total_steps(line: str) -> int | None:
    m = _TOTAL_LINE.search(line)
    return int(m.group("total")) if m else None


def gradient_accumulation(
    *,
    ppo_mini_batch_size: int,
    rollout_n: int,
    n_gpus: int,
    ppo_micro_batch_size_per_gpu: int,
    ulysses_sequence_parallel_size: int = 1,
) -> int:
    """verl 0.6.1's micro-batches per mini-batch (`DataParallelPPOActor.gradient_accumulation`):
    the mini-batch becomes responses per data-parallel rank (`fsdp_workers`), then micro-batches.
    """
    per_rank = ppo_mini_batch_size * rollout_n // max(n_gpus // ulysses_sequence_parallel_size, 1)
    return max(per_rank // ppo_micro_batch_size_per_gpu, 1)


def standard_metrics(
    verl_metrics: Mapping[str, float], *, accumulation: int | None = None
) -> dict[str, float]:
    """The standard-named values one step's verl metrics give (only those present).

    verl 0.6.1 logs each micro-batch's `actor/pg_loss` and `actor/kl_loss` times
    `1 / gradient_accumulation`, then averages them (verl issue #3129), so the logged values are
    the real ones divided by `accumulation`. With it, `train/kl` (the KL estimate) and
    `train/loss` (policy loss + coefficient x KL, TRL's definition) are undone to the real
    scale; without it (dynamic batch sizes: the divisor changes each step) they are left out
    rather than reported too small.
    """
    out = {STANDARD_NAMES[k]: v for k, v in verl_metrics.items() if k in STANDARD_NAMES}
    if accumulation is not None and "actor/pg_loss" in verl_metrics:
        kl = verl_metrics.get("actor/kl_loss", 0.0)
        if "actor/kl_loss" in verl_metrics:
            out["train/kl"] = kl * accumulation
        coef = verl_metrics.get("actor/kl_coef", 0.0)
        out["train/loss"] = (verl_metrics["actor/pg_loss"] + coef * kl) * accumulation
    rewards = [v for k, v in verl_metrics.items() if VAL_REWARD.match(k)]
    if rewards:
        out["val/reward_mean"] = sum(rewards) / len(rewards)
    valid = [v for k, v in verl_metrics.items() if VAL_VALID.match(k)]
    if valid:
        out["val/format_failure_rate"] = 1.0 - sum(valid) / len(valid)
    return out | _val_judge_rates(verl_metrics)


def _val_judge_rates(verl_metrics: Mapping[str, float]) -> dict[str, float]:
    """Per source, mean(column) / mean(judged) at the largest N (the rate over its judged
    rollouts: both means are over the same rollouts); then the mean over sources."""
    found: dict[str, dict[str, tuple[int, float]]] = {}
    for key, value in verl_metrics.items():
        m = VAL_JUDGE.match(key)
        if m is None:
            continue
        columns = found.setdefault(m["source"], {})
        if m["column"] not in columns or int(m["n"]) > columns[m["column"]][0]:
            columns[m["column"]] = (int(m["n"]), value)
    out = {}
    for column, name in JUDGE_RATES.items():
        rates = [
            c[column][1] / c["judged"][1]
            for c in found.values()
            if column in c and c.get("judged", (0, 0.0))[1] > 0
        ]
        if rates:
            out[f"val/{name}"] = sum(rates) / len(rates)
    return out


def judge_rates(counts: JudgeCounts) -> dict[str, float]:
    """A training step's judge rates from its reward's counts, over the judged rollouts."""
    if counts.judged == 0:
        return {}
    return {
        "train/judge_format_failure_rate": counts.format_failures / counts.judged,
        "train/judge_inconsistent_rate": counts.inconsistent / counts.judged,
    }


@dataclass
class VerlLogFollower:
    """Feed it verl's output line by line; it reports progress and the standard metrics."""

    progress: Callable[[int, int], None] | None = None
    sink: Callable[[dict[str, float], int], None] | None = None
    accumulation: int | None = None  # see `standard_metrics`
    total: int = 0
    last_step: int = 0
    last_metrics: dict[str, float] = field(default_factory=dict)
    judge_failing: str | None = None  # the line saying why the reward stopped the run
    _judge_calls: list[JudgeCounts] = field(default_factory=list)  # since the last step line

    def feed(self, line: str) -> None:
        counts = JudgeCounts.parse(line)
        if counts is not None:
            self._judge_calls.append(counts)
            return
        if "JudgeFailing: " in line and self.judge_failing is None:
            self.judge_failing = line[line.index("JudgeFailing: ") :].strip()
        total = parse_total_steps(line)
        if total is not None:
            self.total = total
            if self.progress is not None:
                self.progress(self.last_step, total)
            return
        parsed = parse_step_line(line)
        if parsed is None:
            return
        step, metrics = parsed
        self.last_step = step
        standard = standard_metrics(metrics, accumulation=self.accumulation)
        if "critic/score/mean" in metrics and self._judge_calls:  # a training step's reward
            standard |= judge_rates(self._judge_calls[0])  # came first; validation's after
        self._judge_calls.clear()
        self.last_metrics.update(standard)
        if self.sink is not None and standard:
            self.sink(standard, step)
        if self.progress is not None:
            self.progress(step, self.total)
