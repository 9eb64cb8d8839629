"""IFEval's own instructions (Zhou et al. 2023, "Instruction-Following Evaluation for Large
Language Models"), checked as open-instruct's IFEvalG checks them at commit e6c3044.

Each builder takes the keyword arguments of the ``build_description`` of open-instruct's class
for that id and returns the check. Where that method would draw an argument at random, the
builder raises :class:`~judgeflow.rewards.rlvr.ifevalg.common.DrawnAtRandom`, but only once the
other arguments have passed the tests open-instruct runs after the draw (a bad relation still
raises ``ValueError``, a count that is not a number ``TypeError``), as there. Keywords, markers
and section splitters are regular expressions there, so they are here: an invalid one raises
when the response is checked, not when the instruction is built.

open-instruct's placeholder, title, bullet and postscript patterns take quadratic time on some
model text (a long run of ``[``, ``<``, blank lines or spaces); here they are linear scans and
searches that find the same matches (a postscript marker other than IFEval's two is still
searched with open-instruct's own pattern).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from judgeflow.rewards.rlvr.ifevalg.common import Check, Draws, compares
from judgeflow.rewards.rlvr.ifevalg.text import (
    LANGUAGE_CODES,
    count_sentences,
    count_words,
    word_tokenize,
)

__all__ = ["INSTRUCTIONS"]

#: The answers ``detectable_format:constrained_response`` accepts (any one, anywhere).
CONSTRAINED_RESPONSE_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")

#: What ``detectable_format:json_format`` strips from the front, one after the other.
_JSON_FENCES = ("```json", "```Json", "```JSON", "```")


def _langdetect(text: str) -> str | None:
    """langdetect's guess at the language (unseeded, as in open-instruct: a short or mixed
    text may get a different answer each time); ``None`` where it finds nothing to go on,
    which open-instruct counts as the instruction followed."""
    import langdetect

    try:
        return str(langdetect.detect(text))
    except langdetect.LangDetectException:
        return None


# --- keywords ----------------------------------------------------------------------------------


def keyword_existence(*, keywords: Sequence[str] | None = None) -> Check:
    """Every keyword is found, ignoring case. Keywords are regular expressions searched in
    sorted order, stopping at the first one missing (so an invalid one raises only if reached);
    a string is taken as its sorted characters, each one a keyword."""
    draws = Draws("keywords:existence")
    if not keywords:
        draws.note("keywords", keywords)
    else:
        keywords = sorted(keywords)
    draws.settle()
    assert keywords is not None
    patterns = list(keywords)

    def check(response: str) -> bool:
        return all(re.search(pattern, response, flags=re.IGNORECASE) for pattern in patterns)

    return check


def keyword_frequency(
    *, keyword: str | None = None, frequency: int | None = None, relation: str | None = None
) -> Check:
    """How many times the keyword, stripped and taken as a regular expression ignoring case,
    matches (non-overlapping; not as a whole word: "cat" is found in "concatenate"), compared
    with ``frequency``. A blank keyword strips to "", which matches once more than the
    response has characters."""
    draws = Draws("keywords:frequency")
    if not keyword:
        draws.note("keyword", keyword)
    else:
        keyword = keyword.strip()
    frequency = draws.count("frequency", frequency)
    relation = draws.relation("relation", relation)
    draws.settle()
    assert keyword is not None and relation is not None

    def check(response: str) -> bool:
        found = len(re.findall(keyword, response, flags=re.IGNORECASE))
        return compares(found, relation, frequency)

    return check


def forbidden_words(*, forbidden_words: Sequence[str] | None = None) -> Check:
    """None of the words is found as ``\\b<word>\\b``, ignoring case (the word is a regular
    expression). They are looked for in sorted order, duplicates dropped, stopping at the first
    one found; a string is taken as its characters."""
    draws = Draws("keywords:forbidden_words")
    if not forbidden_words:
        draws.note("forbidden_words", forbidden_words)
    else:
        forbidden_words = sorted(set(forbidden_words))
    draws.settle()
    assert forbidden_words is not None
    words = list(forbidden_words)

    def check(response: str) -> bool:
        return not any(
            re.search(r"\b" + word + r"\b", response, flags=re.IGNORECASE) for word in words
        )

    return check


def letter_frequency(
    *, letter: str | None = None, let_frequency: int | None = None, let_relation: str | None = None
) -> Check:
    """How many times the letter appears in the lowercased response, compared with
    ``let_frequency``. The letter must be one character that lowercases to a-z (so "A" means
    "a", and the Kelvin sign U+212A means "k"); anything else of length 0 or 1 (a digit, "é") is
    drawn at random, as is a longer string, while "İ" (which lowercases to two characters)
    raises ``TypeError``."""
    draws = Draws("keywords:letter_frequency or letters:letter_counting2")
    if not letter or len(letter) > 1 or not 97 <= ord(letter.lower()) <= 122:
        draws.note("letter", letter)
    else:
        letter = letter.strip().lower()
    let_frequency = draws.count("let_frequency", let_frequency)
    let_relation = draws.relation("let_relation", let_relation)
    draws.settle()
    assert letter is not None and let_relation is not None

    def check(response: str) -> bool:
        return compares(response.lower().count(letter), let_relation, let_frequency)

    return check


# --- language and case ---------------------------------------------------------------------------


def response_language(*, language: str | None = None) -> Check:
    """langdetect names the response's language as the ISO 639-1 ``language`` (one of
    ``LANGUAGE_CODES``: another raises ``KeyError``, as open-instruct looks up its name). A text
    langdetect cannot read (no letters at all) counts as followed."""
    draws = Draws("language:response_language")
    if language is None:
        draws.note("language")
    elif language not in LANGUAGE_CODES:  # an unhashable one raises TypeError, as there
        raise KeyError(f"language:response_language: no language {language!r} in IFEvalG's list")
    draws.settle()

    def check(response: str) -> bool:
        detected = _langdetect(response)
        return detected is None or detected == language

    return check


def english_capital() -> Check:
    """The response is ``str.isupper()`` (at least one cased character, none lowercase) and
    langdetect calls it English; one it cannot read counts as English."""

    def check(response: str) -> bool:
        if not response.isupper():
            return False
        detected = _langdetect(response)
        return detected is None or detected == "en"

    return check


def english_lowercase() -> Check:
    """The response is ``str.islower()`` and langdetect calls it English; one it cannot read
    counts as English."""

    def check(response: str) -> bool:
        if not response.islower():
            return False
        detected = _langdetect(response)
        return detected is None or detected == "en"

    return check


def capital_word_frequency(
    *, capital_frequency: int | None = None, capital_relation: str | None = None
) -> Check:
    """How many of NLTK's word tokens are ``str.isupper()`` ("I", "A", "U.S." count),
    compared with ``capital_frequency``. Unlike the other counts, a negative one is kept and
    one that is not a number is only refused when a response is checked (``TypeError``)."""
    draws = Draws("change_case:capital_word_frequency")
    if capital_frequency is None:
        draws.note("capital_frequency")
    capital_relation = draws.relation("capital_relation", capital_relation)
    draws.settle()
    assert capital_relation is not None

    def check(response: str) -> bool:
        capitals = sum(1 for token in word_tokenize(response) if token.isupper())
        return compares(capitals, capital_relation, capital_frequency)

    return check


# --- length ------------------------------------------------------------------------------------


def _counted(
    instruction_id: str, argument: str, given: Any, relation: Any, counter: Callable[[str], int]
) -> Check:
    """A length instruction: the response's ``counter`` compared with the count ``given``."""
    draws = Draws(instruction_id)
    given = draws.count(argument, given)
    relation = draws.relation("relation", relation)
    draws.settle()

    def check(response: str) -> bool:
        return compares(counter(response), relation, given)

    return check


