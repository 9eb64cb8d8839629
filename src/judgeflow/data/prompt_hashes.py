"""Prompt hashes: what "the model saw this prompt in training" means, as a short string.

`prepare` stores one per row (`extra_info.prompt_hash` in verl rows, a `prompt_hash` column in
SFT files); evaluation compares the rows it is about to score with the hashes a model's lineage
trained on. The hash is over normalised text (Unicode NFKC, case-folded, whitespace collapsed),
so a prompt that differs only in case or spacing is the same prompt:

- judges: the query plus the responses, the responses in sorted order, so a pair shown as
  A/B and the same pair shown as B/A are one prompt;
- GRRM: the source text (every candidate order and subgroup of a group is one prompt);
- anything else (an SFT conversation not in a judge template): its user turns.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from judgeflow.data.templates import parse_pairwise, parse_pointwise

__all__ = [
    "HASH_CHARS",
    "chat_prompt_hash",
    "grrm_prompt_hash",
    "grrm_prompt_hashes",
    "judge_prompt_hash",
    "judge_prompt_hashes",
    "normalise",
    "row_prompt_hash",
    "text_prompt_hash",
]

#: Hex characters kept of the sha256 (64 bits: no collision in any realistic dataset).
HASH_CHARS = 16


#: Where an ASCII text may not be in `normalise`'s spacing already: two spaces, or a whitespace
#: character other than the space (Python's `str.split` splits on `\x1c`-`\x1f` too).
_IRREGULAR_SPACING = ("  ", "\n", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f")


def normalise(text: str) -> str:
    """NFKC, case-folded, runs of whitespace collapsed to one space, ends trimmed.

    The common text is quicker: an ASCII text with regular spacing is its own NFKC form,
    case-folds as it lower-cases and has no spacing to collapse.
    """
    if text.isascii() and text[:1] != " " and text[-1:] != " ":
        for irregular in _IRREGULAR_SPACING:  # a loop, not `any()`: this runs per text
            if irregular in text:
                break
        else:
            return text.lower()
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _digest(kind: str, parts: Iterable[str]) -> str:
    blob = "\x00".join([kind, *parts]).encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()[:HASH_CHARS]


def judge_prompt_hash(query: str, responses: Sequence[str]) -> str:
    """A judge prompt: query and responses, whatever order the responses are shown in."""
    return _digest("judge", [normalise(query), *sorted(normalise(r) for r in responses)])


def judge_prompt_hashes(
    queries: Sequence[str], responses: Sequence[str], responses_b: Sequence[str] | None = None
) -> list[str]:
    """`judge_prompt_hash` of every example of a batch (pointwise: `queries[i]`, `responses[i]`;
    pairwise: also `responses_b[i]`), the same values; judge preparation hashes every example.

    A query repeated from the example before (several responses to one query, a RewardBench2
    row's expansions) is normalised once.
    """
    sha256 = hashlib.sha256
    hashes: list[str] = []
    last_query, last_key = None, ""
    seconds = responses_b if responses_b is not None else [None] * len(responses)
    for query, response, other in zip(queries, responses, seconds, strict=True):
        if query != last_query:
            last_query, last_key = query, normalise(query)
        parts = [normalise(response)]
        if other is not None:
            parts = sorted([parts[0], normalise(other)])
        blob = "\x00".join(["judge", last_key, *parts])  # as _digest joins
        hashes.append(sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS])
    return hashes


def rlvr_prompt_hash(messages: Sequence[tuple[str, str]]) -> str:
    """A policy prompt: its user turns, normalised, in order, hashed as an SFT conversation's
    (`chat_prompt_hash`), so an SFT row with the same question is the same prompt. System turns do
    not count: the same question under another system prompt is the same prompt to
    decontamination."""
    return chat_prompt_hash([{"role": role, "content": content} for role, content in messages])


def grrm_prompt_hash(src_text: str) -> str:
    """A GRRM prompt: the source text being translated."""
    return _digest("grrm", [normalise(src_text)])


#: Where an ASCII text is not already in `normalise`'s spacing: a whitespace character other
#: than the space (Python's `str.split` splits on `\x1c`-`\x1f` too), two spaces, or a space
#: at either end (RE2: `$` is the end of the text only).
_IRREGULAR_ASCII_SPACING = r"[\t\n\x0b-\x0d\x1c-\x1f]|  |^ | $"


def grrm_prompt_hashes(src_texts: pa.Array) -> list[str]:
    """`grrm_prompt_hash` of every source text of a batch (an Arrow string array), the same
    values: GRRM preparation hashes each group, and this is on its critical path.

    An ASCII text with regular spacing (found with two Arrow kernels over the batch) is its own
    NFKC form and only needs lower-casing; any other text is normalised in full.
    """
    plain = pc.and_(
        pc.string_is_ascii(src_texts),
        pc.invert(pc.match_substring_regex(src_texts, _IRREGULAR_ASCII_SPACING)),
    ).to_numpy(zero_copy_only=False)
    nfkc, sha256 = unicodedata.normalize, hashlib.sha256
    hashes = []
    for text, simple in zip(src_texts.to_numpy(zero_copy_only=False), plain, strict=True):
        key = text.lower() if simple else " ".join(nfkc("NFKC", text).casefold().split())
        digest = sha256(("grrm\x00" + key).encode("utf-8", "surrogatepass"))  # as _digest joins
        hashes.append(digest.hexdigest()[:HASH_CHARS])
    return hashes


def text_prompt_hash(text: str) -> str:
    """Any other prompt: its whole normalised text."""
    return _digest("text", [normalise(text)])


def chat_prompt_hash(messages: Sequence[Mapping[str, Any]]) -> str:
    """The hash of a conversation's prompt: a judge template's query and responses when the
    user turn is one (an SFT row of the judge recipes), else the user turns' text."""
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    if len(users) == 1:
        pairwise = parse_pairwise(users[0])
        if pairwise is not None:
            return judge_prompt_hash(pairwise[0], pairwise[1:])
        pointwise = parse_pointwise(users[0])
        if pointwise is not None:
            return judge_prompt_hash(pointwise[0], pointwise[1:])
    return text_prompt_hash("\n".join(users))


def row_prompt_hash(mode: str, row: Mapping[str, Any]) -> str:
    """The prompt hash of a verl row: the one `prepare` stored (`extra_info.prompt_hash`), else
    computed from the prompt text (a parquet written by another tool or an older judgeflow)."""
    from judgeflow.data.grrm_template import parse_source_text

    extra = row.get("extra_info")
    if isinstance(extra, Mapping) and extra.get("prompt_hash"):
        return str(extra["prompt_hash"])
    messages = row.get("prompt") or []
    if mode == "rlvr":
        return rlvr_prompt_hash(
            [(str(m.get("role")), str(m.get("content") or "")) for m in messages]
        )
    if mode == "grrm":
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        source = parse_source_text(users[-1]) if users else None
        if source is not None:
            return grrm_prompt_hash(source)
    return chat_prompt_hash(messages)
