"""ifeval_old checks: each gives the verdict open-instruct's if_functions.py gives, quirks included.

Every expectation below was worked out from open-instruct's code (open_instruct/if_functions.py
and IFEvalVerifierOld in open_instruct/ground_truth_utils.py). Where their answer is surprising,
a comment says so: those cases pin the quirk on purpose, since a reward must equal theirs.
"""

from __future__ import annotations

import copy
import inspect
import json
import random
import re
import sys
import types
from typing import Any

import pytest

from judgeflow.rewards.rlvr import if_functions as ifx

# func_name -> keyword names, exactly as open-instruct spells them (the dataset passes these).
SIGNATURES: dict[str, tuple[str, ...]] = {
    "verify_keywords": ("text", "keyword_list"),
    "verify_keyword_frequency": ("text", "word", "N"),
    "validate_forbidden_words": ("text", "forbidden_words"),
    "verify_letter_frequency": ("text", "letter", "N"),
    "validate_response_language": ("text", "language"),
    "verify_paragraph_count": ("text", "N"),
    "validate_word_constraint": ("text", "N", "quantifier"),
    "verify_sentence_constraint": ("text", "N", "quantifier"),
    "validate_paragraphs": ("text", "N", "first_word", "i"),
    "verify_postscript": ("text", "postscript_marker"),
    "validate_placeholders": ("text", "N"),
    "verify_bullet_points": ("text", "N"),
    "validate_title": ("text",),
    "validate_choice": ("text", "options"),
    "validate_highlighted_sections": ("text", "N"),
    "validate_sections": ("text", "N", "section_splitter"),
    "validate_json_format": ("text",),
    "validate_repeat_prompt": ("text", "original_prompt"),
    "validate_two_responses": ("text",),
    "validate_uppercase": ("text",),
    "validate_lowercase": ("text",),
    "validate_frequency_capital_words": ("text", "N", "quantifier"),
    "validate_end": ("text", "end_phrase"),
    "validate_quotation": ("text",),
    "validate_no_commas": ("text",),
}


def words(n: int, word: str = "w") -> str:
    return " ".join([word] * n)