def number_sentences(*, num_sentences: int | None = None, relation: str | None = None) -> Check:
    """NLTK Punkt's sentences, compared with ``num_sentences``."""
    return _counted(
        "length_constraints:number_sentences",
        "num_sentences",
        num_sentences,
        relation,
        count_sentences,
    )


def number_words(*, num_words: int | None = None, relation: str | None = None) -> Check:
    """Runs of word characters (``\\w+``: "don't" is two), compared with ``num_words``."""
    return _counted(
        "length_constraints:number_words", "num_words", num_words, relation, count_words
    )


_DIVIDER = re.compile(r"\s?\*\*\*\s?")


def number_paragraphs(*, num_paragraphs: int | None = None) -> Check:
    """Exactly ``num_paragraphs`` parts between ``***`` dividers, inline ones too ("****"
    divides, leaving a "*" in the next part; "******" is two dividers). A blank part before the
    first or after the last divider is not counted, a blank one between two dividers fails the
    check; a blank response has 0 paragraphs."""
    draws = Draws("length_constraints:number_paragraphs")
    num_paragraphs = draws.count("num_paragraphs", num_paragraphs)
    draws.settle()

    def check(response: str) -> bool:
        parts = _DIVIDER.split(response)
        if any(not part.strip() for part in parts[1:-1]):
            return False
        return sum(1 for part in parts if part.strip()) == num_paragraphs

    return check


