"""A job's state, in Slurm's words, whichever backend runs it (Slurm, submitit's local
executor, a Ray Job): what the flow decides a retry on."""

from __future__ import annotations

import enum

__all__ = ["JobState"]


class JobState(enum.Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    PREEMPTED = "PREEMPTED"
    REQUEUED = "REQUEUED"
    UNKNOWN = "UNKNOWN"

    @classmethod
    def parse(cls, raw: str) -> JobState:
        word = raw.split()[0].rstrip("+") if raw else "UNKNOWN"  # "CANCELLED by 0" -> CANCELLED
        aliases = {
            "DONE": "COMPLETED",
            "FINISHED": "COMPLETED",  # submitit local backend
            "READY": "PENDING",
            "CONFIGURING": "PENDING",  # nodes booting for the allocation
            "INTERRUPTED": "CANCELLED",  # a local process killed by a signal
        }
        word = aliases.get(word, word)
        return cls.__members__.get(word, cls.UNKNOWN)

    @property
    def finished(self) -> bool:
        return self not in {JobState.PENDING, JobState.RUNNING, JobState.REQUEUED, JobState.UNKNOWN}

    @property
    def killed_from_outside(self) -> bool:
        """States where a resubmission can succeed where this attempt could not."""
        return self in {
            JobState.CANCELLED,
            JobState.NODE_FAIL,
            JobState.PREEMPTED,
            JobState.TIMEOUT,
        }
