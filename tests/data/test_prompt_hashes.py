"""Prompt hashes: the same prompt up to case, spacing and A/B order hashes alike; the template
parsers give back exactly what was rendered."""

from __future__ import annotations

import pytest

from judgeflow.data.grrm_template import parse_source_text, render_grrm_prompt
from judgeflow.data.prompt_hashes import (
    chat_prompt_hash,
    grrm_prompt_hash,
    judge_prompt_hash,
    normalise,
    row_prompt_hash,
    text_prompt_hash,
)
from judgeflow.data.templates import (
    parse_pairwise,
    parse_pointwise,
    render_pairwise,
    render_pointwise,
)

TRICKY = ["plain", "{query} {response_a}", "line\n# Response\nagain", "", "ünïcödé ﬁ  \t x"]


@pytest.mark.parametrize("query", TRICKY)
@pytest.mark.parametrize("response", ["ok", "{response}", "two\n\nlines"])
def test_pointwise_prompt_parses_back(query: str, response: str) -> None:
    parsed = parse_pointwise(render_pointwise(query, response))
    assert parsed is not None
    assert render_pointwise(*parsed) == render_pointwise(query, response)
    if "# Response" not in query:  # the only ambiguous case: a query quoting the template
        assert parsed == (query, response)


@pytest.mark.parametrize("query", TRICKY)
def test_pairwise_prompt_parses_back(query: str) -> None:
    assert parse_pairwise(render_pairwise(query, "first {x}", "second\n")) == (
        query,
        "first {x}",
        "second\n",
    )


def test_other_text_is_not_a_judge_prompt() -> None:
    assert parse_pointwise("What is 2+2?") is None
    assert parse_pairwise(render_pointwise("q", "r")) is None
    assert parse_pointwise(render_pairwise("q", "a", "b")) is None


def test_normalisation_ignores_case_spacing_and_compatibility_forms() -> None:
    assert normalise("  Hello\tWORLD \n") == "hello world"
    assert normalise("ﬁne") == "fine"  # NFKC folds the ligature


def test_judge_hash_is_order_and_case_insensitive_but_content_sensitive() -> None:
    h = judge_prompt_hash("What is 2+2?", ["Four.", "Five."])
    assert judge_prompt_hash("what  is 2+2?", ["five.", "FOUR."]) == h
    assert judge_prompt_hash("What is 2+2?", ["Four."]) != h  # pointwise is another prompt
    assert judge_prompt_hash("What is 2+3?", ["Four.", "Five."]) != h
    assert len(h) == 16 and int(h, 16) >= 0


def test_kinds_do_not_collide() -> None:
    assert grrm_prompt_hash("x") != text_prompt_hash("x") != judge_prompt_hash("x", [])


def test_chat_hash_of_a_rendered_judge_prompt_is_its_judge_hash() -> None:
    a_first = [{"role": "user", "content": render_pairwise("Q", "a", "b")}]
    b_first = [
        {"role": "system", "content": "be fair"},
        {"role": "user", "content": render_pairwise("q", "B", "A")},
        {"role": "assistant", "content": "<better>A</better>"},
    ]
    assert chat_prompt_hash(a_first) == chat_prompt_hash(b_first) == judge_prompt_hash("q", "ab")
    free = [{"role": "user", "content": "Rate this: Hello"}]
    assert chat_prompt_hash(free) == text_prompt_hash("rate this:  hello")


def test_grrm_source_text_parses_back_and_hashes_the_source() -> None:
    source = "Say ```hi``` to\nthe world"
    prompt = render_grrm_prompt("English", "German", source, ["Hallo", "Hi", "Servus"])
    assert parse_source_text(prompt) == source
    assert parse_source_text("Translate this") is None
    row = {"prompt": [{"role": "user", "content": prompt}]}
    assert row_prompt_hash("grrm", row) == grrm_prompt_hash(source)
    stored = {**row, "extra_info": {"prompt_hash": "0123456789abcdef"}}
    assert row_prompt_hash("grrm", stored) == "0123456789abcdef"