_FIRST_WORD_END = re.compile(r"""[.,?!'"]""")


def nth_paragraph_first_word(
    *,
    num_paragraphs: int | None = None,
    nth_paragraph: int | None = None,
    first_word: str | None = None,
) -> Check:
    """Exactly ``num_paragraphs`` non-blank paragraphs (split at every ``"\\n\\n"``), and the
    ``nth_paragraph``-th part of that split, blank ones included, starts with ``first_word``
    (compared lowercased; the response's word is cut at the first ``. , ? ! ' "`` after leading
    quotes). A blank nth part fails. ``nth_paragraph`` must be 1 to ``num_paragraphs`` or it is
    drawn from 1 to ``num_paragraphs + 1``: for 0 paragraphs that is always 1 (and the check
    always fails), for a fractional count it raises ``ValueError``. A float ``nth_paragraph``
    raises ``TypeError`` when checked, unless the response has fewer paragraphs."""
    draws = Draws("length_constraints:nth_paragraph_first_word")
    given_count = num_paragraphs  # None where open-instruct draws it
    if num_paragraphs is None or num_paragraphs < 0:
        draws.note("num_paragraphs", num_paragraphs)
        given_count = None
    if (
        nth_paragraph is None
        or nth_paragraph <= 0
        or (given_count is not None and nth_paragraph > given_count)
    ):
        # open-instruct draws it with random.randint(1, num_paragraphs + 1), which refuses a
        # fraction (ValueError; NaN too, and infinity raises OverflowError) and has nothing to
        # draw from for 0 paragraphs: then it is 1
        if isinstance(given_count, float) and int(given_count) != given_count:
            raise ValueError(
                "length_constraints:nth_paragraph_first_word: num_paragraphs must be whole, "
                f"not {given_count!r}"
            )
        if given_count is not None and given_count == 0:
            nth_paragraph = 1
        else:
            draws.note("nth_paragraph", nth_paragraph)
    if first_word is None:
        draws.note("first_word")
    else:
        first_word = first_word.lower()
    draws.settle()
    assert nth_paragraph is not None

    def check(response: str) -> bool:
        paragraphs = response.split("\n\n")
        found = sum(1 for paragraph in paragraphs if paragraph.strip())
        if not nth_paragraph <= found:
            return False
        chosen = paragraphs[nth_paragraph - 1].strip()
        if not chosen:
            return False
        word = chosen.split()[0].lstrip("'").lstrip('"')
        head = _FIRST_WORD_END.split(word, maxsplit=1)[0]
        # character by character, as open-instruct: a final sigma stays "σ"
        return found == num_paragraphs and "".join(c.lower() for c in head) == first_word

    return check


# --- content -----------------------------------------------------------------------------------


def _placeholders(text: str) -> int:
    """Non-overlapping ``\\[.*?\\]`` matches: a "[" and the first "]" after it on its line."""
    found = 0
    for line in text.split("\n"):
        opening = line.find("[")
        while opening != -1:
            closing = line.find("]", opening + 1)
            if closing == -1:
                break
            found += 1
            opening = line.find("[", closing + 1)
    return found


def number_placeholders(*, num_placeholders: int | None = None) -> Check:
    """At least ``num_placeholders`` square-bracket spans (``[]`` counts, one line each)."""
    draws = Draws("detectable_content:number_placeholders")
    num_placeholders = draws.count("num_placeholders", num_placeholders)
    draws.settle()

    def check(response: str) -> bool:
        return bool(_placeholders(response) >= num_placeholders)

    return check


_PPS = re.compile(r"p\.\s?p\.\s?s")
_PS = re.compile(r"p\.\s?s\.")


