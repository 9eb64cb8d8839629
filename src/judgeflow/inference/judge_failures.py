"""What the paying judge gets wrong, counted: each call's counts, and the limit that stops a run
whose judge keeps failing (`reward.judge_max_failure_rate`).

Per call of `judge_reward.compute_score` (one training step, one evaluation), `JudgeCounts`:
the rollouts the judge pays (`judged`: rows of `judge_datasets`), those shown to it (`asked`: an
empty answer is not), its replies that did not parse and, pairwise, its verdicts that changed
with the order. verl 0.6.1 logs a reward's extra columns for validation only (per data source,
means over all its rollouts), so under verl the reward prints each call's counts as one line
(`COUNTS_MARK`), which `judgeflow.engines.verl_log` turns into the training step's
`train/judge_format_failure_rate` and `train/judge_inconsistent_rate`, over judged rollouts only.

**The limit.** `FailureWindow` keeps the last `JUDGE_FAILURE_WINDOW` rollouts the judge was
shown (True: its reply did not parse) and, once it holds `JUDGE_FAILURE_MIN` of them, raises
`JudgeFailing` when more than `reward.judge_max_failure_rate` of them failed. Why this rule:

- over the rollouts the judge was shown only: a row the judge does not pay, or an empty answer it
  is never shown, says nothing about the judge, so neither dilutes the rate;
- rollouts, not the judge's replies: a pairwise judge replies twice per rollout (both orders), a
  GRRM judge once for up to 8, so the rollout is the unit every mode shares, and the one the
  logged `judge_format_failure_rate` is over;
- a window, not the whole run: a judge that breaks mid-run (a served judge restarted with other
  settings, a policy whose answers now run the judge past its `max_new_tokens`) stops the run
  within a few steps, instead of after its good early steps are outweighed;
- a minimum: a first step can be small and a GRRM judge fails a whole call of up to 8 rollouts
  at once, so a few unlucky replies must not stop a run (64 independent rollouts at a true
  failure rate of 30% exceed 50% by chance about once in 4,000);
- rollouts, not steps, as the window's unit: a step's size does not change what the limit means.

A limit of 1 never stops a run; 0 stops it at the first failure past the minimum. Each process
counts for itself (one window per judge client: verl's reward); TRL's reward functions keep their
own per run, and each evaluation (`evaluation.judge_rows`) its own, so whether one stops never
depends on what ran before it in the same process.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "COUNTS_MARK",
    "JUDGE_FAILURE_MIN",
    "JUDGE_FAILURE_WINDOW",
    "FailureWindow",
    "JudgeCounts",
    "JudgeFailing",
    "window_for",
]

#: The most recent rollouts the judge was shown that the limit is checked over.
JUDGE_FAILURE_WINDOW = 512
#: Rollouts the window must hold before the limit is checked at all.
JUDGE_FAILURE_MIN = 64
#: What starts the line the reward prints under verl (no `step:` in it: not a step line).
COUNTS_MARK = "judgeflow judge counts"
_COUNTS = re.compile(
    rf"{COUNTS_MARK}: judged=(?P<judged>\d+) asked=(?P<asked>\d+) "
    r"format_failures=(?P<format_failures>\d+) inconsistent=(?P<inconsistent>\d+)"
)
_EXAMPLE_CHARS = 300


class JudgeFailing(RuntimeError):
    """The paying judge's replies keep failing to parse (`reward.judge_max_failure_rate`)."""


@dataclass(frozen=True)
class JudgeCounts:
    """One call's counts: rollouts the judge pays, those it was shown, its replies that did not
    parse, and its pairwise verdicts that changed with the order."""

    judged: int
    asked: int
    format_failures: int
    inconsistent: int

    def line(self) -> str:
        return (
            f"{COUNTS_MARK}: judged={self.judged} asked={self.asked} "
            f"format_failures={self.format_failures} inconsistent={self.inconsistent}"
        )

    @classmethod
    def parse(cls, line: str) -> JudgeCounts | None:
        """The counts a console line carries (Ray's `(TaskRunner pid=…)` prefix and all)."""
        m = _COUNTS.search(line)
        return cls(**{k: int(v) for k, v in m.groupdict().items()}) if m else None


@dataclass
class FailureWindow:
    """The last `size` rollouts the judge was shown (True: its reply did not parse); `add`
    checks the limit."""

    size: int = JUDGE_FAILURE_WINDOW
    minimum: int = JUDGE_FAILURE_MIN
    rollouts: deque[bool] = field(default_factory=deque, init=False)
    example: str | None = field(default=None, init=False)  # the latest reply that did not parse

    def add(
        self,
        failed: Iterable[bool],
        limit: float,
        *,
        example: str | None = None,
        judge: str = "the judge",
    ) -> None:
        """Count one call's rollouts shown to the judge (`failed`: its reply did not parse);
        raise `JudgeFailing` when more than `limit` of the window failed (once it holds
        `minimum` rollouts). `judge` says which judge, for the message."""
        self.rollouts.extend(failed)
        while len(self.rollouts) > self.size:
            self.rollouts.popleft()
        if example and example.strip():
            self.example = example.strip()
        n, bad = len(self.rollouts), sum(self.rollouts)
        if n < self.minimum or bad <= limit * n:
            return
        wrote = (
            f" One reply that did not parse: {self.example[:_EXAMPLE_CHARS]!r}."
            if self.example
            else ""
        )
        raise JudgeFailing(
            f"{judge}: {bad} of the last {n} rollouts it was shown got a reply that did not "
            f"parse ({bad / n:.0%}, more than reward.judge_max_failure_rate={limit:g}); each "
            f"paid the policy 0.{wrote} Check that reward.judge_max_new_tokens leaves the judge "
            "room to finish its verdict, that reward.judge_mode is the mode the judge was "
            "trained in (and its server serves that judge), or raise "
            "reward.judge_max_failure_rate (1 never stops a run)."
        )


_windows: dict[int, tuple[object, FailureWindow]] = {}  # per judge client, kept alive with it


def window_for(client: object) -> FailureWindow:
    """This process's window of `client`'s replies (the reward's default, verl's and the
    evaluation's: one process per run)."""
    if id(client) not in _windows:
        _windows[id(client)] = (client, FailureWindow())
    return _windows[id(client)][1]
