"""GRRM (Group Relative Reward Model) prompt and SFT target text, exactly as the reference trains it.

The prompt is the GRRM reference's `ranking_score` group-quality prompt without notes or a
reference translation; the target is its `get_response(..., "ranking_score")`. Both must stay
byte-identical: the RLVR stage starts from a model SFT-trained on this wording, and the reward
(`judgeflow.rewards.grrm`) parses the last four lines of exactly this target layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: What "blank" means for names and source texts (Arrow's ascii_trim_whitespace agrees).
ASCII_WHITESPACE = " \t\n\r\x0b\x0c"
#: Candidate labels in order; a group has 2 to 8 candidates.
LABELS = ("A", "B", "C", "D", "E", "F", "G", "H")
MIN_CANDIDATES = 2
MAX_CANDIDATES = len(LABELS)

#: Two-letter codes the GRRM reference knows. A two-letter code not listed here is an error;
#: longer strings are taken to be language names already and pass through unchanged.
LANG_NAMES: Mapping[str, str] = {
    "en": "English",
    "zh": "Chinese",
    "de": "German",
    "ru": "Russian",
    "ko": "Korean",
    "ja": "Japanese",
    "fr": "French",
    "es": "Spanish",
    "pt": "Portuguese",
    "it": "Italian",
    "nl": "Dutch",
    "th": "Thai",
    "ro": "Romanian",
    "ar": "Arabic",
    "el": "Greek",
    "vi": "Vietnamese",
    "uk": "Ukrainian",
}

GRRM_PROMPT_HEAD = (
    "Given a source text in {src_lang_name} and multiple translation candidates in "
    "{trg_lang_name}. Perform a step by step analysis and comparison of the translation quality "
    "for the candidates. Finally, rank and score the candidates with integer scores on a scale "
    "from 0 to 10.\n\nSource text:\n```\n{src_text}\n```\n\n"
)
#: One block per candidate; blocks follow each other with nothing in between.
GRRM_CANDIDATE_BLOCK = "Translation {label}:\n```\n{text}\n```\n"

#: What follows the cleaned analysis in the SFT target (and what the reward parses back):
#: `ranking` is the tiers joined with `RANK_STEP`, labels inside a tie with `RANK_TIE`; `scores`
#: is `SCORE_ITEM` per label in ranking order, joined with `SCORES_SEPARATOR`.
GRRM_VERDICT_BLOCK = "\n\n### Final Ranking:\n\n{ranking}\n\n### Scores:\n\n{scores}\n"
RANK_STEP = " > "
RANK_TIE = " = "
SCORE_ITEM = "{label}: {score}"
SCORES_SEPARATOR = ", "

#: A last analysis line containing any of these is the annotator's own verdict; the target
#: replaces it with the structured ranking and scores.
VERDICT_WORDS = ("Score", "score", "Scoring", "scoring", "Ranking", "ranking")


def language_name(code: str) -> str:
    """English name for a two-letter code; longer names unchanged. Raises ValueError otherwise."""
    if len(code) == 2:
        try:
            return LANG_NAMES[code]
        except KeyError:
            known = ", ".join(LANG_NAMES)
            raise ValueError(f"unknown language code {code!r} (known: {known})") from None
    if len(code) < 2 or not code.strip(ASCII_WHITESPACE):
        raise ValueError(f"{code!r} is neither a two-letter language code nor a language name")
    return code


def prompt_head(src_lang_name: str, trg_lang_name: str, src_text: str) -> str:
    """The prompt up to the first candidate block (shared by every ordering of a group).

    `str.format` never rescans substituted text, so braces in the source text are kept verbatim.
    """
    return GRRM_PROMPT_HEAD.format(
        src_lang_name=src_lang_name, trg_lang_name=trg_lang_name, src_text=src_text
    )


def candidate_blocks(candidates: Sequence[str]) -> str:
    """`Translation A:` … blocks for candidates already in label order."""
    return "".join(
        GRRM_CANDIDATE_BLOCK.format(label=label, text=text)
        for label, text in zip(LABELS, candidates, strict=False)
    )


def render_grrm_prompt(
    src_lang_name: str, trg_lang_name: str, src_text: str, candidates: Sequence[str]
) -> str:
    """The GRRM user prompt for 2 to 8 candidates (labels A, B, … in the given order)."""
    if not MIN_CANDIDATES <= len(candidates) <= MAX_CANDIDATES:
        raise ValueError(f"GRRM needs 2 to 8 candidates, got {len(candidates)}")
    return prompt_head(src_lang_name, trg_lang_name, src_text) + candidate_blocks(candidates)


_SOURCE_OPEN = "\n\nSource text:\n```\n"
_SOURCE_CLOSE = "\n```\n\n" + GRRM_CANDIDATE_BLOCK.split("{label}")[0] + LABELS[0] + ":"


def parse_source_text(prompt: str) -> str | None:
    """The source text of a GRRM prompt (what decontamination hashes); None if not one."""
    if not prompt.startswith("Given a source text in "):
        return None
    _, found, rest = prompt.partition(_SOURCE_OPEN)
    text, closed, _ = rest.partition(_SOURCE_CLOSE)
    return text if found and closed else None


#: Characters for which Python's `str.strip` / `str.splitlines` differ from trimming `" \t\n"`
#: and splitting on `"\n"`: every other `str.isspace` character (line breaks included).
#: Preparation cleans analyses without these in Arrow, and the rest with `clean_analysis`.
UNUSUAL_WHITESPACE = (
    "\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def clean_analysis(analysis: str) -> str:
    """Strip, then drop the last line if it holds a verdict word (as the reference does).

    Like the reference, lines are split with `str.splitlines` and re-joined with `\\n`, so
    `\\r\\n` and other line breaks become `\\n`, and what precedes a dropped line is not
    stripped again.
    """
    lines = analysis.strip().splitlines()
    if lines and any(word in lines[-1] for word in VERDICT_WORDS):
        lines.pop()
    return "\n".join(lines)


def rank_order(scores: Sequence[int]) -> list[list[str]]:
    """Tiers of labels, best first: score descending, label ascending inside a tie."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    tiers: list[list[str]] = []
    previous: int | None = None
    for i in order:
        if previous is None or scores[i] != previous:
            tiers.append([])
        tiers[-1].append(LABELS[i])
        previous = scores[i]
    return tiers