def postscript(*, postscript_marker: str | None = None) -> Check:
    """The marker appears anywhere (not only at a line's start), ignoring case. "P.P.S" and
    "P.S." allow a space after each dot ("P.P.S" then also matches "p.p.s."); any other marker
    is lowercased and taken as a regular expression (an empty one always matches). A marker
    that is not a string raises when checked."""
    draws = Draws("detectable_content:postscript")
    marker = postscript_marker.strip() if isinstance(postscript_marker, str) else postscript_marker
    if marker is None:
        draws.note("postscript_marker")
    draws.settle()

    def check(response: str) -> bool:
        text = response.lower()
        if marker == "P.P.S":
            return bool(_PPS.search(text))
        if marker == "P.S.":
            return bool(_PS.search(text))
        assert marker is not None
        return bool(re.search(r"\s*" + marker.lower() + r".*$", text, flags=re.MULTILINE))

    return check


# --- format ------------------------------------------------------------------------------------

_NOT_SPACE = re.compile(r"\S")
_STAR_BULLET = re.compile(r"\*[^*].*$", re.MULTILINE)
_DASH_BULLET = re.compile(r"-.*$", re.MULTILINE)


def _lines_starting(text: str, head: re.Pattern[str]) -> int:
    """Non-overlapping matches of ``^\\s*`` + ``head`` (multiline) in linear time: from each
    line start the blank run is skipped once, as every line start within it would find the same
    first character. A match may run past its line (``[^*]`` takes a newline), and the next
    line start is then after it."""
    found = 0
    start = 0
    while (first := _NOT_SPACE.search(text, start)) is not None:
        matched = head.match(text, first.start())
        if matched is None:
            end = first.start()
        else:
            found += 1
            end = matched.end()
            if text[end - 1] == "\n":  # it ended on a line start
                start = end
                continue
        newline = text.find("\n", end)
        if newline == -1:
            break
        start = newline + 1
    return found


def number_bullet_lists(*, num_bullets: int | None = None) -> Check:
    """Exactly ``num_bullets`` lines whose first non-blank character is "-" (so "---" rules
    count), or "*" followed by anything but "*" (so "**bold**" does not count, and a lone "*"
    takes the next line as its text, that line then not counted)."""
    draws = Draws("detectable_format:number_bullet_lists")
    num_bullets = draws.count("num_bullets", num_bullets)
    draws.settle()

    def check(response: str) -> bool:
        bullets = _lines_starting(response, _STAR_BULLET) + _lines_starting(response, _DASH_BULLET)
        return bool(bullets == num_bullets)

    return check


def constrained_response() -> Check:
    """One of "My answer is yes.", "… no.", "… maybe." appears anywhere (case matters)."""

    def check(response: str) -> bool:
        return any(option in response for option in CONSTRAINED_RESPONSE_OPTIONS)

    return check


_HIGHLIGHT = re.compile(r"\*[^\n*]*\*")
_BOLD = re.compile(r"\*\*[^\n*]*\*\*")


def number_highlighted_sections(*, num_highlights: int | None = None) -> Check:
    """At least ``num_highlights`` non-blank ``*text*`` plus ``**text**`` spans (one line, no
    "*" inside), each pattern counted on its own: "**bold**" counts once (its single-star
    matches are empty), "*a* *b*" twice, but so does "*a*b*c*" ("*a*", "*c*")."""
    draws = Draws("detectable_format:number_highlighted_sections")
    num_highlights = draws.count("num_highlights", num_highlights)
    draws.settle()

    def check(response: str) -> bool:
        single = sum(1 for span in _HIGHLIGHT.findall(response) if span[1:-1].strip())
        double = sum(1 for span in _BOLD.findall(response) if span[2:-2].strip())
        return bool(single + double >= num_highlights)

    return check


def multiple_sections(
    *, section_spliter: str | None = None, num_sections: int | None = None
) -> Check:
    """At least ``num_sections`` matches of the splitter (a case-sensitive regular expression,
    stripped) followed by a number, anywhere in the text ("SubSection 2" counts). Counted as
    ``re.split`` parts less one, so a group in the splitter counts each match more than once."""
    draws = Draws("detectable_format:multiple_sections")
    spliter = section_spliter.strip() if isinstance(section_spliter, str) else section_spliter
    if spliter is None:
        draws.note("section_spliter")
    num_sections = draws.count("num_sections", num_sections)
    draws.settle()

    def check(response: str) -> bool:
        assert spliter is not None
        parts = re.split(r"\s?" + spliter + r"\s?\d+\s?", response)
        return bool(len(parts) - 1 >= num_sections)

    return check


