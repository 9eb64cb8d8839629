"""How IFEvalG reads a response: words, sentences, languages.

open-instruct's ``open_instruct/IFEvalG/instructions_util.py`` counts words with NLTK's
``RegexpTokenizer(r"\\w+")``, counts sentences with NLTK's English Punkt model (which NLTK 3.9+
serves from its ``punkt_tab`` tables), tokenizes with ``nltk.word_tokenize``, and splits sentences
for some checks with a regex splitter of its own (:func:`split_into_sentences`). The same NLTK
calls are made here; the Punkt tables must be in NLTK's data path, which ``judgeflow dev
nltk-punkt`` (the bootstrap runs it) fills from the package index: nothing is downloaded while a
policy trains.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = [
    "LANGUAGE_CODES",
    "PunktMissing",
    "count_sentences",
    "count_words",
    "punkt_available",
    "split_into_sentences",
    "word_tokenize",
]

#: ISO 639-1 codes IFEvalG's ``language:response_language`` accepts, with the names its
#: descriptions use (a code outside them makes open-instruct raise ``KeyError``).
LANGUAGE_CODES: dict[str, str] = {
    "en": "English", "es": "Spanish", "pt": "Portuguese", "ar": "Arabic", "hi": "Hindi",
    "fr": "French", "ru": "Russian", "de": "German", "ja": "Japanese", "it": "Italian",
    "bn": "Bengali", "uk": "Ukrainian", "th": "Thai", "ur": "Urdu", "ta": "Tamil",
    "te": "Telugu", "bg": "Bulgarian", "ko": "Korean", "pl": "Polish", "he": "Hebrew",
    "fa": "Persian", "vi": "Vietnamese", "ne": "Nepali", "sw": "Swahili", "kn": "Kannada",
    "mr": "Marathi", "gu": "Gujarati", "pa": "Punjabi", "ml": "Malayalam", "fi": "Finnish",
}  # fmt: skip


class PunktMissing(RuntimeError):
    """NLTK's English Punkt tables are not installed where NLTK looks for them."""


def punkt_available() -> bool:
    """NLTK finds its English Punkt tables (``tokenizers/punkt_tab/english``) on its data path,
    as it is now (looked up each time: NLTK keeps a tokenizer it once loaded)."""
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        return False
    return True


@functools.cache
def _punkt() -> Any:
    from nltk.tokenize import PunktTokenizer

    if not punkt_available():
        raise PunktMissing(
            "ifeval counts sentences with NLTK's English Punkt tables (tokenizers/punkt_tab/"
            "english), which are not in NLTK's data path: run `judgeflow dev nltk-punkt` (takes "
            "them from the package index) or `python -m nltk.downloader punkt_tab`, or point "
            "NLTK_DATA at a folder that has them"
        )
    return PunktTokenizer("english")


def count_sentences(text: str) -> int:
    """Sentences as NLTK's English Punkt model splits them (open-instruct's
    ``nltk.data.load("nltk:tokenizers/punkt/english.pickle")``, which NLTK 3.9+ answers with this
    same model from its tables)."""
    return len(_punkt().tokenize(text))


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize``: Punkt sentences, then NLTK's Treebank word tokenizer."""
    import nltk

    _punkt()  # the clear error, before NLTK's own download advice
    return list(nltk.word_tokenize(text))


_WORD = re.compile(r"\w+")


def count_words(text: str) -> int:
    """Runs of word characters (NLTK's ``RegexpTokenizer(r"\\w+")``, which is ``re.findall``)."""
    return len(_WORD.findall(text))


_ALPHABETS = "([A-Za-z])"
_PREFIXES = "(Mr|St|Mrs|Ms|Dr)[.]"
_SUFFIXES = "(Inc|Ltd|Jr|Sr|Co)"
_STARTERS = (
    r"(Mr|Mrs|Ms|Dr|Prof|Capt|Cpt|Lt|He\s|She\s|It\s|They\s|Their\s|Our\s|We\s|But\s|However\s"
    r"|That\s|This\s|Wherever)"
)
_ACRONYMS = "([A-Z][.][A-Z][.](?:[A-Z][.])?)"
_WEBSITES = "[.](com|net|org|io|gov|edu|me)"
_DIGITS = "([0-9])"

#: The splitter's steps in order: protect the dots that do not end a sentence (titles, web
#: addresses, decimals, initials, acronyms, company suffixes) as ``<prd>``, and mark the ones
#: that do as ``<stop>``.
_PROTECT: list[tuple[str, Any]] = [
    (_PREFIXES, "\\1<prd>"),
    (_WEBSITES, "<prd>\\1"),
    (_DIGITS + "[.]" + _DIGITS, "\\1<prd>\\2"),
    (r"\.{2,}", lambda found: "<prd>" * len(found.group(0)) + "<stop>"),
]
_MARK = [
    (r"\s" + _ALPHABETS + "[.] ", " \\1<prd> "),
    (_ACRONYMS + " " + _STARTERS, "\\1<stop> \\2"),
    (_ALPHABETS + "[.]" + _ALPHABETS + "[.]" + _ALPHABETS + "[.]", "\\1<prd>\\2<prd>\\3<prd>"),
    (_ALPHABETS + "[.]" + _ALPHABETS + "[.]", "\\1<prd>\\2<prd>"),
    (" " + _SUFFIXES + "[.] " + _STARTERS, " \\1<stop> \\2"),
    (" " + _SUFFIXES + "[.]", " \\1<prd>"),
    (" " + _ALPHABETS + "[.]", " \\1<prd>"),
]
#: A closing quote after the sentence's mark moves before it, so the mark ends the sentence.
_QUOTES = [(".”", "”."), ('."', '".'), ('!"', '"!'), ('?"', '"?')]


def split_into_sentences(text: str) -> list[str]:
    """IFEvalG's own regex sentence splitter (``instructions_util.split_into_sentences``), used
    by the first/last-word, key-sentence, position and composition checks: stripped sentences,
    a trailing empty one dropped."""
    text = (" " + text + "  ").replace("\n", " ")
    for pattern, repl in _PROTECT:
        text = re.sub(pattern, repl, text)
    text = text.replace("Ph.D.", "Ph<prd>D<prd>")
    for pattern, repl in _MARK:
        text = re.sub(pattern, repl, text)
    for old, new in _QUOTES:
        text = text.replace(old, new)
    for mark in ".?!":
        text = text.replace(mark, mark + "<stop>")
    sentences = [part.strip() for part in text.replace("<prd>", ".").split("<stop>")]
    if sentences and not sentences[-1]:
        sentences = sentences[:-1]
    return sentences
