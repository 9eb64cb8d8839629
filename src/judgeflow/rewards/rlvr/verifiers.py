"""open-instruct's verifiers: score a policy's response against a row's ground truth, 0 to 1.

Each verifier here scores exactly as the one of the same name in open-instruct's
``open_instruct/ground_truth_utils.py`` (quirks included, see the functions); a row's
``dataset`` names its verifier, case-insensitively, and may be remapped as open-instruct's
``--remap_verifier old=new`` does. :func:`verify` is the plain, in-process check;
:class:`judgeflow.rewards.rlvr.sandbox.VerifierSandbox` bounds its time, memory and input size
for untrusted text.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from judgeflow.rewards.rlvr import code_tests
from judgeflow.rewards.rlvr import math_answers as m
from judgeflow.rewards.rlvr.if_functions import remove_thinking_section, verify_ifeval_old
from judgeflow.rewards.rlvr.ifevalg import verify_ifeval

__all__ = [
    "CODE_VERIFIERS",
    "LENGTH_VERIFIERS",
    "MAX_LENGTH_VERIFIER_MAX_LENGTH",
    "VERIFIERS",
    "UnknownVerifier",
    "normalize_answer",
    "reference_f1",
    "remove_thinking_section",
    "resolve",
    "verify",
]


class UnknownVerifier(ValueError):
    """A row names a verifier judgeflow does not have."""


_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lowercase, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


_DIGIT_COMMA = re.compile(r"(\d),(\d)")
_NUMBER = re.compile(r"[-+]?(?:\d*\.\d+|\d+)")


def gsm8k(prediction: str, label: Any) -> float:
    """The last number (sign kept) equals the label as lowercase strings.

    Commas between digits go first, as ``re.sub`` finds them without overlap: ``1,234,567`` →
    ``1234567``, but ``1,2,3`` → ``12,3`` (the ``2`` was used by the first match), whose last
    number is ``3``. With no number at all the whole text is compared.
    """
    response = _DIGIT_COMMA.sub(r"\1\2", prediction)
    numbers = _NUMBER.findall(response)
    extracted = numbers[-1] if numbers else response
    return float(str(extracted).lower() == str(label).lower())


def math(prediction: str, label: Any) -> float:
    """``\\boxed{}`` and Minerva's final answer; failing both, the last ``$…$``; failing that,
    the whole text normalised and as is. Any candidate equivalent to the label scores 1."""
    candidates: list[str] = []
    boxed = m.last_boxed(prediction)
    inner = m.unbox(boxed) if boxed is not None else None
    if inner is not None:
        candidates.append(inner)
    minerva = m.normalize_final_answer(m.minerva_answer(prediction))
    if minerva != m.INVALID_ANSWER:
        candidates.append(minerva)
    if not candidates:
        dollars = [i for i, ch in enumerate(prediction) if ch == "$"]
        if len(dollars) > 1:
            candidates.append(m.normalize_final_answer(prediction[dollars[-2] + 1 : dollars[-1]]))
    if not candidates:
        candidates += [m.normalize_final_answer(prediction), prediction]
    return _any_equivalent(candidates, label)


def strict_math(prediction: str, label: Any) -> float:
    """Minerva's final answer only; without one, the whole text normalised."""
    minerva = m.normalize_final_answer(m.minerva_answer(prediction))
    if minerva != m.INVALID_ANSWER:
        return _any_equivalent([minerva], label)
    return _any_equivalent([m.normalize_final_answer(prediction)], label)


def _any_equivalent(candidates: list[str], label: Any) -> float:
    if not isinstance(label, str):  # open-instruct's comparisons fail on a non-string label
        return 0.0
    return float(any(m.is_equiv(answer, label) for answer in candidates))


def string_matcher(prediction: str, label: Any) -> float:
    """What lies in the last ``<answer>…</answer>`` equals the label, SQuAD-normalised; no tags
    (either one missing) scores 0."""
    if "<answer>" not in prediction or "</answer>" not in prediction:
        return 0.0
    answer = prediction.split("<answer>")[-1].split("</answer>")[0]
    return float(normalize_answer(answer) == normalize_answer(label))


def _f1(prediction: str, truth: str) -> float:
    """open-instruct's ``f1_score(...)["f1"]``: token F1, both sides SQuAD-normalised."""
    answer, reference = normalize_answer(prediction).split(), normalize_answer(truth).split()
    same = sum((Counter(answer) & Counter(reference)).values())
    if not same:
        return 0.0
    precision, recall = same / len(answer), same / len(reference)
    return 2 * precision * recall / (precision + recall)


