"""Instruction-following checks of open-instruct's ``ifeval_old`` verifier, in our own code.

open-instruct scores its older IFEval-style RLVR data with ``open_instruct/if_functions.py``: each
ground truth names one check (``func_name``) plus that check's keyword arguments. Here are the same
checks under the same names and keyword names (``IF_FUNCTIONS``), and ``verify_ifeval_old`` does
what ``IFEvalVerifierOld.__call__`` in ``open_instruct/ground_truth_utils.py`` does, so a score
computed here is the score open-instruct gives. Their quirks are kept on purpose, among them:

- keywords, forbidden words and choices are substring tests ("cat" is found in "concatenate");
  keywords and forbidden words ignore case, choices, letters and everything else do not;
- the word count splits on whitespace, the keyword count uses ``\\w+`` runs ("don't" is two);
- "around" allows max(round(N * 0.1), 1) (round half to even) for words and all-capital words
  but exactly 1 for sentences; an unknown quantifier fails instead of raising;
- sentences are the whitespace breaks after ``.?!`` plus one (so a trailing space adds one);
- a highlight is any two ``*`` on one line, so ``**bold**`` counts as two empty highlights;
- single letters such as "I" and "A" are all-capital words;
- no check strips the text unless its docstring says so (the verifier strips the answer).

Where we differ: an unknown ``func_name`` raises ValueError (theirs: KeyError), a label that is
not a JSON object raises ValueError, and a dict label is never mutated (theirs pops
``func_name`` from it, so reusing the dict scores 0). The language check needs ``langdetect``,
imported only when that check runs.

Model text is untrusted: the regular expressions below are all linear, and the bracket checks
that open-instruct runs as ``\\[(.*?)\\]``-style patterns (quadratic on "[[[[...") are plain
scans that count the same matches.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["IF_FUNCTIONS", "remove_thinking_section", "verify_ifeval_old"]

_WORD_RUN = re.compile(r"\w+")  # a maximal run of word characters: what \b\w+\b finds
_CAPITALS = re.compile(r"[A-Z]+")  # ASCII capitals only, as in open-instruct
# Where open-instruct splits sentences: one whitespace character right after . ? or !, unless the
# four characters before it look like "e.g." / "x.y?" or the three before it like "Mr.".
# Fixed-width lookbehinds and a single \s: linear time.
_SENTENCE_BREAK = re.compile(
    r"""
    (?<=[.?!])
    (?<!\w\.\w.)
    (?<![A-Z][a-z]\.)
    \s
    """,
    re.VERBOSE,
)
_PARAGRAPH_DIVIDER = "* * *"
_RESPONSE_DIVIDER = "******"


def _around(n: Any) -> Any:
    """The slack "around" allows for words and all-capital words: 10% of N, at least 1."""
    return max(round(n * 0.1), 1)


def _compare(count: int, n: Any, quantifier: str, slack: Any) -> bool:
    """Whether `count` is "at least", "at most" or "around" (within `slack` of) N."""
    if quantifier == "at least":
        return count >= n
    if quantifier == "at most":
        return count <= n
    if quantifier == "around":
        return abs(count - n) <= slack
    return False


def _count_pairs_on_lines(text: str, opener: str, closer: str) -> int:
    """How many times ``re.findall(re.escape(opener) + "(.*?)" + re.escape(closer))`` matches.

    A lazy ``.*?`` stops at the first closer and never crosses a newline, so each line is
    scanned once: an opener pairs with the next closer on its line, and once an opener finds
    none, no later opener on that line can.
    """
    count = 0
    for line in text.split("\n"):
        start = line.find(opener)
        while start != -1:
            end = line.find(closer, start + len(opener))
            if end == -1:
                break
            count += 1
            start = line.find(opener, end + len(closer))
    return count


def verify_keywords(text: str, keyword_list: list[str]) -> bool:
    """Every keyword occurs in the text as a case-insensitive substring."""
    haystack = text.lower()
    return all(keyword.lower() in haystack for keyword in keyword_list)


def verify_keyword_frequency(text: str, word: str, N: int) -> bool:
    """The word occurs exactly N times as a whole ``\\w+`` token, ignoring case."""
    target = word.lower()
    return sum(token == target for token in _WORD_RUN.findall(text.lower())) == N


def validate_forbidden_words(text: str, forbidden_words: list[str]) -> bool:
    """No forbidden word occurs in the text as a case-insensitive substring."""
    haystack = text.lower()
    return not any(word.lower() in haystack for word in forbidden_words)


def verify_letter_frequency(text: str, letter: str, N: int) -> bool:
    """The single character `letter` occurs exactly N times, case-sensitively."""
    if len(letter) != 1:
        raise ValueError("Letter parameter must be a single character")
    return text.count(letter) == N


def validate_response_language(text: str, language: str) -> bool:
    """langdetect detects `language` (an ISO code such as "en"); needs langdetect installed.

    langdetect is imported here, not at the top, so the other checks work without it; it is
    not seeded (nor is it in open-instruct), so short or mixed texts may vary between runs, and
    text with nothing to detect (digits only, empty) raises its LangDetectException.
    """
    try:
        import langdetect
    except ImportError as error:
        raise RuntimeError(
            "the ifeval_old language check needs langdetect: pip install langdetect"
        ) from error
    return bool(langdetect.detect(text) == language)


def verify_paragraph_count(text: str, N: int) -> bool:
    """Exactly N non-blank paragraphs separated by the divider "* * *" (anywhere in a line)."""
    paragraphs = text.split(_PARAGRAPH_DIVIDER)
    # open-instruct strips every line first; that only moves whitespace, so it changes nothing.
    return all(part.strip() for part in paragraphs) and len(paragraphs) == N


def validate_word_constraint(text: str, N: int, quantifier: str) -> bool:
    """The number of whitespace-separated words is "at least", "at most" or "around" N."""
    slack = _around(N)  # computed before the quantifier is looked at, as open-instruct does
    return _compare(len(text.split()), N, quantifier, slack)


def verify_sentence_constraint(text: str, N: int, quantifier: str) -> bool:
    """The number of sentences is "at least", "at most" or "around" (within 1 of) N."""
    sentences = 1 + sum(1 for _ in _SENTENCE_BREAK.finditer(text))
    return _compare(sentences, N, quantifier, 1)


def validate_paragraphs(text: str, N: int, first_word: str, i: int) -> bool:
    """Exactly N paragraphs split on "\\n\\n", and the i-th (1-based) starts with `first_word`."""
    paragraphs = text.split("\n\n")
    if len(paragraphs) != N:
        return False
    # A prefix test, and i=0 reaches the last paragraph through Python's index -1, as theirs does.
    return paragraphs[i - 1].strip().startswith(first_word)


def verify_postscript(text: str, postscript_marker: str) -> bool:
    """The marker occurs and something other than whitespace follows its first occurrence."""
    at = text.find(postscript_marker)
    return at != -1 and len(text[at:].strip()) > len(postscript_marker)


def validate_placeholders(text: str, N: int) -> bool:
    """At least N square-bracket placeholders such as [name], each within one line."""
    return _count_pairs_on_lines(text, "[", "]") >= N


def verify_bullet_points(text: str, N: int) -> bool:
    """Exactly N lines start (after stripping) with "*" or "-"."""
    bullets = sum(1 for line in text.split("\n") if line.strip().startswith(("*", "-")))
    return bullets == N


def validate_title(text: str) -> bool:
    """A title wrapped in double angular brackets, like <<title>>, within one line."""
    return _count_pairs_on_lines(text, "<<", ">>") > 0


def validate_choice(text: str, options: list[str]) -> bool:
    """Some option occurs in the text as a case-sensitive substring."""
    return any(option in text for option in options)


def validate_highlighted_sections(text: str, N: int) -> bool:
    """At least N highlights: a highlight is any two "*" on one line (so "**" counts)."""
    return sum(line.count("*") // 2 for line in text.split("\n")) >= N


def validate_sections(text: str, N: int, section_splitter: str) -> bool:
    """Splitting on `section_splitter` gives N parts, not counting an empty first one."""
    parts = text.split(section_splitter)
    if parts[0] == "":  # only an exactly empty lead-in is dropped, not a blank line
        parts = parts[1:]
    return len(parts) == N


def validate_json_format(text: str) -> bool:
    """The whole text parses as JSON (any JSON value, a bare number or string included)."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def validate_repeat_prompt(text: str, original_prompt: str) -> bool:
    """The text starts with the original prompt, character for character."""
    return text.startswith(original_prompt)