# func_name -> [(text, kwargs, expected)]; the language check has its own tests (needs a stub).
CASES: dict[str, list[Any]] = {
    "verify_keywords": [
        pytest.param("I love Python and cats.", {"keyword_list": ["python", "CATS"]}, True),
        pytest.param("I love Python.", {"keyword_list": ["python", "dogs"]}, False),
        # quirk: a substring test, so "cat" is found inside "concatenate"
        pytest.param("Let us concatenate.", {"keyword_list": ["cat"]}, True, id="substring"),
        pytest.param("anything", {"keyword_list": []}, True, id="no-keywords"),
    ],
    "verify_keyword_frequency": [
        pytest.param("The cat saw a cat; CAT!", {"word": "cat", "N": 3}, True),
        pytest.param("The cat saw a cat; CAT!", {"word": "Cat", "N": 2}, False),
        pytest.param("cats and a cat", {"word": "cat", "N": 1}, True, id="whole-tokens"),
        # quirk: tokens are \w+ runs, so the apostrophe splits "don't" into "don" and "t"
        pytest.param("don't stop", {"word": "don", "N": 1}, True, id="apostrophe-splits"),
        # quirk: "_" is a word character, so "snake_case" is one token
        pytest.param("snake_case snake", {"word": "snake", "N": 1}, True, id="underscore"),
        # quirk: a word with a space can never match a token, so only N=0 passes
        pytest.param("ice cream, ice cream", {"word": "ice cream", "N": 2}, False, id="phrase"),
        pytest.param("ice cream, ice cream", {"word": "ice cream", "N": 0}, True, id="phrase-0"),
    ],
    "validate_forbidden_words": [
        pytest.param("A clean answer.", {"forbidden_words": ["bad", "evil"]}, True),
        pytest.param("This is BAD.", {"forbidden_words": ["bad"]}, False, id="ignores-case"),
        # quirk: a substring test, so "bad" is found inside "badge"
        pytest.param("Wear a badge.", {"forbidden_words": ["bad"]}, False, id="substring"),
        pytest.param("anything", {"forbidden_words": []}, True, id="none-forbidden"),
    ],
    "verify_letter_frequency": [
        pytest.param("hello world", {"letter": "l", "N": 3}, True),
        pytest.param("hello world", {"letter": "l", "N": 2}, False),
        # quirk: case-sensitive, so "L" is not an "l"
        pytest.param("Lol", {"letter": "l", "N": 1}, True, id="case-sensitive"),
        pytest.param("Lol", {"letter": "l", "N": 2}, False, id="case-sensitive-fails"),
        pytest.param("", {"letter": "x", "N": 0}, True, id="zero"),
    ],
    "verify_paragraph_count": [
        pytest.param("First\n* * *\nSecond", {"N": 2}, True),
        pytest.param("First\n* * *\nSecond", {"N": 3}, False),
        pytest.param("Just one paragraph.", {"N": 1}, True, id="no-divider-is-one"),
        pytest.param("First\n* * *\n  \n* * *\nThird", {"N": 3}, False, id="blank-paragraph"),
        pytest.param("* * *\nFirst\n* * *\nSecond", {"N": 3}, False, id="leading-divider"),
        pytest.param("* * *\nFirst\n* * *\nSecond", {"N": 2}, False, id="leading-divider-2"),
        pytest.param("First\n* * *\n", {"N": 2}, False, id="trailing-divider"),
        # quirk: the divider may sit inside a line
        pytest.param("First * * * Second", {"N": 2}, True, id="inline-divider"),
        pytest.param("First\n***\nSecond", {"N": 1}, True, id="stars-without-spaces"),
        pytest.param("", {"N": 1}, False, id="empty"),
        pytest.param("", {"N": 0}, False, id="empty-is-not-zero"),
    ],
    "validate_word_constraint": [
        pytest.param("one two three", {"N": 3, "quantifier": "at least"}, True),
        pytest.param("one two", {"N": 3, "quantifier": "at least"}, False),
        pytest.param("one two three", {"N": 3, "quantifier": "at most"}, True),
        pytest.param("a b c d", {"N": 3, "quantifier": "at most"}, False),
        pytest.param(words(11), {"N": 10, "quantifier": "around"}, True, id="around-10-11"),
        pytest.param(words(12), {"N": 10, "quantifier": "around"}, False, id="around-10-12"),
        # "around" allows at least 1 even where 10% rounds to 0
        pytest.param(words(6), {"N": 5, "quantifier": "around"}, True, id="around-5-6"),
        pytest.param(words(7), {"N": 5, "quantifier": "around"}, False, id="around-5-7"),
        # quirk: round(25 * 0.1) == round(2.5) == 2 (round half to even), so 28 is too far
        pytest.param(words(27), {"N": 25, "quantifier": "around"}, True, id="around-25-27"),
        pytest.param(words(28), {"N": 25, "quantifier": "around"}, False, id="around-25-28"),
        # 15 * 0.1 is 1.5000000000000002 in floats, which rounds to 2
        pytest.param(words(17), {"N": 15, "quantifier": "around"}, True, id="around-15-17"),
        # quirk: an unknown or differently-cased quantifier fails instead of raising
        pytest.param("a b c", {"N": 3, "quantifier": "exactly"}, False, id="unknown"),
        pytest.param("a b c", {"N": 3, "quantifier": "At least"}, False, id="cased"),
        # words are whitespace-separated tokens: a lone comma counts, newlines separate
        pytest.param("Hello , world", {"N": 3, "quantifier": "at least"}, True, id="punct"),
        pytest.param("a\nb\tc", {"N": 3, "quantifier": "at least"}, True, id="any-space"),
    ],
    "verify_sentence_constraint": [
        pytest.param("One. Two! Three?", {"N": 3, "quantifier": "at least"}, True),
        pytest.param("One. Two.", {"N": 3, "quantifier": "at least"}, False),
        pytest.param("One. Two.", {"N": 2, "quantifier": "at most"}, True),
        pytest.param("One. Two. Three.", {"N": 2, "quantifier": "at most"}, False),
        # "around" is within 1 sentence whatever N is
        pytest.param("One. Two.", {"N": 3, "quantifier": "around"}, True, id="around-3-2"),
        pytest.param("One.", {"N": 3, "quantifier": "around"}, False, id="around-3-1"),
        pytest.param(
            " ".join(["S."] * 17), {"N": 20, "quantifier": "around"}, False, id="around-20-17"
        ),
        # quirk: the count is breaks + 1, so a space after the last stop adds an empty sentence
        pytest.param("One. Two. ", {"N": 3, "quantifier": "at least"}, True, id="trailing-space"),
        # quirk: empty text and text without any stop are one sentence
        pytest.param("", {"N": 1, "quantifier": "at least"}, True, id="empty-is-one"),
        pytest.param("no stop at all", {"N": 1, "quantifier": "at most"}, True, id="no-stop"),
        # a break needs whitespace right after the stop
        pytest.param("One.Two.Three.", {"N": 1, "quantifier": "at most"}, True, id="no-space"),
        pytest.param("One.\nTwo", {"N": 2, "quantifier": "at least"}, True, id="newline"),
        # only the first of several spaces is a break
        pytest.param("One.   Two", {"N": 2, "quantifier": "at most"}, True, id="spaces"),
        # titles like "Mr." and abbreviations like "e.g." do not end a sentence
        pytest.param(
            "I met Mr. Smith today. He waved.", {"N": 2, "quantifier": "at most"}, True, id="mr"
        ),
        pytest.param(
            "Use tools, e.g. hammers. Then stop.", {"N": 2, "quantifier": "at most"}, True, id="eg"
        ),
        # quirk: any capitalised two-letter word before the stop blocks the break ("Ok.")
        pytest.param("I said Ok. Then I left.", {"N": 1, "quantifier": "at most"}, True, id="ok"),
        # quirk: "x.y" before a "?" or "!" blocks the break too
        pytest.param("Is it a.b? Yes.", {"N": 1, "quantifier": "at most"}, True, id="a.b?"),
        pytest.param("One. Two.", {"N": 2, "quantifier": "exactly"}, False, id="unknown"),
    ],
    "validate_paragraphs": [
        pytest.param(
            "Intro.\n\nSecond starts here.", {"N": 2, "first_word": "Second", "i": 2}, True
        ),
        pytest.param(
            "Intro.\n\nSecond starts here.", {"N": 2, "first_word": "Third", "i": 2}, False
        ),
        pytest.param(
            "Intro.\n\nSecond.", {"N": 3, "first_word": "Intro", "i": 1}, False, id="wrong-N"
        ),
        # quirk: a prefix test, so "Therefore" starts with "The"
        pytest.param("A\n\nTherefore.", {"N": 2, "first_word": "The", "i": 2}, True, id="prefix"),
        pytest.param("A\n\nsecond", {"N": 2, "first_word": "Second", "i": 2}, False, id="case"),
        # quirk: the text is not stripped, so a trailing blank line is an empty paragraph
        pytest.param("A\n\nB\n\n", {"N": 2, "first_word": "A", "i": 1}, False, id="trail"),
        pytest.param("A\n\nB\n\n", {"N": 3, "first_word": "A", "i": 1}, True, id="trail-3"),
        # a third newline stays in the next paragraph, which is stripped before the test
        pytest.param("A\n\n\nB", {"N": 2, "first_word": "B", "i": 2}, True, id="three-newlines"),
        pytest.param("A\nB", {"N": 1, "first_word": "A", "i": 1}, True, id="one-newline"),
        # quirk: i=0 reaches the last paragraph (Python's index -1)
        pytest.param("A\n\nB", {"N": 2, "first_word": "B", "i": 0}, True, id="i-0-is-last"),
    ],
    "verify_postscript": [
        pytest.param("Main text.\n\nP.S. Call me.", {"postscript_marker": "P.S."}, True),
        pytest.param("Main text.", {"postscript_marker": "P.S."}, False),
        pytest.param("Main.\nP.S.", {"postscript_marker": "P.S."}, False, id="marker-alone"),
        pytest.param("Main.\nP.S.  \n", {"postscript_marker": "P.S."}, False, id="blank-after"),
        pytest.param("Main.\np.s. hi", {"postscript_marker": "P.S."}, False, id="case"),
        # quirk: the marker need not be at the end, nor start a word
        pytest.param("P.S. first, then a body.", {"postscript_marker": "P.S."}, True, id="start"),
        pytest.param("Ask for HELP.S. now", {"postscript_marker": "P.S."}, True, id="in-a-word"),
    ],
    "validate_placeholders": [
        pytest.param("Dear [name], see you at [place].", {"N": 2}, True),
        pytest.param("Dear [name], see you at [place].", {"N": 3}, False),
        # quirk: empty brackets are placeholders
        pytest.param("[] and []", {"N": 2}, True, id="empty-brackets"),
        pytest.param("[start\nend]", {"N": 1}, False, id="not-across-lines"),
        pytest.param("[[a]]", {"N": 1}, True, id="nested-is-one"),
        pytest.param("[[a]]", {"N": 2}, False, id="nested-not-two"),
        pytest.param("[a] ] [b", {"N": 2}, False, id="unbalanced"),
        pytest.param("", {"N": 0}, True, id="zero"),
    ],
    "verify_bullet_points": [
        pytest.param("* one\n* two\n- three", {"N": 3}, True),
        pytest.param("* one\n* two\n- three", {"N": 2}, False),
        pytest.param("  * one\n\t- two\nplain", {"N": 2}, True, id="indented"),
        # quirk: any line starting with * or - counts: bold text, a rule, a negative number
        pytest.param("**Bold**\n---\n-5 degrees", {"N": 3}, True, id="bold-rule-negative"),
        pytest.param("1. one\n2. two\n• three", {"N": 0}, True, id="numbers-and-dots"),
        pytest.param("a * b\na - b", {"N": 0}, True, id="mid-line"),
    ],
    "validate_title": [
        pytest.param("<<My Title>>\nBody", {}, True),
        pytest.param("No title here", {}, False),
        # quirk: an empty title counts
        pytest.param("<<>>", {}, True, id="empty-title"),
        pytest.param("<<My\nTitle>>", {}, False, id="not-across-lines"),
        pytest.param("<Title>", {}, False, id="single-brackets"),
        pytest.param("Body <<<x>>> end", {}, True, id="triple"),
        pytest.param(">>backwards<<", {}, False, id="backwards"),
    ],
    "validate_choice": [
        pytest.param("My answer is yes.", {"options": ["yes", "no"]}, True),
        pytest.param("Maybe.", {"options": ["yes", "no"]}, False),
        pytest.param("YES", {"options": ["yes"]}, False, id="case-sensitive"),
        # quirk: a substring test, so "A" is found in "Apple" and "no" in "know"
        pytest.param("I choose Apple", {"options": ["A", "B"]}, True, id="substring"),
        pytest.param("I don't know", {"options": ["yes", "no"]}, True, id="substring-no"),
    ],
    "validate_highlighted_sections": [
        pytest.param("This is *important* and *urgent*.", {"N": 2}, True),
        pytest.param("This is *important* and *urgent*.", {"N": 3}, False),
        # quirk: "**bold**" is two empty highlights ("**" twice), not one
        pytest.param("**bold**", {"N": 2}, True, id="bold-is-two"),
        pytest.param("**bold**", {"N": 3}, False, id="bold-not-three"),
        pytest.param("*start\nend*", {"N": 1}, False, id="not-across-lines"),
        pytest.param("*a* *b", {"N": 2}, False, id="odd-star"),
        pytest.param("* one\n* two", {"N": 1}, False, id="bullets"),
        pytest.param("", {"N": 0}, True, id="zero"),
    ],
    "validate_sections": [
        pytest.param("SECTION 1 a\nSECTION 2 b", {"N": 2, "section_splitter": "SECTION"}, True),
        pytest.param("SECTION 1 a\nSECTION 2 b", {"N": 3, "section_splitter": "SECTION"}, False),
        # text before the first splitter is a section of its own
        pytest.param(
            "Preface\nSECTION 1 a\nSECTION 2 b",
            {"N": 3, "section_splitter": "SECTION"},
            True,
            id="preface",
        ),
        # quirk: only an exactly empty lead-in is dropped; a newline before it is a section
        pytest.param(
            "\nSECTION 1 a\nSECTION 2 b",
            {"N": 3, "section_splitter": "SECTION"},
            True,
            id="newline-lead-in",
        ),
        pytest.param(
            "Section 1 a\nSection 2 b", {"N": 1, "section_splitter": "SECTION"}, True, id="case"
        ),
        pytest.param("Plain text", {"N": 1, "section_splitter": "SECTION"}, True, id="none"),
        pytest.param("", {"N": 0, "section_splitter": "SECTION"}, True, id="empty"),
        # quirk: a splitter at the very end makes an empty last section
        pytest.param("SECTION 1 a SECTION", {"N": 2, "section_splitter": "SECTION"}, True),
    ],
    "validate_json_format": [
        pytest.param('{"a": 1}', {}, True),
        pytest.param('{"a": 1', {}, False),
        # quirk: any JSON value passes, bare numbers and strings and NaN included
        pytest.param("42", {}, True, id="number"),
        pytest.param('"text"', {}, True, id="string"),
        pytest.param("NaN", {}, True, id="nan"),
        pytest.param("  [1, 2]\n", {}, True, id="surrounding-space"),
        pytest.param('```json\n{"a": 1}\n```', {}, False, id="code-fence"),
        pytest.param("", {}, False, id="empty"),
        pytest.param("plain text", {}, False, id="text"),
    ],
    "validate_repeat_prompt": [
        pytest.param("Write a poem. Roses...", {"original_prompt": "Write a poem."}, True),
        pytest.param("Sure! Write a poem.", {"original_prompt": "Write a poem."}, False),
        pytest.param("write a poem.", {"original_prompt": "Write a poem."}, False, id="case"),
        pytest.param(" Write a poem.", {"original_prompt": "Write a poem."}, False, id="space"),
    ],
    "validate_two_responses": [
        pytest.param("Answer one.\n******\nAnswer two.", {}, True),
        pytest.param("Same\n******\nSame ", {}, False, id="same-after-strip"),
        pytest.param("Only one answer.", {}, False, id="no-divider"),
        pytest.param("a ****** b ****** c", {}, False, id="two-dividers"),
        # quirk: 12 stars in a row are two dividers; 7 stars are one, the 7th joins response 2
        pytest.param("a ************ b", {}, False, id="twelve-stars"),
        pytest.param("a ******* b", {}, True, id="seven-stars"),
        # quirk: an empty second response passes, as long as it differs from the first
        pytest.param("Answer ******", {}, True, id="empty-second"),
        pytest.param("******", {}, False, id="both-empty"),
    ],
    "validate_uppercase": [
        pytest.param("HELLO WORLD!", {}, True),
        pytest.param("Hello", {}, False),
        # quirk: text without letters, and non-English capitals, pass
        pytest.param("123 !?", {}, True, id="no-letters"),
        pytest.param("", {}, True, id="empty"),
        pytest.param("ПРИВЕТ", {}, True, id="cyrillic"),
        pytest.param("STRASSE ß", {}, False, id="eszett"),
    ],
    "validate_lowercase": [
        pytest.param("hello world", {}, True),
        pytest.param("Hello", {}, False),
        pytest.param("123 !?", {}, True, id="no-letters"),
        pytest.param("привет", {}, True, id="cyrillic"),
    ],
    "validate_frequency_capital_words": [
        pytest.param("The USA and the UK signed.", {"N": 2, "quantifier": "at least"}, True),
        pytest.param("The USA and the UK signed.", {"N": 3, "quantifier": "at least"}, False),
        pytest.param("NASA SPACE X", {"N": 2, "quantifier": "at most"}, False),
        pytest.param("NASA SPACE X", {"N": 3, "quantifier": "at most"}, True),
        # quirk: single capital letters such as "I" and "A" are all-capital words
        pytest.param("I saw A cat", {"N": 2, "quantifier": "at least"}, True, id="letters"),
        # an apostrophe or hyphen ends a word; a digit, "_" or a lower-case letter joins it
        pytest.param("USA's WELL-KNOWN", {"N": 3, "quantifier": "at least"}, True, id="punct"),
        pytest.param(
            "COVID19 MP3 SNAKE_CASE iPHONE", {"N": 0, "quantifier": "at most"}, True, id="joined"
        ),
        # quirk: only A-Z are capitals, so accented words never count
        pytest.param("ÉCOLE CAFÉ", {"N": 0, "quantifier": "at most"}, True, id="accents"),
        pytest.param(words(22, "A"), {"N": 20, "quantifier": "around"}, True, id="around-20-22"),
        pytest.param(words(23, "A"), {"N": 20, "quantifier": "around"}, False, id="around-20-23"),
        pytest.param(words(6, "A"), {"N": 5, "quantifier": "around"}, True, id="around-5-6"),
        pytest.param("AAA BBB", {"N": 5, "quantifier": "around"}, False, id="around-5-2"),
        pytest.param("AAA", {"N": 1, "quantifier": "exactly"}, False, id="unknown"),
    ],
    "validate_end": [
        pytest.param("Done. Any other questions?", {"end_phrase": "Any other questions?"}, True),
        pytest.param("Any other questions? Bye.", {"end_phrase": "Any other questions?"}, False),
        # the check itself does not strip (the verifier strips the answer first)
        pytest.param("Any questions? ", {"end_phrase": "Any questions?"}, False, id="space"),
        pytest.param("any questions?", {"end_phrase": "Any questions?"}, False, id="case"),
    ],
    "validate_quotation": [
        pytest.param('"Quoted answer"', {}, True),
        pytest.param("Not quoted", {}, False),
        pytest.param('"Only at the start', {}, False, id="start-only"),
        pytest.param('"Quoted"\n', {}, False, id="not-stripped"),
        # quirk: a lone double quote both starts and ends the text
        pytest.param('"', {}, True, id="lone-quote"),
        pytest.param("“Curly”", {}, False, id="curly"),
    ],
    "validate_no_commas": [
        pytest.param("No commas here.", {}, True),
        pytest.param("One, two", {}, False),
        # quirk: only the ASCII comma is a comma
        pytest.param("一，二", {}, True, id="fullwidth"),
    ],
}

