"""open-instruct's verifiers: score a policy's response against a row's ground truth, 0 to 1.

Each verifier here scores exactly as the one of the same name in open-instruct's
``open_instruct/ground_truth_utils.py`` (quirks included, see the functions); a row's
``dataset`` names its verifier, case-insensitively, and may be remapped as open-instruct's
``--remap_verifier old=new`` does. :func:`verify` is the plain, in-process check;
:class:`judgeflow.rewards.rlvr.sandbox.VerifierSandbox` bounds its time, memory and input size
for untrusted text.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from judgeflow.rewards.rlvr import math_answers as m
from judgeflow.rewards.rlvr.if_functions import remove_thinking_section, verify_ifeval_old

__all__ = [
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


def reference_f1(prediction: str, label: Any) -> float:
    """open-instruct's ``F1Verifier``: token F1 of the answer (thinking removed) against the
    reference, SQuAD-normalised; a list of references scores its best."""
    answer = normalize_answer(remove_thinking_section(prediction)).split()
    best = 0.0
    for reference in label if isinstance(label, list | tuple) else [label]:
        truth = normalize_answer(str(reference)).split()
        same = sum((Counter(answer) & Counter(truth)).values())
        if same:
            precision, recall = same / len(answer), same / len(truth)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def flan(prediction: str, label: Any) -> float:
    """What follows the last "The answer is: " (or the whole text) equals the label, SQuAD-style."""
    answer = prediction.split("The answer is: ")[-1].strip()
    return float(normalize_answer(answer) == normalize_answer(label))


def ifeval_old(prediction: str, label: Any) -> float:
    """Tulu 3's instruction-following constraints: ``{"func_name": …, <its arguments>}``."""
    return verify_ifeval_old(prediction, label)


#: Verifier name (lowercase, as a row's ``dataset`` names it) → function.
VERIFIERS: dict[str, Callable[[str, Any], float]] = {
    "gsm8k": gsm8k,
    "math": math,
    "strict_math": strict_math,
    "string_matcher": string_matcher,
    "flan": flan,
    "ifeval_old": ifeval_old,
}


def resolve(dataset: str, remap: Mapping[str, str] | None = None) -> str:
    """The verifier a row's ``dataset`` names: lowercased, then remapped (``old → new``)."""
    name = dataset.lower()
    if remap:
        lowered = {old.lower(): new.lower() for old, new in remap.items()}
        name = lowered.get(name, name)
    if name not in VERIFIERS:
        known = ", ".join(sorted(VERIFIERS))
        raise UnknownVerifier(
            f"no verifier {dataset!r}; judgeflow has: {known} (a dataset of another name can be "
            "remapped to one of them, as open-instruct's --remap_verifier old=new)"
        )
    return name


def verify(name: str, prediction: str, label: Any) -> float:
    """Score ``prediction`` against ``label`` with the verifier ``name`` (any case), 0 to 1."""
    return VERIFIERS[resolve(name)](prediction, label)
