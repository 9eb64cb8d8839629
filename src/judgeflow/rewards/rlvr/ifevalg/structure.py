"""Copying, paragraph, format and counting instructions IFEvalG added to IFEval (open-instruct,
commit e6c3044), built and checked as there. A falsy argument counts as missing, as there
(``not N``); one it would draw is refused, unless an error later in the same build comes first."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

from judgeflow.rewards.rlvr.ifevalg.common import Check, Draws, drawn_at_random
from judgeflow.rewards.rlvr.ifevalg.text import split_into_sentences, word_tokenize

__all__ = ["INSTRUCTIONS"]

#: What open-instruct's paragraph and composition checks split a response on: ``***``, with at
#: most one whitespace character taken off either side.
_MARKDOWN_DIVIDER = re.compile(r"\s?\*\*\*\s?")

#: The separator between the copies ``copy:copying_multiple`` asks for.
_COPY_SEPARATOR = "******"


def _only_value(low: Any, high: Any) -> int | None:
    """What open-instruct's ``random.randint(low, high)`` gives where it can give one value only,
    or None where it picks among several. Raises as that call does on a range it cannot draw
    from (empty, or ends that are not integers)."""
    value = random.Random(0).randint(low, high)  # only to raise as open-instruct's draw would
    return value if low == high else None


def _required_prompt(prompt_to_repeat: Any) -> Any:
    """``prompt_to_repeat``, which open-instruct requires (a falsy one raises ValueError; it is
    never drawn)."""
    if not prompt_to_repeat:
        raise ValueError("prompt_to_repeat must be set: the text the response copies")
    return prompt_to_repeat


def _paragraph_count(parts: list[str]) -> int | None:
    """How many paragraphs open-instruct counts in a split response: a blank first or last part
    does not count; a blank part between two others gives None (not followed)."""
    count = len(parts)
    for index, part in enumerate(parts):
        if not part.strip():
            if index not in (0, len(parts) - 1):
                return None
            count -= 1
    return count


def repeat_phrase(*, phrase: Any = None, small_n: Any = None) -> Check:
    """``copy:repeat_phrase``: exactly ``small_n`` spans from the phrase's first word to its last
    (case-sensitive regex, words not escaped, a span not crossing a line), each the phrase's
    length in words with exactly one word changed. Quirks: the words are a regex (``C++`` raises
    when checking); an unchanged copy fails only by not counting; a blank phrase raises
    IndexError when checking."""
    draws = Draws("copy:repeat_phrase")
    if not phrase:
        draws.note("phrase", phrase)
    else:
        phrase = phrase.strip()
    if not small_n:
        draws.note("small_n", small_n)
    draws.settle()

    def check(response: str) -> bool:
        words = phrase.split()
        spans = re.findall(rf"{words[0]} .*? {words[-1]}", response)
        if len(spans) != small_n:
            return False
        changed_once = 0
        for span in spans:
            span_words = span.split()
            if len(span_words) != len(words):
                return False
            changed = sum(got != wanted for got, wanted in zip(span_words, words, strict=True))
            if changed > 1:
                return False
            changed_once += changed == 1
        return changed_once == small_n

    return check


def copy_verbatim(*, prompt_to_repeat: Any = None) -> Check:
    """``copy:copy`` and ``copy:copying_simple``: the response is the prompt, ignoring case and
    surrounding whitespace."""
    prompt = _required_prompt(prompt_to_repeat)

    def check(response: str) -> bool:
        return response.strip().lower() == prompt.strip().lower()

    return check


def copy_span_idx(*, prompt_to_repeat: Any = None, n_start: Any = None, n_end: Any = None) -> Check:
    """``new:copy_span_idx``: the response is ``prompt_to_repeat[n_start:n_end]``, ignoring case
    and surrounding whitespace. Quirks: the end index is excluded (the description says
    "including"); ``n_start=0`` counts as missing, and is drawn from ``0 … len(prompt) - 2`` (a
    prompt under two characters makes that draw raise ValueError; one of two gives 0, no draw)."""
    prompt = _required_prompt(prompt_to_repeat)
    draws = Draws("new:copy_span_idx")
    start, end = n_start, n_end
    if not start:
        start = _only_value(0, len(prompt) - 2)
        if start is None:
            draws.note("n_start", n_start)
    if not end:
        if start is None:  # a drawn start leaves a range from start + 1 that is never empty
            draws.note("n_end", n_end)
        else:
            end = _only_value(start + 1, len(prompt) - 1)
            if end is None:
                draws.note("n_end", n_end)
    draws.settle()

    def check(response: str) -> bool:
        return response.strip().lower() == prompt[start:end].strip().lower()

    return check


def copying_multiple(*, prompt_to_repeat: Any = None, N: Any = None) -> Check:
    """``copy:copying_multiple``: the response split on ``******`` is ``N`` copies of the prompt,
    each ignoring case and surrounding whitespace (a separator at either end makes an empty
    copy, which fails)."""
    prompt = _required_prompt(prompt_to_repeat)
    if not N:
        raise drawn_at_random("copy:copying_multiple", "N", N)

    def check(response: str) -> bool:
        copies = response.split(_COPY_SEPARATOR)
        if len(copies) != N:
            return False
        return all(copy.strip().lower() == prompt.strip().lower() for copy in copies)

    return check


def two_paragraphs_by_divider() -> Check:
    """``paragraphs:paragraphs``: exactly two paragraphs between ``***`` dividers (a divider at
    either end is allowed; an empty paragraph between two dividers fails)."""

    def check(response: str) -> bool:
        return _paragraph_count(_MARKDOWN_DIVIDER.split(response)) == 2

    return check


def two_paragraphs_by_blank_line() -> Check:
    """``paragraphs:paragraphs2``: exactly two paragraphs when split on every ``\\n\\n`` (so
    three newlines in a row leave one at the start of the next paragraph, and four make an empty
    paragraph, which fails)."""

    def check(response: str) -> bool:
        return _paragraph_count(response.split("\n\n")) == 2

    return check


def sentence_hyphens() -> Check:
    """``detectable_format:sentence_hyphens``: each hyphen-separated piece has no surrounding
    whitespace and equals the sentence in the same place when the hyphens are read as spaces
    (IFEvalG's regex splitter); pieces beyond the shorter of the two lists are not looked at."""

    def check(response: str) -> bool:
        sentences = split_into_sentences(response.replace("-", " "))
        pieces = response.split("-")
        return all(
            piece.strip() == piece and piece == sentence
            for piece, sentence in zip(pieces, sentences, strict=False)
        )

    return check


def square_brackets() -> Check:
    """``detectable_format:square_brackets``: every whitespace-separated token starts with ``[``
    and ends with ``]`` (so ``[two words]`` fails, ``[a][b]`` passes)."""

    def check(response: str) -> bool:
        return all(word.startswith("[") and word.endswith("]") for word in response.split())

    return check


def bigram_wrapping() -> Check:
    """``detectable_format:bigram_wrapping``: in each pair of whitespace-separated tokens (first
    and second, third and fourth, …) the first starts with ``<<`` and the second ends with
    ``>>``; an odd last token is not looked at."""

    def check(response: str) -> bool:
        words = response.split()
        return all(
            words[i].startswith("<<") and words[i + 1].endswith(">>")
            for i in range(0, len(words) - 1, 2)
        )

    return check


def lowercase_counting(*, N: Any = None) -> Check:
    """``count:lowercase_counting``: at most ``N`` all-lowercase ASCII words (``\\b[a-z]+\\b``)
    in all, not per word as the description reads. ``N=0`` counts as missing."""
    if not N:
        raise drawn_at_random("count:lowercase_counting", "N", N)

    def check(response: str) -> bool:
        return len(re.findall(r"\b[a-z]+\b", response)) <= N

    return check


def letter_counting(*, N: Any = None, relation: Any = None) -> Check:
    """``letters:letter_counting``: the count of ASCII letters is ``relation`` ("less than" or
    "at least") ``N``. Quirk: any other relation is accepted and is never followed."""
    draws = Draws("letters:letter_counting")
    if not N:
        draws.note("N", N)
    if not relation:
        draws.note("relation", relation)
    draws.settle()

    def check(response: str) -> bool:
        letters = len(re.findall(r"[a-zA-Z]", response))
        if relation == "at least":
            return letters >= N
        if relation == "less than":
            return letters < N
        return False

    return check


def counting_composition(*, n_sent: Any = None, n_words: Any = None) -> Check:
    """``count:counting_composition``: three paragraphs split on ``***`` (the description's
    ``* * *`` does not split), each of ``n_sent`` sentences (IFEvalG's regex splitter) of
    ``n_words`` NLTK tokens (punctuation counts). Quirk: a divider at either end leaves an empty
    paragraph of no sentences, which fails."""
    draws = Draws("count:counting_composition")
    if not n_sent:
        draws.note("n_sent", n_sent)
    if not n_words:
        draws.note("n_words", n_words)
    draws.settle()

    def check(response: str) -> bool:
        paragraphs = _MARKDOWN_DIVIDER.split(response)
        count = len(paragraphs)
        for index, paragraph in enumerate(paragraphs):
            if not paragraph.strip():
                if index not in (0, len(paragraphs) - 1):
                    return False
                count -= 1
            sentences = split_into_sentences(paragraph)
            if len(sentences) != n_sent:
                return False
            if any(len(word_tokenize(sentence)) != n_words for sentence in sentences):
                return False
        return count == 3

    return check


def count_increment_word(*, keyword1: Any = None, keyword2: Any = None) -> Check:
    """``count:count_increment_word``: ``keyword1`` found once and ``keyword2`` twice, each a
    case-insensitive regex matched anywhere (``cat`` in ``category`` counts; an invalid regex
    raises when checking)."""
    draws = Draws("count:count_increment_word")
    if not keyword1:
        draws.note("keyword1", keyword1)
    else:
        keyword1 = keyword1.strip()
    if not keyword2:
        draws.note("keyword2", keyword2)
    else:
        keyword2 = keyword2.strip()
    draws.settle()

    def check(response: str) -> bool:
        once = len(re.findall(keyword1, response, flags=re.IGNORECASE))
        twice = len(re.findall(keyword2, response, flags=re.IGNORECASE))
        return once == 1 and twice == 2

    return check


#: Instruction id → builder (its ``build_description`` keyword arguments → the check).
INSTRUCTIONS: dict[str, Callable[..., Check]] = {
    "copy:repeat_phrase": repeat_phrase,
    "copy:copy": copy_verbatim,
    "new:copy_span_idx": copy_span_idx,
    "copy:copying_simple": copy_verbatim,
    "copy:copying_multiple": copying_multiple,
    "paragraphs:paragraphs": two_paragraphs_by_divider,
    "paragraphs:paragraphs2": two_paragraphs_by_blank_line,
    "detectable_format:sentence_hyphens": sentence_hyphens,
    "detectable_format:square_brackets": square_brackets,
    "detectable_format:bigram_wrapping": bigram_wrapping,
    "count:lowercase_counting": lowercase_counting,
    "letters:letter_counting": letter_counting,
    "count:counting_composition": counting_composition,
    "count:count_increment_word": count_increment_word,
}