def ranking_line(scores: Sequence[int]) -> str:
    """E.g. `B > A = C`: ties joined with ` = `, tiers with ` > `."""
    return RANK_STEP.join(RANK_TIE.join(tier) for tier in rank_order(scores))


def scores_line(scores: Sequence[int]) -> str:
    """E.g. `B: 9, A: 7, C: 7`: `L: s` in ranking order, joined by `, `."""
    index = {label: i for i, label in enumerate(LABELS)}
    return SCORES_SEPARATOR.join(
        SCORE_ITEM.format(label=label, score=scores[index[label]])
        for tier in rank_order(scores)
        for label in tier
    )


def verdict_block(scores: Sequence[int]) -> str:
    """What follows the analysis in the target. (Preparation renders whole batches of these in
    Arrow from the same constants; this is the one-row definition it is tested against.)"""
    return GRRM_VERDICT_BLOCK.format(ranking=ranking_line(scores), scores=scores_line(scores))


def render_grrm_target(analysis: str, scores: Sequence[int]) -> str:
    """The SFT assistant turn: cleaned analysis, `### Final Ranking:` and `### Scores:` blocks."""
    return clean_analysis(analysis) + verdict_block(scores)


def ground_truth_json(scores: Sequence[int]) -> str:
    """`{"A": 7, "B": 5}`: what `json.dumps` gives for the label -> score dict, built directly
    (labels are plain letters and scores ints, so no escaping is ever needed)."""
    return (
        "{" + ", ".join(f'"{label}": {s}' for label, s in zip(LABELS, scores, strict=False)) + "}"
    )
