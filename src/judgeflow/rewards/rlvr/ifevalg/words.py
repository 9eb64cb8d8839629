"""Word-level instructions IFEvalG added to IFEval: which words, where, how often (open-instruct's
``open_instruct/IFEvalG/instructions.py``, commit e6c3044), each checked as open-instruct checks
it, quirks included."""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise
from typing import Any

from judgeflow.rewards.rlvr.ifevalg.common import Check, Draws, compares, drawn_at_random
from judgeflow.rewards.rlvr.ifevalg.text import split_into_sentences, word_tokenize

__all__ = ["INSTRUCTIONS"]

_PUNCTUATION = re.compile(r"[^\w\s]")


def _text_argument(instruction_id: str, name: str, given: Any) -> str:
    """A text argument, stripped; one that is missing or falsy would be drawn at random. Anything
    other than text fails as it does in open-instruct (``AttributeError``: no ``strip``)."""
    if not given:
        raise drawn_at_random(instruction_id, name, given)
    return given.strip()


def _text_or_first_listed(instruction_id: str, name: str, given: Any) -> str:
    """As :func:`_text_argument`, but a non-text argument stands for its first item (open-instruct
    indexes it with ``[0]``, so a number raises ``TypeError``, a mapping ``KeyError``)."""
    if not given:
        raise drawn_at_random(instruction_id, name, given)
    chosen = given if isinstance(given, str) else given[0]
    return chosen.strip()


def _without_punctuation(word: str) -> str:
    return _PUNCTUATION.sub("", word)


# keywords:


def no_adjacent_consecutive() -> Check:
    """No two neighbouring whitespace-separated words start with characters one code point apart,
    in that order, lowercased ("a b" fails, "b a" passes; so do digits: "1 2" fails). A word whose
    first character lowercases to two (``İ``) fails the response once it has a neighbour."""

    def check(response: str) -> bool:
        initials = [word[0].lower() for word in response.split()]
        for first, second in pairwise(initials):
            if len(first) != 1 or len(second) != 1:
                return False
            if ord(second) - ord(first) == 1:
                return False
        return True

    return check


def word_once(*, keyword: Any = None) -> Check:
    """The keyword, read as a case-insensitive regular expression, matches exactly once (as a
    substring: "cat" matches in "concatenate"; an invalid pattern raises when checking). A blank
    keyword strips to the empty pattern, which matches once only in an empty response."""
    pattern = _text_argument("keywords:word_once", "keyword", keyword)

    def check(response: str) -> bool:
        return len(re.findall(pattern, response, flags=re.IGNORECASE)) == 1

    return check


def word_count_different_numbers(
    *, keyword: Any = None, frequency: Any = None, relation: Any = None
) -> Check:
    """The keyword, a case-insensitive regular expression, matches fewer than ``frequency`` times
    (``less than``) or at least that many (``at least``). A negative frequency is drawn at random;
    one that cannot be compared with 0 (text) raises, as does an unknown relation."""
    draws = Draws("keywords:word_count_different_numbers")
    if not keyword:
        draws.note("keyword", keyword)
    else:
        keyword = keyword.strip()
    frequency = draws.count("frequency", frequency)
    relation = draws.relation("relation", relation)
    draws.settle()

    def check(response: str) -> bool:
        found = len(re.findall(keyword, response, flags=re.IGNORECASE))
        return compares(found, relation, frequency)

    return check


def exclude_word_harder(*, keyword: Any = None, instruction: Any = None) -> Check:
    """The keyword, case-sensitive, never appears with a space on each side (so it may open or end
    the response, or touch punctuation or a line break). Without a keyword open-instruct draws one
    from the words of ``instruction``: refused where they differ, taken where there is only one
    (``instruction`` missing or not text raises ``AttributeError``, one without words
    ``IndexError``, as there)."""
    instruction_id = "keywords:exclude_word_harder"
    if keyword:
        word = keyword.strip()
    else:
        if not isinstance(instruction, str):
            raise AttributeError(
                f"{instruction_id}: no keyword, and instruction {instruction!r} is not text to "
                "draw one from"
            )
        choices = instruction.split()
        if not choices:
            raise IndexError(f"{instruction_id}: no keyword, and no word in the instruction")
        if len(set(choices)) > 1:
            raise drawn_at_random(instruction_id, "keyword", keyword)
        word = choices[0]
    needle = f" {word} "

    def check(response: str) -> bool:
        return needle not in response

    return check


def palindrome() -> Check:
    """Some whitespace-separated word reads the same reversed, case and punctuation included (so
    any one-character word counts: "a", "I", "-")."""

    def check(response: str) -> bool:
        return any(word == word[::-1] for word in response.split())

    return check


