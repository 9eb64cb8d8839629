"""The offline tiny model: builds without the network, is deterministic, and behaves like a chat model."""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from judgeflow.dev import build_tiny_model
from judgeflow.dev.tiny_model import TAG_TOKENS


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_builds_without_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("build_tiny_model tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    out = build_tiny_model(tmp_path / "m")
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} <= names


def test_shape_is_the_documented_tiny_qwen2(tiny_model: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    cfg = model.config
    assert cfg.model_type == "qwen2"
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (128, 2, 2)
    assert (cfg.num_key_value_heads, cfg.head_dim) == (1, 64)
    assert cfg.tie_word_embeddings and cfg.max_position_embeddings >= 4096
    assert cfg.vocab_size == len(tokenizer)
    assert 2000 <= len(tokenizer) <= 4096
    assert model.generation_config.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert model.generation_config.pad_token_id == tokenizer.convert_tokens_to_ids("<|endoftext|>")


def test_the_demo_page_describes_the_tiny_model_as_built(tiny_model: Path) -> None:
    config = AutoModelForCausalLM.from_pretrained(tiny_model).config
    page = Path(__file__).resolve().parents[2] / "docs/getting-started/demo.md"
    readme = " ".join(page.read_text().split())
    said = (
        f"A random-init Qwen2 of {config.num_hidden_layers} layers and hidden size "
        f"{config.hidden_size}"
    )
    assert said in readme, said
    assert f"its {config.vocab_size:,}-token vocabulary" in readme, config.vocab_size


def test_same_seed_same_files_other_seed_other_weights(tiny_model: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again", seed=0)
    other = build_tiny_model(tmp_path / "other", seed=1)
    for name in sorted(p.name for p in tiny_model.iterdir()):
        assert _sha256(tiny_model / name) == _sha256(again / name), name
    assert _sha256(tiny_model / "model.safetensors") != _sha256(other / "model.safetensors")
    assert _sha256(tiny_model / "tokenizer.json") == _sha256(other / "tokenizer.json")


def test_tokenizer_round_trips_and_keeps_tags_whole(tiny_model: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    text = "  Grüße, 你好! <think>7 x 8 = 56</think><score>3</score>\n\tend "
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    for tag in TAG_TOKENS:
        assert len(tokenizer(tag, add_special_tokens=False)["input_ids"]) == 1, tag
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.model_input_names == ["input_ids", "attention_mask"]
    # Tags are ordinary tokens: skipping special tokens drops ChatML markers, not the verdict.
    wrapped = tokenizer("<|im_start|><score>1</score><|im_end|>")["input_ids"]
    assert tokenizer.decode(wrapped, skip_special_tokens=True) == "<score>1</score>"


def test_chat_template_is_chatml(tiny_model: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    chat = [{"role": "system", "content": "Be fair."}, {"role": "user", "content": "Hi"}]
    assert tokenizer.apply_chat_template(chat, tokenize=False) == (
        "<|im_start|>system\nBe fair.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    )
    prompt = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")
    ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True)
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")


def test_model_generates_new_tokens(tiny_model: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    enc = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hello"}], add_generation_prompt=True, return_tensors="pt"
    )
    with torch.inference_mode():
        out = model.generate(enc, max_new_tokens=8, do_sample=False)
    assert out.shape[0] == 1 and enc.shape[1] < out.shape[1] <= enc.shape[1] + 8
    assert torch.isfinite(model(enc).logits).all()