def json_format() -> Check:
    """The response, stripped of a leading ```json / ```Json / ```JSON / ``` fence (each tried
    in turn, so several can go) and a trailing ```, is JSON (a bare number or string is too).
    JSON nested past Python's recursion limit raises ``RecursionError``, as there."""

    def check(response: str) -> bool:
        text = response.strip()
        for fence in _JSON_FENCES:
            text = text.removeprefix(fence)
        text = text.removesuffix("```").strip()
        try:
            json.loads(text)
        except ValueError:
            return False
        return True

    return check


def _has_title(text: str) -> bool:
    """A ``<<[^\\n]+>>`` match whose text, "<" and ">" stripped from its ends, is not blank.
    On each line the only candidate runs from the first "<<" to the last ">>" (greedy)."""
    for line in text.split("\n"):
        opening = line.find("<<")
        closing = line.rfind(">>")
        found = opening != -1 and closing >= opening + 3
        if found and line[opening : closing + 2].lstrip("<").rstrip(">").strip():
            return True
    return False


def title() -> Check:
    """A ``<<title>>`` on one line. The greedy match runs to the line's last ">>", so
    "<<>> and <<a>>" has a title ("<<>> and <<a>>" stripped of its ends is not blank)."""
    return _has_title


def two_responses() -> Check:
    """Exactly two non-blank parts between ``******`` separators, different once stripped. A
    blank part between two separators fails; ``*******`` leaves a "*" as a response."""

    def check(response: str) -> bool:
        parts = response.split("******")
        if any(not part.strip() for part in parts[1:-1]):
            return False
        answers = [part.strip() for part in parts if part.strip()]
        return len(answers) == 2 and answers[0] != answers[1]

    return check


def repeat_prompt(*, prompt_to_repeat: str | None = None) -> Check:
    """The stripped response starts with the stripped prompt, ignoring case. open-instruct
    refuses a missing or empty prompt with ``ValueError`` (it draws none)."""
    if not prompt_to_repeat:
        raise ValueError("combination:repeat_prompt: prompt_to_repeat must be given")
    prompt = prompt_to_repeat

    def check(response: str) -> bool:
        return response.strip().lower().startswith(prompt.strip().lower())

    return check


def end_checker(*, end_phrase: str | None = None) -> Check:
    """The response, stripped of whitespace and then of double quotes, ends with the phrase,
    ignoring case (an empty phrase always). A phrase that is not a string raises when
    checked."""
    draws = Draws("startend:end_checker")
    if end_phrase is None:
        draws.note("end_phrase")
    draws.settle()
    phrase = end_phrase

    def check(response: str) -> bool:
        assert phrase is not None
        return response.strip().strip('"').lower().endswith(phrase.strip().lower())

    return check


def no_comma() -> Check:
    """No ASCII comma (others, such as "，", pass)."""

    def check(response: str) -> bool:
        return "," not in response

    return check


def quotation() -> Check:
    """The stripped response starts and ends with '"' (a lone '"' does not count)."""

    def check(response: str) -> bool:
        text = response.strip()
        return len(text) > 1 and text[0] == '"' and text[-1] == '"'

    return check


#: Instruction id → builder (open-instruct's ``INSTRUCTION_DICT`` for IFEval's own ids).
INSTRUCTIONS: dict[str, Callable[..., Check]] = {
    "keywords:existence": keyword_existence,
    "keywords:frequency": keyword_frequency,
    "keywords:forbidden_words": forbidden_words,
    "keywords:letter_frequency": letter_frequency,
    "letters:letter_counting2": letter_frequency,
    "language:response_language": response_language,
    "length_constraints:number_sentences": number_sentences,
    "length_constraints:number_paragraphs": number_paragraphs,
    "length_constraints:number_words": number_words,
    "length_constraints:nth_paragraph_first_word": nth_paragraph_first_word,
    "detectable_content:number_placeholders": number_placeholders,
    "detectable_content:postscript": postscript,
    "detectable_format:number_bullet_lists": number_bullet_lists,
    "detectable_format:constrained_response": constrained_response,
    "detectable_format:number_highlighted_sections": number_highlighted_sections,
    "detectable_format:multiple_sections": multiple_sections,
    "detectable_format:json_format": json_format,
    "detectable_format:title": title,
    "combination:two_responses": two_responses,
    "combination:repeat_prompt": repeat_prompt,
    "startend:end_checker": end_checker,
    "change_case:capital_word_frequency": capital_word_frequency,
    "change_case:english_capital": english_capital,
    "change_case:english_lowercase": english_lowercase,
    "punctuation:no_comma": no_comma,
    "startend:quotation": quotation,
}
