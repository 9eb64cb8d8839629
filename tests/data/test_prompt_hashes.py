"""Prompt hashes: the same prompt up to case, spacing and A/B order hashes alike; the template
parsers give back exactly what was rendered."""

from __future__ import annotations

import random
import unicodedata

import pytest

from judgeflow.data.grrm_template import parse_source_text, render_grrm_prompt
from judgeflow.data.prompt_hashes import (
    chat_prompt_hash,
    grrm_prompt_hash,
    judge_prompt_hash,
    judge_prompt_hashes,
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


def _normalised_in_full(text: str) -> str:
    """`normalise` by its definition, without the shortcut for plain ASCII text."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def test_the_ascii_shortcut_normalises_exactly_as_the_definition() -> None:
    every_ascii = [chr(c) for c in range(128)]
    texts = [f"{a}{c}{b}" for c in every_ascii for a in ("", "A", " ") for b in ("", "z", " ")]
    pieces = ["a", "B", " ", "  ", "\t", "\n", "\r\n", "\x0b", "\x1c", "\x1f", "\x00", "ß", "ﬁ",
              "\u00a0", "\u2003", "İ"]  # fmt: skip
    rng = random.Random(0)
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))) for _ in range(5000)]
    for text in texts:
        assert normalise(text) == _normalised_in_full(text), repr(text)


def test_batch_hashes_are_the_single_hashes() -> None:
    queries = ["Same?", "Same?", "same ?", "Ünï  cödé", "x"]
    first = ["A b", "tab\there", "ﬁne", "", "y"]
    second = ["z", "A b", "two  spaces", "ok", "Y"]
    assert judge_prompt_hashes(queries, first) == [
        judge_prompt_hash(q, [r]) for q, r in zip(queries, first, strict=True)
    ]
    assert judge_prompt_hashes(queries, first, second) == [
        judge_prompt_hash(q, [a, b]) for q, a, b in zip(queries, first, second, strict=True)
    ]


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
