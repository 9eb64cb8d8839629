"""Shared helpers for the data tests: small files in tmp_path and a tiny offline tokenizer."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Callable[..., Path]:
    """Write rows (dicts, or raw strings written as-is) to a JSONL file under tmp_path."""

    def write(rows: Sequence[Any], name: str = "rows.jsonl") -> Path:
        path = tmp_path / name
        lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return path

    return write


@pytest.fixture
def write_parquet(tmp_path: Path) -> Callable[..., Path]:
    """Write rows to a parquet file under tmp_path (pyarrow infers nested structs)."""

    def write(rows: Sequence[dict[str, Any]], name: str = "rows.parquet") -> Path:
        path = tmp_path / name
        pq.write_table(pa.Table.from_pylist(list(rows)), path)
        return path

    return write


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Any:
    """A byte-level BPE tokenizer with ChatML specials, trained here (no network)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [
        "# Task Description\nYou are a professional expert in response quality evaluation.",
        "# Query\nWhat is the capital of France?\n# Response\nParis is the capital.",
        "Helpfulness, Accuracy, Clarity, Completeness, Relevance, Safety",
        "<think>Analysis process based on principles</think><score>4</score>",
    ]
    core.train_from_iterator(corpus, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_input_names=["input_ids", "attention_mask"],
    )
    tok.chat_template = CHATML_TEMPLATE
    return tok