FLAT = [
    pytest.param(name, *case.values, id=f"{name}-{case.id or i}")
    for name, cases in CASES.items()
    for i, case in enumerate(cases)
]


@pytest.mark.parametrize(("name", "text", "kwargs", "expected"), FLAT)
def test_check(name: str, text: str, kwargs: dict[str, Any], expected: bool) -> None:
    assert ifx.IF_FUNCTIONS[name](text, **kwargs) is expected


def test_every_check_has_a_passing_and_a_failing_case() -> None:
    for name in SIGNATURES.keys() - {"validate_response_language"}:
        assert {case.values[2] for case in CASES[name]} == {True, False}, name


@pytest.mark.parametrize(
    ("name", "text", "kwargs", "error"),
    [
        # open-instruct raises for these too; the verifier's caller scores them 0
        ("verify_letter_frequency", "hello", {"letter": "ll", "N": 0}, ValueError),
        ("verify_letter_frequency", "hello", {"letter": "", "N": 0}, ValueError),
        ("validate_sections", "a b", {"N": 1, "section_splitter": ""}, ValueError),
        ("validate_paragraphs", "A\n\nB", {"N": 2, "first_word": "A", "i": 3}, IndexError),
        ("validate_json_format", "[" * 100_000, {}, RecursionError),
    ],
)
def test_check_errors(name: str, text: str, kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        ifx.IF_FUNCTIONS[name](text, **kwargs)


def test_the_registry_has_open_instructs_names_and_keyword_names() -> None:
    assert set(ifx.IF_FUNCTIONS) == set(SIGNATURES)
    for name, check in ifx.IF_FUNCTIONS.items():
        assert check is getattr(ifx, name)
        assert tuple(inspect.signature(check).parameters) == SIGNATURES[name]
        assert (check.__doc__ or "").strip(), f"{name} has no docstring"


@pytest.mark.parametrize(
    ("name", "text", "kwargs", "expected"),
    [
        ("validate_placeholders", "[" * 60_000 + "]", {"N": 1}, True),
        ("validate_placeholders", "[" * 60_000, {"N": 1}, False),
        ("validate_title", "<<" * 60_000, {}, False),
        ("validate_highlighted_sections", "*" * 120_000, {"N": 60_000}, True),
        (
            "verify_sentence_constraint",
            "a. " * 40_000,
            {"N": 40_001, "quantifier": "at least"},
            True,
        ),
        (
            "validate_frequency_capital_words",
            "A" * 120_000 + "b",
            {"N": 0, "quantifier": "at most"},
            True,
        ),
        ("verify_keyword_frequency", "ab " * 40_000, {"word": "ab", "N": 40_000}, True),
    ],
)
def test_long_hostile_text_gets_the_right_answer(
    name: str, text: str, kwargs: dict[str, Any], expected: bool
) -> None:
    """Texts on which open-instruct's lazy `\\[(.*?)\\]` regexes take seconds (quadratic); the
    line scan that replaces them is linear by construction (see the next test)."""
    assert ifx.IF_FUNCTIONS[name](text, **kwargs) is expected


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("opener", "closer"), [("[", "]"), ("<<", ">>")])
def test_the_line_scan_counts_what_the_lazy_regex_finds(
    seed: int, opener: str, closer: str
) -> None:
    rng = random.Random(seed)
    pattern = re.compile(re.escape(opener) + "(.*?)" + re.escape(closer))
    alphabet = ["[", "]", "<", ">", "<<", ">>", "\n", "\r", " ", "x"]
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert ifx._count_pairs_on_lines(text, opener, closer) == len(pattern.findall(text)), text


