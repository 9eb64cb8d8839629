"""Prompt lengths in tokens, counted as verl counts them, and the length filter of `prepare`.

verl drops prompts longer than `data.max_prompt_length` after chat templating; `prepare` measures
the same way (`prompt_lengths`) so that its filter and its report's `prompt_tokens` agree with
what training will see. `load_tokenizer` loads a local tokenizer without `AutoTokenizer`'s
imports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from judgeflow.data.readers import DroppedRow
from judgeflow.data.verl_rows import render_contents

#: Conversations per `apply_chat_template` call when measuring prompt lengths.
TOKENIZE_BATCH = 256


def load_tokenizer(tokenizer: Any) -> Any:
    """A loaded HF tokenizer, or one loaded from a local path / hub id.

    A local directory whose `tokenizer_config.json` names its class is loaded with the class
    `AutoTokenizer` would pick for it, without importing `AutoTokenizer`: its module pulls in
    transformers' generation utilities (torch's compiler, scikit-learn, SciPy), seconds of
    imports that measuring prompts never uses and that made `prepare` of 40 rows take 3-20 s.
    Anything else (a hub id, remote code, no class named) goes through `AutoTokenizer`.
    """
    if not isinstance(tokenizer, str | os.PathLike):
        return tokenizer
    path = os.fspath(tokenizer)
    declared = _declared_tokenizer_class(path)
    if declared is not None:
        return declared.from_pretrained(path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def _declared_tokenizer_class(path: str) -> Any:
    """The class `AutoTokenizer.from_pretrained(path)` resolves from the directory's
    `tokenizer_config.json` (`tokenizer_class`, its fast variant first), or None whenever it
    would look further (no such file or class, `auto_map` remote code, a name we cannot find)."""
    try:
        with open(os.path.join(path, "tokenizer_config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return None
    name = config.get("tokenizer_class") if isinstance(config, dict) else None
    if not isinstance(name, str) or not name or "auto_map" in config:
        return None
    import transformers

    for candidate in [name] if name.endswith("Fast") else [f"{name}Fast", name]:
        try:
            return getattr(transformers, candidate)
        except Exception:  # not exported, or its module fails to import: AutoTokenizer decides
            continue
    return None


def prompt_lengths(
    tokenizer: Any,
    conversations: Sequence[list[dict[str, str]]],
    *,
    chat_template_kwargs: dict[str, Any] | None = None,
    batch_size: int = TOKENIZE_BATCH,
) -> list[int]:
    """Token counts of chat-templated prompts, measured exactly as verl's RLHFDataset does.

    verl filters with `len(tokenizer.apply_chat_template(prompt, add_generation_prompt=True))`,
    so that is what we count (in batches, which gives identical ids).
    """
    kwargs = chat_template_kwargs or {}
    lengths: list[int] = []
    for start in range(0, len(conversations), batch_size):
        batch = list(conversations[start : start + batch_size])
        ids = tokenizer.apply_chat_template(
            batch, add_generation_prompt=True, tokenize=True, **kwargs
        )
        lengths.extend(len(seq) for seq in ids)
    return lengths


@dataclass
class LengthFilter:
    """The length filter, a batch at a time: which examples to keep, the dropped ones (the
    first `listed_limit` listed, all counted) and the lengths of those kept.

    With `both_orders` (position balancing, or a split written in both A/B orders) a pairwise
    example may be written in either order, or both, so both are measured and the longer one
    decides; the limit then holds whichever way it is written.
    """

    tokenizer: Any
    max_prompt_length: int | None
    both_orders: bool
    chat_template_kwargs: dict[str, Any] | None
    listed_limit: int
    dropped: int = 0
    listed: list[DroppedRow] = field(default_factory=list)  # the first `listed_limit`
    kept: int = 0
    shortest: int | None = None
    longest: int | None = None
    total: int = 0

    def keep(self, examples: pa.Table, file: str) -> np.ndarray:
        """Which examples are short enough (a flag per example); the others are recorded."""
        lengths = self._measure(examples)
        if self.both_orders:
            every = pa.array(np.ones(examples.num_rows, bool))
            lengths = np.maximum(lengths, self._measure(examples, every))
        kept = np.ones(len(lengths), bool)
        if self.max_prompt_length is not None:
            kept = lengths <= self.max_prompt_length
            for i in np.flatnonzero(~kept).tolist():
                self._drop(examples, i, file, int(lengths[i]))
        if kept.any():
            lengths = lengths[kept]
            self.kept += len(lengths)
            self.total += int(lengths.sum())
            low, high = int(lengths.min()), int(lengths.max())
            self.shortest = low if self.shortest is None else min(self.shortest, low)
            self.longest = high if self.longest is None else max(self.longest, high)
        return kept

    def _measure(self, examples: pa.Table, swapped: pa.Array | None = None) -> np.ndarray:
        contents = render_contents(examples, swapped).to_pylist()
        conversations = [[{"role": "user", "content": content}] for content in contents]
        lengths = prompt_lengths(
            self.tokenizer, conversations, chat_template_kwargs=self.chat_template_kwargs
        )
        return np.array(lengths, dtype=np.int64)

    def _drop(self, examples: pa.Table, i: int, file: str, length: int) -> None:
        self.dropped += 1
        if len(self.listed) < self.listed_limit:
            self.listed.append(
                DroppedRow(
                    file=file,
                    row=examples.column("source_row")[i].as_py(),
                    reason="prompt_too_long",
                    detail=f"prompt is {length} tokens > max_prompt_length {self.max_prompt_length}",
                    chosen_index=examples.column("chosen_index")[i].as_py(),
                    rejected_index=examples.column("rejected_index")[i].as_py(),
                )
            )

    def statistics(self) -> dict[str, Any]:
        """The report's `prompt_tokens`: over the examples kept."""
        return {"min": self.shortest, "max": self.longest, "mean": self.total / self.kept}