def reference_f1(prediction: str, label: Any) -> float:
    """open-instruct's ``F1Verifier``: token F1 of the answer (thinking removed) against the
    reference, SQuAD-normalised; a list of references scores its best."""
    answer = remove_thinking_section(prediction)
    references = label if isinstance(label, list | tuple) else [label]
    return max((_f1(answer, str(reference)) for reference in references), default=0.0)


def string_f1(prediction: str, label: Any) -> float:
    """open-instruct's ``F1Verifier``: token F1 of the text after the last ``</think>``,
    ``<answer>`` tags removed, against the label. A label that is not a string (open-instruct
    raises on it) scores 0."""
    if not isinstance(label, str):
        return 0.0
    answer = prediction.split("</think>")[-1].replace("<answer>", "").replace("</answer>", "")
    return _f1(answer, label)


def puzzle(prediction: str, label: Any) -> float:
    """open-instruct's ``PuzzleMatcherVerifier``: the answer (thinking and ``<answer>`` tags
    removed) equals the label, SQuAD-normalised. A label that is not a string (open-instruct
    raises on it) scores 0."""
    if not isinstance(label, str):
        return 0.0
    return float(normalize_answer(remove_thinking_section(prediction)) == normalize_answer(label))


def re_search_f1(prediction: str, label: Any) -> float:
    """open-instruct's ``ReSearchVerifierF1`` (the ReSearch paper): the label is JSON (a list:
    the best of its items) or plain text; the answer is what follows the last ``<finish>`` up to
    the next ``</finish>``, and counts when either tag is there. An empty answer scores 0; a
    well-formed one with F1 0 scores 0.1, else its F1. A label open-instruct raises on (not a
    string, or an empty JSON list) scores 0."""
    if not isinstance(label, str):
        return 0.0
    try:
        truth: Any = json.loads(label)
    except json.JSONDecodeError:
        truth = label.strip()
    if "<finish>" not in prediction and "</finish>" not in prediction:
        return 0.0
    answer = prediction.split("<finish>")[-1].split("</finish>")[0]
    if not answer:
        return 0.0
    if isinstance(truth, list):
        if not truth:
            return 0.0
        f1 = max(_f1(answer, str(item)) for item in truth)
    else:
        f1 = _f1(answer, str(truth))
    return 0.1 if f1 == 0 else f1


_FINISH = re.compile(r"<finish>(.*?)</finish>", re.IGNORECASE | re.DOTALL)


def re_search(prediction: str, label: Any) -> float:
    """open-instruct's ``R1SearchVerifier`` (Search-R1): the first ``<finish>…</finish>`` (any
    case), stripped and SQuAD-normalised, equals one of the labels: the label parsed as JSON
    (a list, or one value), else the label itself (a list, or its stripped text)."""
    try:
        parsed = json.loads(label)
        labels = parsed if isinstance(parsed, list) else [parsed]
    except (json.JSONDecodeError, TypeError):
        labels = label if isinstance(label, list) else [str(label).strip()]
    found = _FINISH.search(prediction)
    if not found:
        return 0.0
    answer = found.group(1).strip()
    if not answer:
        return 0.0
    said = normalize_answer(answer)
    return float(any(said == normalize_answer(str(item)) for item in labels))


def flan(prediction: str, label: Any) -> float:
    """What follows the last "The answer is: " (or the whole text) equals the label, SQuAD-style."""
    answer = prediction.split("The answer is: ")[-1].strip()
    return float(normalize_answer(answer) == normalize_answer(label))


def ifeval_old(prediction: str, label: Any) -> float:
    """Tulu 3's instruction-following constraints: ``{"func_name": …, <its arguments>}``."""
    return verify_ifeval_old(prediction, label)


def ifeval(prediction: str, label: Any) -> float:
    """open-instruct's IFEvalG: the share of the label's instructions followed, the label the
    stringified ``[{"instruction_id": [...], "kwargs": [...]}]`` (:mod:`.ifevalg`)."""
    return verify_ifeval(prediction, label)