def keyword_specific_position(*, keyword: Any = None, n: Any = None, m: Any = None) -> Check:
    """The ``m``-th token (``nltk.word_tokenize``) of the ``n``-th sentence (IFEvalG's regex
    splitter) is exactly the keyword, case-sensitive; too few sentences or tokens fail. A listed
    keyword stands for its first item; ``n`` or ``m`` 0 is drawn at random, anything else kept as
    given: a negative one indexes from the end (and may raise ``IndexError``), text raises
    ``TypeError`` when checking."""
    instruction_id = "keywords:keyword_specific_position"
    word = _text_or_first_listed(instruction_id, "keyword", keyword)
    if not n:
        raise drawn_at_random(instruction_id, "n", n)
    if not m:
        raise drawn_at_random(instruction_id, "m", m)

    def check(response: str) -> bool:
        sentences = split_into_sentences(response)
        if len(sentences) < n:
            return False
        tokens = word_tokenize(sentences[n - 1])
        if len(tokens) < m:
            return False
        return bool(tokens[m - 1] == word)

    return check


def start_end() -> Check:
    """The first and last tokens (``nltk.word_tokenize``, so punctuation is a token) are the same,
    case aside; fewer than two tokens fail."""

    def check(response: str) -> bool:
        tokens = word_tokenize(response)
        return len(tokens) >= 2 and tokens[0].lower() == tokens[-1].lower()

    return check


# first_word: and last_word:


def first_word_sent(*, first_word: Any = None) -> Check:
    """Every sentence (IFEvalG's regex splitter) opens with the word, case aside, punctuation kept
    ("Yes," is not "yes"); a response with no sentence follows. A listed word stands for its first
    item."""
    expected = _text_or_first_listed("first_word:first_word_sent", "first_word", first_word)

    def check(response: str) -> bool:
        for sentence in split_into_sentences(response):
            if not sentence.strip() or sentence.split()[0].lower() != expected.lower():
                return False
        return True

    return check


def first_word_answer(*, first_word: Any = None) -> Check:
    """The response's first whitespace-separated word is the word, case aside, punctuation kept;
    a blank response fails."""
    expected = _text_argument("first_word:first_word_answer", "first_word", first_word)

    def check(response: str) -> bool:
        words = response.split()
        return bool(words) and words[0].lower() == expected.lower()

    return check


def last_word_sent(*, last_word: Any = None) -> Check:
    """Every sentence (IFEvalG's regex splitter) ends with the word, case aside, once its last
    whitespace-separated word loses its punctuation (not the expected word's: "end." never
    matches); a response with no sentence follows. A listed word stands for its first item."""
    expected = _text_or_first_listed("last_word:last_word_sent", "last_word", last_word)

    def check(response: str) -> bool:
        for sentence in split_into_sentences(response):
            if not sentence.strip():
                return False
            if _without_punctuation(sentence.split()[-1]).lower() != expected.lower():
                return False
        return True

    return check


def last_word_answer(*, last_word: Any = None) -> Check:
    """The response's last whitespace-separated word, without its punctuation, is the word, case
    aside. A blank response raises ``IndexError``, as in open-instruct."""
    expected = _text_argument("last_word:last_word_answer", "last_word", last_word)

    def check(response: str) -> bool:
        words = response.split()
        if not words:
            raise IndexError("last_word:last_word_answer: the response has no word")
        return _without_punctuation(words[-1]).lower() == expected.lower()

    return check


# punctuation: and count:


def punctuation_dot() -> Check:
    """No "." anywhere (decimals, ellipses and web addresses included)."""

    def check(response: str) -> bool:
        return "." not in response

    return check


def punctuation_exclamation() -> Check:
    """No "!" anywhere."""

    def check(response: str) -> bool:
        return "!" not in response

    return check


def count_unique() -> Check:
    """No token (``nltk.word_tokenize``) repeats, case-sensitive, punctuation tokens included (two
    commas fail; "The" and "the" do not)."""

    def check(response: str) -> bool:
        tokens = word_tokenize(response)
        return len(tokens) == len(set(tokens))

    return check


#: Instruction id → builder (open-instruct's ``build_description`` arguments → the check).
INSTRUCTIONS: dict[str, Callable[..., Check]] = {
    "keywords:no_adjacent_consecutive": no_adjacent_consecutive,
    "keywords:word_once": word_once,
    "keywords:word_count_different_numbers": word_count_different_numbers,
    "keywords:exclude_word_harder": exclude_word_harder,
    "keywords:palindrome": palindrome,
    "keywords:keyword_specific_position": keyword_specific_position,
    "keywords:start_end": start_end,
    "first_word:first_word_sent": first_word_sent,
    "first_word:first_word_answer": first_word_answer,
    "last_word:last_word_sent": last_word_sent,
    "last_word:last_word_answer": last_word_answer,
    "punctuation:punctuation_dot": punctuation_dot,
    "punctuation:punctuation_exclamation": punctuation_exclamation,
    "count:count_unique": count_unique,
}
