"""The training data order: which prepared rows each optimizer step trained on, in order.

Every optimizer step appends the prepared rows it trained on to `data_order.jsonl` in the output
directory (`read_data_order`): an audit trail of what the model saw, in order, across resumes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

__all__ = ["DATA_ORDER_FILE", "DataOrderRecorder", "read_data_order"]

#: The audit trail of training data order, one JSON line per optimizer step (`read_data_order`).
DATA_ORDER_FILE = "data_order.jsonl"


def read_data_order(output_dir: str | Path) -> dict[int, dict[str, Any]]:
    """Step -> what that optimizer step trained on, from `data_order.jsonl` (`DATA_ORDER_FILE`).

    Each record has `rows` (the prepared rows' `extra_info.index`), `prompt_hashes`
    (`extra_info.prompt_hash`, what decontamination compares), `epoch` and `attempt_from` (the
    checkpoint step the writing attempt resumed from; 0 for a fresh start). A step trained again
    after resuming from an older checkpoint keeps its last record: the earlier one belongs to
    an attempt whose weights were thrown away. A line cut short by a kill is skipped.
    """
    path = Path(output_dir) / DATA_ORDER_FILE
    order: dict[int, dict[str, Any]] = {}
    if not path.is_file():
        return order
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        order[int(record["step"])] = record
    return dict(sorted(order.items()))


class DataOrderRecorder(TrainerCallback):
    """Appends one line per optimizer step to `data_order.jsonl`: which prepared rows it trained on.

    The reward adapter hands over the rows of each scored generation batch (`observe`); only
    those between `on_step_begin` and `on_step_end` are training rows (evaluation scores rows
    after `on_step_end`). A generation batch is each prompt `num_generations` times in a row, so
    every `num_generations`-th entry is one prompt. Each line is written, flushed and synced
    when its step ends, so a job killed later keeps it. One process (CPU / one GPU) sees all
    rows; with several, this records the first process's share.
    """

    def __init__(self, path: Path, num_generations: int, attempt_from: int) -> None:
        self.path = path
        self.num_generations = num_generations
        self.attempt_from = attempt_from
        self._in_step = False
        self._extras: list[Any] = []

    def observe(self, reward_kwargs: Mapping[str, Any]) -> None:
        if self._in_step:
            extras = reward_kwargs.get("extra_info") or []
            self._extras.extend(extras[:: self.num_generations])

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._in_step, self._extras = True, []

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._in_step = False
        if not state.is_world_process_zero:
            return
        extras = [e if isinstance(e, Mapping) else {} for e in self._extras]
        record = {
            "step": state.global_step,
            "epoch": round(float(state.epoch or 0.0), 6),
            "rows": [e.get("index") for e in extras],
            "prompt_hashes": [e.get("prompt_hash") for e in extras],
            "attempt_from": self.attempt_from,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:  # one write per line: O_APPEND
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
