"""Batched chat generation: left padding, order kept, only new text returned, seeded sampling."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from judgeflow.engines.generate import Generator, HFGenerator, generate

PROMPTS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "Why is the sky blue? Explain it to a child, please. " * 4}],
    [{"role": "system", "content": "You are a judge."}, {"role": "user", "content": "Score it."}],
]


def _reference(model_dir: Path, chat: list[dict[str, str]], max_new_tokens: int) -> str:
    """Plain transformers on one unpadded prompt: what batching must reproduce."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt")
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


def test_greedy_batches_match_unbatched_reference_in_order(tiny_model: Path) -> None:
    expected = [_reference(tiny_model, chat, 12) for chat in PROMPTS]
    assert len(set(expected)) == len(expected)  # distinct replies, so order is really checked
    assert generate(tiny_model, PROMPTS, max_new_tokens=12, batch_size=2) == expected
    assert generate(tiny_model, PROMPTS, max_new_tokens=12, batch_size=1) == expected


def test_sampling_is_seeded_and_leaves_global_rng_alone(tiny_model: Path) -> None:
    generator: Generator = HFGenerator(tiny_model, batch_size=3)
    state = torch.random.get_rng_state()
    a = generator.generate(PROMPTS, max_new_tokens=12, temperature=1.0, seed=1)
    b = generator.generate(PROMPTS, max_new_tokens=12, temperature=1.0, seed=1)
    c = generator.generate(PROMPTS, max_new_tokens=12, temperature=1.0, seed=2)
    assert a == b and a != c
    assert torch.equal(state, torch.random.get_rng_state())


def test_replies_hold_no_prompt_or_chat_markers(tiny_model: Path) -> None:
    replies = generate(tiny_model, PROMPTS, max_new_tokens=6, temperature=1.0, top_p=0.9)
    assert len(replies) == len(PROMPTS)
    for reply in replies:
        assert "<|im_start|>" not in reply and "<|im_end|>" not in reply
        assert "Why is the sky blue" not in reply


def test_rejects_a_bad_batch_size(tiny_model: Path) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        HFGenerator(tiny_model, batch_size=0).generate(PROMPTS, max_new_tokens=2)


def test_a_reply_ends_where_a_stop_string_appears_the_string_kept(tiny_model: Path) -> None:
    """`grpo.stop_strings` in the evaluation: each greedy reply is the unstopped reply up to
    the token that completes the first stop string (transformers' stopping; open-instruct's
    vLLM keeps the string too), and a reply without it is unchanged."""
    full = HFGenerator(tiny_model, batch_size=2).generate(PROMPTS, max_new_tokens=24)
    stop = next(c for c in full[0][2:] if c.isalpha())  # a letter the first reply holds
    stopped = HFGenerator(tiny_model, batch_size=2, stop_strings=(stop,)).generate(
        PROMPTS, max_new_tokens=24
    )
    assert stopped != full
    longest_token = 16  # characters: the tiny tokenizer's pieces are shorter
    for whole, short in zip(full, stopped, strict=True):
        if stop not in whole:
            assert short == whole
            continue
        first = whole.index(stop)
        assert whole.startswith(short) and short.index(stop) == first, (whole, short)
        assert len(short) < first + len(stop) + longest_token, (whole, short)