def validate_two_responses(text: str) -> bool:
    """One "******" splits the text into two responses that differ once stripped."""
    if text.count(_RESPONSE_DIVIDER) != 1:
        return False
    first, _, second = text.partition(_RESPONSE_DIVIDER)
    return first.strip() != second.strip()


def validate_uppercase(text: str) -> bool:
    """The text equals its upper-case form."""
    return text.upper() == text


def validate_lowercase(text: str) -> bool:
    """The text equals its lower-case form."""
    return text.lower() == text


def validate_frequency_capital_words(text: str, N: int, quantifier: str) -> bool:
    """The number of all-capital (A-Z) words is "at least", "at most" or "around" N."""
    capitals = sum(1 for token in _WORD_RUN.findall(text) if _CAPITALS.fullmatch(token))
    slack = _around(N) if quantifier == "around" else 0
    return _compare(capitals, N, quantifier, slack)


def validate_end(text: str, end_phrase: str) -> bool:
    """The text ends with the exact end phrase."""
    return text.endswith(end_phrase)


def validate_quotation(text: str) -> bool:
    """The text starts and ends with a double quotation mark (a lone '"' does both)."""
    return text.startswith('"') and text.endswith('"')


def validate_no_commas(text: str) -> bool:
    """The text contains no ASCII comma."""
    return "," not in text


