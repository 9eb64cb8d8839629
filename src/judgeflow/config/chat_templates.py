"""Chat templates a policy's prompts are rendered with (`data.chat_template`): open-instruct's
named ones (`--chat_template_name`, e6c3044), a Jinja file, or Jinja text.

Every engine renders a prompt through the tokenizer's `apply_chat_template` with the template
passed in (TRL's processing class, the evaluation's generator, verl's
`data.apply_chat_template_kwargs`, the SFT rows), so a template here gives the same text as
open-instruct's of the same name for every conversation; `tests/data/test_chat_templates.py`
holds each to the text open-instruct's renders. Unset, each engine uses the tokenizer's own.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHAT_TEMPLATES", "ChatTemplateError", "chat_template_text", "is_jinja"]


class ChatTemplateError(ValueError):
    """`data.chat_template` names no template, file or Jinja text."""


#: open-instruct's R1 instruction, said before the conversation of its `r1_simple_chat*`.
_R1_PREAMBLE = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant "
    "solves it. The assistant first thinks about the reasoning process in the mind and then "
    "provides the user with the answer. The reasoning process and answer are enclosed within "
    "<think> </think> and <answer> </answer> tags, respectively, i.e., <think> reasoning "
    "process here </think> <answer> answer here </answer>.\n\n"
)


def _turns_joined(separator: str, turn: str, *, end: str, opening: str = "") -> str:
    """Turns one after another, `separator` between them; after the last, `opening` when the
    assistant's turn is asked for, else `end`."""
    return (
        "{% for message in messages %}"
        f"{{% if not loop.first %}}{{{{ {separator!r} }}}}{{% endif %}}"
        f"{{{{ {turn} }}}}"
        "{% if loop.last %}"
        f"{{% if add_generation_prompt %}}{{{{ {opening!r} }}}}{{% else %}}{end}{{% endif %}}"
        "{% endif %}"
        "{% endfor %}"
    )


_ROLE_COLON = "message['role'].capitalize() + ': ' + message['content']"

CHAT_TEMPLATES: dict[str, str] = {
    # the turns' texts only, a space or a newline between them
    "simple_concat_with_space": _turns_joined(" ", "message['content']", end="{{ eos_token }}"),
    "simple_concat_with_new_line": _turns_joined("\n", "message['content']", end="{{ eos_token }}"),
    # "User: …" and "Assistant: …", a blank line between turns; no assistant opening
    "simple_chat": _turns_joined("\n\n", _ROLE_COLON, end="{{ eos_token }}"),
    # the R1 instruction, then the simple chat, each turn ending in a newline
    "r1_simple_chat": _R1_PREAMBLE
    + _turns_joined("\n\n", f"{_ROLE_COLON} + '\\n'", end="", opening="Assistant:"),
    "r1_simple_chat_postpend_think": _R1_PREAMBLE
    + _turns_joined("\n\n", f"{_ROLE_COLON} + '\\n'", end="", opening="Assistant: <think>"),
    # Tulu: <|role|> tags; an assistant turn ends with the EOS token
    "tulu": (
        "{% for message in messages %}"
        "{% if message['role'] in ('system', 'user') %}"
        "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}"
        "{% elif message['role'] == 'assistant' %}"
        "{{ '<|assistant|>\\n' + message['content'] + eos_token }}"
        "{% if not loop.last %}{{ '\\n' }}{% endif %}"
        "{% endif %}"
        "{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
        "{% endfor %}"
    ),
    # Zephyr: <|role|> tags, every turn ending with the EOS token
    "zephyr": (
        "{% for message in messages %}"
        "{% if message['role'] in ('system', 'user', 'assistant') %}"
        "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
        "{% endif %}"
        "{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
        "{% endfor %}"
    ),
}


def is_jinja(value: str) -> bool:
    """Jinja text rather than a name or a path: it has a tag or an expression."""
    return "{%" in value or "{{" in value


def chat_template_text(value: str | None) -> str | None:
    """The Jinja `data.chat_template` stands for: a name of `CHAT_TEMPLATES`, Jinja text, or a
    file holding it; None (unset, or `tokenizer`): the tokenizer's own."""
    if value is None or value == "tokenizer":
        return None
    if value in CHAT_TEMPLATES:
        return CHAT_TEMPLATES[value]
    if is_jinja(value):
        return value
    path = Path(value).expanduser()
    if not path.is_file():
        raise ChatTemplateError(
            f"data.chat_template={value!r} is no template of open-instruct's judgeflow has "
            f"({', '.join(sorted(CHAT_TEMPLATES))}), no file and no Jinja text; give one of "
            "those names, a .jinja file, or `tokenizer` for the tokenizer's own"
        )
    text = path.read_text(encoding="utf-8")
    if not is_jinja(text):
        raise ChatTemplateError(
            f"data.chat_template: {path} holds no Jinja ({{% … %}} or {{{{ … }}}})"
        )
    return text
