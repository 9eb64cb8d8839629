"""`data.chat_template`: open-instruct's named templates render as open-instruct's own do.

The expected texts were worked out with open-instruct's `CHAT_TEMPLATES` (e6c3044,
`open_instruct/dataset_transformation.py`) through the same `apply_chat_template`, on two
conversations: a system and a user turn with the assistant's turn asked for (a prompt), and two
exchanges without (an SFT row). `<|im_end|>` is the tiny tokenizer's EOS token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from judgeflow.config.chat_templates import CHAT_TEMPLATES, ChatTemplateError, chat_template_text

R1 = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant "
    "solves it. The assistant first thinks about the reasoning process in the mind and then "
    "provides the user with the answer. The reasoning process and answer are enclosed within "
    "<think> </think> and <answer> </answer> tags, respectively, i.e., <think> reasoning process "
    "here </think> <answer> answer here </answer>.\n\n"
)
PROMPT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]
EXCHANGES = [
    {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
    {"role": "user", "content": "Sum 1 2"}, {"role": "assistant", "content": "3"},
]  # fmt: skip
R1_EXCHANGES = "User: Hi\n\n\nAssistant: Hello\n\n\nUser: Sum 1 2\n\n\nAssistant: 3\n"
EXPECTED = {
    "simple_concat_with_space": ("Be brief. What is 2+2?", "Hi Hello Sum 1 2 3<|im_end|>"),
    "simple_concat_with_new_line": (
        "Be brief.\nWhat is 2+2?",
        "Hi\nHello\nSum 1 2\n3<|im_end|>",
    ),
    "simple_chat": (
        "System: Be brief.\n\nUser: What is 2+2?",
        "User: Hi\n\nAssistant: Hello\n\nUser: Sum 1 2\n\nAssistant: 3<|im_end|>",
    ),
    "r1_simple_chat": (
        R1 + "System: Be brief.\n\n\nUser: What is 2+2?\nAssistant:",
        R1 + R1_EXCHANGES,
    ),
    "r1_simple_chat_postpend_think": (
        R1 + "System: Be brief.\n\n\nUser: What is 2+2?\nAssistant: <think>",
        R1 + R1_EXCHANGES,
    ),
    "tulu": (
        "<|system|>\nBe brief.\n<|user|>\nWhat is 2+2?\n<|assistant|>\n",
        "<|user|>\nHi\n<|assistant|>\nHello<|im_end|>\n<|user|>\nSum 1 2\n<|assistant|>\n3<|im_end|>",
    ),
    "zephyr": (
        "<|system|>\nBe brief.<|im_end|>\n<|user|>\nWhat is 2+2?<|im_end|>\n<|assistant|>\n",
        "<|user|>\nHi<|im_end|>\n<|assistant|>\nHello<|im_end|>\n<|user|>\nSum 1 2<|im_end|>\n"
        "<|assistant|>\n3<|im_end|>\n",
    ),
}


@pytest.fixture(scope="module")
def tokenizer(tiny_model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model))


def test_every_named_template_is_worked_out() -> None:
    assert set(EXPECTED) == set(CHAT_TEMPLATES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_named_template_renders_as_open_instructs(tokenizer: Any, name: str) -> None:
    template = chat_template_text(name)
    prompt, row = (
        tokenizer.apply_chat_template(
            turns, chat_template=template, tokenize=False, add_generation_prompt=asked
        )
        for turns, asked in ((PROMPT, True), (EXCHANGES, False))
    )
    assert (prompt, row) == EXPECTED[name]


def test_a_template_is_a_name_a_file_or_jinja(tmp_path: Path) -> None:
    assert chat_template_text(None) is None and chat_template_text("tokenizer") is None
    jinja = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    assert chat_template_text(jinja) == jinja
    file = tmp_path / "mine.jinja"
    file.write_text(jinja)
    assert chat_template_text(str(file)) == jinja
    with pytest.raises(ChatTemplateError, match="no template of open-instruct's judgeflow has"):
        chat_template_text("olmo_thinker")
    file.write_text("plain text")
    with pytest.raises(ChatTemplateError, match="holds no Jinja"):
        chat_template_text(str(file))


def test_an_sft_row_trains_on_its_last_reply_asked_as_grpo_asks(tokenizer: Any) -> None:
    from judgeflow.engines.templated_sft import prompt_and_reply

    row = [{"role": "user", "content": "Which is an animal: cat or cup?"},
           {"role": "assistant", "content": "<think>cat</think><answer>cat</answer>"}]  # fmt: skip
    prompt, reply = prompt_and_reply(tokenizer, row, CHAT_TEMPLATES["tulu"])
    assert prompt == "<|user|>\nWhich is an animal: cat or cup?\n<|assistant|>\n"
    assert reply == "<think>cat</think><answer>cat</answer><|im_end|>"  # what tulu renders next
    # the R1 prompt ends inside the reply (`Assistant: <think>`): the reply goes on from there
    prompt, reply = prompt_and_reply(
        tokenizer, row, CHAT_TEMPLATES["r1_simple_chat_postpend_think"]
    )
    assert prompt.endswith("User: Which is an animal: cat or cup?\nAssistant: <think>")
    assert reply == "cat</think><answer>cat</answer><|im_end|>"
    # several exchanges: the earlier reply is part of the prompt, the last one is trained on
    prompt, reply = prompt_and_reply(tokenizer, [*EXCHANGES], CHAT_TEMPLATES["tulu"])
    assert (
        prompt.endswith("Hello<|im_end|>\n<|user|>\nSum 1 2\n<|assistant|>\n")
        and reply == "3<|im_end|>"
    )
    with pytest.raises(ValueError, match="needs a prompt and an assistant turn"):
        prompt_and_reply(tokenizer, row[:1], CHAT_TEMPLATES["tulu"])


def test_sft_settings_that_tokenized_rows_would_ignore_are_refused() -> None:
    from judgeflow.config import ConfigError, load_config

    tiny = ["sft.enabled=true", "sft.source=sft.jsonl"]
    with pytest.raises(ConfigError, match="sft.extra sets neat_packing, packing, which LLaMA"):
        load_config("rlvr", overrides=[*tiny, "sft.extra={packing: true, neat_packing: true}"])
    load_config(
        "rlvr", overrides=[*tiny, "data.chat_template=tokenizer", "sft.extra={packing: true}"]
    )