IF_FUNCTIONS: dict[str, Callable[..., bool]] = {
    check.__name__: check
    for check in (
        verify_keywords,
        verify_keyword_frequency,
        validate_forbidden_words,
        verify_letter_frequency,
        validate_response_language,
        verify_paragraph_count,
        validate_word_constraint,
        verify_sentence_constraint,
        validate_paragraphs,
        verify_postscript,
        validate_placeholders,
        verify_bullet_points,
        validate_title,
        validate_choice,
        validate_highlighted_sections,
        validate_sections,
        validate_json_format,
        validate_repeat_prompt,
        validate_two_responses,
        validate_uppercase,
        validate_lowercase,
        validate_frequency_capital_words,
        validate_end,
        validate_quotation,
        validate_no_commas,
    )
}


def remove_thinking_section(prediction: str) -> str:
    """The text after the last "</think>", without "<|assistant|>" or <answer> tags, stripped."""
    text = prediction.replace("<|assistant|>", "").strip()
    text = text.rpartition("</think>")[2]
    return text.replace("<answer>", "").replace("</answer>", "").strip()


def verify_ifeval_old(prediction: str, label: str | dict[str, Any]) -> float:
    """1.0 if the answer passes the check the label names, else 0.0 (0.0 without a func_name).

    `label` is a JSON object or its text: {"func_name": ..., <keyword arguments>}; arguments
    that are None are left out. The label is never modified. An unknown func_name, or a label
    that is not an object, raises ValueError; a check's own errors (a wrong argument, a
    multi-character letter, a missing langdetect) propagate.
    """
    answer = remove_thinking_section(prediction)
    constraint = json.loads(label) if isinstance(label, str) else label
    if not isinstance(constraint, Mapping):
        raise ValueError(f"an ifeval_old label must be a JSON object, not {type(constraint)}")
    if "func_name" not in constraint:
        return 0.0
    name = constraint["func_name"]
    check = IF_FUNCTIONS.get(name) if isinstance(name, str) else None
    if check is None:
        raise ValueError(f"unknown ifeval_old func_name {name!r}")
    kwargs = {k: v for k, v in constraint.items() if k != "func_name" and v is not None}
    return float(check(answer, **kwargs))