#: Verifier name (lowercase, as a row's ``dataset`` names it) → function.
VERIFIERS: dict[str, Callable[[str, Any], float]] = {
    "gsm8k": gsm8k,
    "math": math,
    "strict_math": strict_math,
    "string_matcher": string_matcher,
    "flan": flan,
    "ifeval_old": ifeval_old,
    "ifeval": ifeval,
    "string_f1": string_f1,
    "puzzle": puzzle,
    "re_search": re_search,
    "re_search_f1": re_search_f1,
}


#: open-instruct's default ``max_length_verifier_max_length``: what a response's distance from
#: its target length (in tokens) is divided by.
MAX_LENGTH_VERIFIER_MAX_LENGTH = 32768


def max_length(tokens: int, label: Any, scale: int = MAX_LENGTH_VERIFIER_MAX_LENGTH) -> float:
    """open-instruct's ``MaxLenVerifier``: ``1 - |tokens - float(label)| / scale``, the label
    being the length wanted. Not clipped, as there: a response further than ``scale`` tokens
    from the length wanted scores below 0. A label ``float`` cannot read raises, as there."""
    return 1 - abs(tokens - float(label)) / scale


def up_to_max_length(tokens: int, label: Any, scale: int = MAX_LENGTH_VERIFIER_MAX_LENGTH) -> float:
    """open-instruct's ``UpToMaxLenVerifier``: 1 up to the label's length, then
    ``1 - (tokens - float(label)) / scale`` (not clipped, as there)."""
    over = tokens - float(label)
    return 1.0 if over < 0 else 1 - over / scale


#: Verifiers that score a response's length in tokens (of the policy's tokenizer), not its text.
LENGTH_VERIFIERS: dict[str, Callable[[int, Any, int], float]] = {
    "max_length": max_length,
    "up_to_max_length": up_to_max_length,
}


#: Verifiers that run the response's program against the row's tests
#: (:mod:`judgeflow.rewards.rlvr.code_tests`).
CODE_VERIFIERS = code_tests.CODE_VERIFIERS


def resolve(dataset: str, remap: Mapping[str, str] | None = None) -> str:
    """The verifier a row's ``dataset`` names: lowercased, then remapped (``old → new``)."""
    name = dataset.lower()
    if remap:
        lowered = {old.lower(): new.lower() for old, new in remap.items()}
        name = lowered.get(name, name)
    if name not in VERIFIERS and name not in LENGTH_VERIFIERS and name not in CODE_VERIFIERS:
        known = ", ".join(sorted([*VERIFIERS, *LENGTH_VERIFIERS, *CODE_VERIFIERS]))
        raise UnknownVerifier(
            f"no verifier {dataset!r}; judgeflow has: {known} (a dataset of another name can be "
            "remapped to one of them, as open-instruct's --remap_verifier old=new)"
        )
    return name


def verify(
    name: str,
    prediction: str,
    label: Any,
    *,
    tokens: int | None = None,
    max_length_verifier_max_length: int = MAX_LENGTH_VERIFIER_MAX_LENGTH,
    code_max_execution_time: float = code_tests.MAX_EXECUTION_TIME,
    code_pass_rate_reward_threshold: float = code_tests.PASS_RATE_REWARD_THRESHOLD,
    code_apply_perf_penalty: bool = False,
    code_memory_mb: int = code_tests.CODE_MEMORY_MB,
) -> float:
    """Score ``prediction`` against ``label`` with the verifier ``name`` (any case), 0 to 1
    (the length verifiers: below 0 past their scale, as open-instruct's).

    The length verifiers (:data:`LENGTH_VERIFIERS`) score ``tokens``, the response's length in
    the policy's tokens, which their caller must give (open-instruct passes each verifier the
    response's token ids; only these two read them). The code verifiers
    (:data:`CODE_VERIFIERS`) run the response's program against the label's tests in a confined
    child process, with open-instruct's ``code_*`` settings."""
    resolved = resolve(name)
    if resolved in CODE_VERIFIERS:
        score, _ = code_tests.code_score(
            resolved, prediction, label, max_execution_time=code_max_execution_time,
            pass_rate_reward_threshold=code_pass_rate_reward_threshold,
            apply_perf_penalty=code_apply_perf_penalty, memory_mb=code_memory_mb,
        )  # fmt: skip
        return score
    if resolved in LENGTH_VERIFIERS:
        if tokens is None:
            raise ValueError(
                f"the {resolved} verifier scores the response's length in tokens: pass tokens="
            )
        return LENGTH_VERIFIERS[resolved](tokens, label, max_length_verifier_max_length)
    return VERIFIERS[resolved](prediction, label)