# --- the language check: langdetect is optional ---------------------------------------------


@pytest.fixture
def fake_langdetect(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A stand-in langdetect that calls German anything with "und" in it, else English."""
    seen: list[str] = []

    def detect(text: str) -> str:
        seen.append(text)
        return "de" if "und" in text.split() else "en"

    monkeypatch.setitem(sys.modules, "langdetect", types.SimpleNamespace(detect=detect))
    return seen


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ("Hund und Katze", "de", True),
        ("Hund und Katze", "en", False),
        ("Dog and cat", "en", True),
        ("Dog and cat", "EN", False),  # an exact comparison of codes
    ],
)
def test_language_compares_langdetects_code(
    fake_langdetect: list[str], text: str, language: str, expected: bool
) -> None:
    assert ifx.validate_response_language(text, language) is expected
    assert fake_langdetect == [text]


def test_language_without_langdetect_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "langdetect", None)  # makes `import langdetect` fail
    with pytest.raises(RuntimeError, match="pip install langdetect"):
        ifx.validate_response_language("Hello there", "en")
    with pytest.raises(RuntimeError, match="needs langdetect"):
        ifx.verify_ifeval_old(
            "Hello there", {"func_name": "validate_response_language", "language": "en"}
        )


# --- verify_ifeval_old ------------------------------------------------------------------------


def label(func_name: str, **kwargs: Any) -> str:
    return json.dumps({"func_name": func_name, **kwargs})


@pytest.mark.parametrize(
    ("prediction", "truth", "expected"),
    [
        ("all lowercase", label("validate_lowercase"), 1.0),
        ("Not lowercase", label("validate_lowercase"), 0.0),
        ("one two three", label("validate_word_constraint", N=3, quantifier="at least"), 1.0),
        ("one two", label("validate_word_constraint", N=3, quantifier="at least"), 0.0),
        # the thinking section goes: everything up to the last </think>
        ("<think>Plan It</think>all lowercase", label("validate_lowercase"), 1.0),
        ("<think>a</think>B</think>  ok", label("validate_lowercase"), 1.0),
        # quirk: an unclosed <think> is not removed, so its text is checked too
        ("<think>Thinking Aloud", label("validate_lowercase"), 0.0),
        # <|assistant|> and <answer> tags go, and the answer is stripped
        (
            '<|assistant|><think>x</think> <answer> "hi" </answer>\n',
            label("validate_quotation"),
            1.0,
        ),
        ("Done. Bye!  \n", label("validate_end", end_phrase="Bye!"), 1.0),
        ('  "quoted"  ', label("validate_quotation"), 1.0),
        # None-valued arguments are dropped: the dataset lists every argument of every check
        (
            "one two three",
            label(
                "validate_word_constraint",
                N=3,
                quantifier="at most",
                keyword_list=None,
                word=None,
                letter=None,
                first_word=None,
                i=None,
            ),
            1.0,
        ),
        ("anything", label("validate_title", N=None, section_splitter=None), 0.0),
        ("<<t>>", label("validate_title", N=None, section_splitter=None), 1.0),
        # no func_name scores 0
        ("anything", json.dumps({"N": 3}), 0.0),
        ("anything", "{}", 0.0),
    ],
)
def test_verify_ifeval_old(prediction: str, truth: str, expected: float) -> None:
    score = ifx.verify_ifeval_old(prediction, truth)
    assert type(score) is float
    assert score == expected
    # the same label as a dict gives the same score
    assert ifx.verify_ifeval_old(prediction, json.loads(truth)) == expected


def test_a_dict_label_is_left_as_it_was() -> None:
    truth = {"func_name": "verify_keywords", "keyword_list": ["cat"], "N": None}
    before = copy.deepcopy(truth)
    # open-instruct pops func_name from the dict, so its second call would score 0.0
    assert ifx.verify_ifeval_old("a cat", truth) == 1.0
    assert ifx.verify_ifeval_old("a cat", truth) == 1.0
    assert truth == before


@pytest.mark.parametrize(
    ("truth", "error", "message"),
    [
        (label("no_such_check"), ValueError, "unknown ifeval_old func_name 'no_such_check'"),
        ({"func_name": None}, ValueError, "unknown ifeval_old func_name None"),
        ({"func_name": ["validate_title"]}, ValueError, "unknown ifeval_old func_name"),
        ("[1, 2]", ValueError, "must be a JSON object"),
        ("not json", ValueError, "Expecting value"),
        # a check's own errors come through unchanged
        (label("verify_letter_frequency", letter="ab", N=1), ValueError, "single character"),
        (label("validate_title", N=3), TypeError, "N"),
    ],
)
def test_verify_ifeval_old_raises(truth: str | dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        ifx.verify_ifeval_old("anything", truth)
