"""SFT rows rendered with `data.chat_template`, tokenized for LLaMA-Factory (`tokenized_path`).

LLaMA-Factory renders with templates of its own, cut from a chat template into text slots
(`parse_template`), which cannot hold every Jinja template (open-instruct's
`r1_simple_chat_postpend_think` has no slot for the assistant's text). So with a chat template
the rows are rendered here, with the tokenizer's `apply_chat_template` and the template passed
in, exactly as GRPO and the evaluation render a prompt: each row trains on its last assistant
turn, the conversation before it the prompt (`add_generation_prompt=True`, the text GRPO asks),
labels on the reply only. The reply is what the template renders after that prompt; where the
template's prompt is not the start of its rendered conversation (the R1 templates end the prompt
in `Assistant: <think>`), the reply is the assistant's text and the EOS token, less what the
prompt already said of it (a reply `<think>…` after a prompt ending in `<think>`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Label of a token the loss ignores (the prompt's), as LLaMA-Factory and transformers use it.
IGNORE_INDEX = -100


@dataclass(frozen=True)
class TemplatedSft:
    """The tokenized rows (a `datasets` folder), how many, and what did not fit `cutoff_len`."""

    path: Path
    rows: int
    truncated: int  # replies cut at cutoff_len
    dropped: int  # rows whose prompt alone is cutoff_len tokens or more


def prompt_and_reply(
    tokenizer: Any, messages: Sequence[dict[str, str]], chat_template: str
) -> tuple[str, str]:
    """A row's prompt (everything before its last assistant turn, the assistant's turn asked for)
    and the reply trained on, as text."""
    turns = [{"role": m["role"], "content": m["content"]} for m in messages]
    last = max((i for i, t in enumerate(turns) if t["role"] == "assistant"), default=None)
    if last is None or last == 0:
        raise ValueError("an SFT row needs a prompt and an assistant turn after it")

    def render(upto: int, asked: bool) -> str:
        text = tokenizer.apply_chat_template(
            turns[:upto], chat_template=chat_template, add_generation_prompt=asked, tokenize=False
        )
        return str(text)

    prompt, whole = render(last, True), render(last + 1, False)
    if whole.startswith(prompt) and len(whole) > len(prompt):
        return prompt, whole[len(prompt) :]
    content = turns[last]["content"]
    said = _overlap(prompt, content)  # the prompt already opened the reply (`<think>`)
    return prompt, content[said:] + (tokenizer.eos_token or "")


def _overlap(prompt: str, reply: str) -> int:
    """How many characters (two or more) the reply starts with that the prompt ends with."""
    for size in range(min(len(prompt), len(reply)), 1, -1):
        if prompt.endswith(reply[:size]):
            return size
    return 0


def tokenize_rows(
    messages_parquet: str | Path,
    tokenizer_path: str,
    chat_template: str,
    cutoff_len: int,
    out_dir: str | Path,
) -> TemplatedSft:
    """Every row of a `messages` parquet as `input_ids` / `attention_mask` / `labels`, saved
    with `datasets` to `out_dir` (a `train` split) for LLaMA-Factory's `tokenized_path`."""
    import pyarrow.parquet as pq
    from datasets import Dataset, DatasetDict
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    columns: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": [], "labels": []}
    truncated = dropped = 0
    for row in pq.read_table(str(messages_parquet), columns=["messages"]).to_pylist():
        prompt, reply = prompt_and_reply(tokenizer, row["messages"], chat_template)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        reply_ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
        if len(prompt_ids) >= cutoff_len:
            dropped += 1
            continue
        if len(prompt_ids) + len(reply_ids) > cutoff_len:
            reply_ids = reply_ids[: cutoff_len - len(prompt_ids)]
            truncated += 1
        ids = prompt_ids + reply_ids
        columns["input_ids"].append(ids)
        columns["attention_mask"].append([1] * len(ids))
        columns["labels"].append([IGNORE_INDEX] * len(prompt_ids) + reply_ids)
    if not columns["input_ids"]:
        raise ValueError(
            f"{messages_parquet}: every row's prompt is sft.cutoff_len={cutoff_len} tokens or "
            "longer under data.chat_template: raise sft.cutoff_len"
        )
    out = Path(out_dir)
    DatasetDict({"train": Dataset.from_dict(columns)}).save_to_disk(str(out))
    return TemplatedSft(out, len(columns["input_ids"]), truncated, dropped)
