"""Finding and comparing final answers to math problems, as open-instruct's ``math_utils.py`` does.

Three extractions (the last ``\\boxed{…}``/``\\fbox{…}``; Minerva's "Final Answer: The final answer
is … I hope it is correct."; the last ``$…$``), Minerva's normalisation (Lewkowycz et al. 2022,
appendix D), Hendrycks' MATH string normalisation, and equivalence by sympy. Their quirks are kept
on purpose, because a policy trained against open-instruct's reward learns them:

- ``\\boxed 5`` (a space, no braces) wins over every braced box, and ends at the next ``$``;
- Minerva's normalisation keeps only what follows the last ``=`` and drops words such as
  "units", "feet" or "an " anywhere in the answer;
- Hendrycks' normalisation gives up on some inputs (``a/b`` with non-integers, two ``\\text{ ``);
  the strings are then compared as they are.

LaTeX is parsed as open-instruct parses it, by sympy's ANTLR backend, whose parser needs
``antlr4-python3-runtime==4.11``; verl's config stack (omegaconf) needs 4.9 in the same
environment. So the 4.11 runtime lives in a folder of its own (:func:`antlr_runtime_dir`,
installed by ``judgeflow dev antlr-runtime``; the bootstrap does it), which the verifier sandbox's
child process (where training and evaluation check a policy's text) puts first on its path before
anything imports antlr4 (:func:`use_antlr_runtime`). Where that runtime cannot load (the folder
is missing, or a process that already imported omegaconf's 4.9), sympy's Lark backend parses
instead (:func:`latex_backend` says which): it refuses some answers ANTLR's grammar and error
recovery accept (``10,000`` for 10000; ANTLR parses ``1,2`` as 1).
The sympy step runs on bounded input only (:data:`MAX_SYMPY_CHARS`); the caller bounds time.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

INVALID_ANSWER = "[invalidanswer]"
#: Longer candidate answers are not handed to sympy (it can run for minutes); they still
#: count as equal when the strings match after normalisation.
MAX_SYMPY_CHARS = 400

_MINERVA = re.compile(r"Final Answer: The final answer is(.*?). I hope it is correct.")

# Minerva's substitutions and removals, in their order (order matters: "an " before "a ").
_SUBSTITUTIONS = (
    ("an ", ""),
    ("a ", ""),
    (".$", "$"),
    ("\\$", ""),
    ("\\ ", ""),
    (" ", ""),
    ("mbox", "text"),
    (",\\text{and}", ","),
    ("\\text{and}", ","),
    ("\\text{m}", "\\text{}"),
)
_REMOVED = (
    "square", "ways", "integers", "dollars", "mph", "inches", "ft", "hours", "km", "units",
    "\\ldots", "sue", "points", "feet", "minutes", "digits", "cents", "degrees", "cm", "gm",
    "pounds", "meters", "meals", "edges", "students", "childrentickets", "multiples",
    "\\text{s}", "\\text{.}", "\\text{\ns}", "\\text{}^2", "\\text{}^3", "\\text{\n}",
    "\\text{}", "\\mathrm{th}", "^\\circ", "^{\\circ}", "\\;", ",\\!", "{,}", '"', "\\dots",
)  # fmt: skip


def last_boxed(text: str) -> str | None:
    """The last ``\\boxed{…}`` (or ``\\fbox{…}``) with its braces balanced, or ``\\boxed x``."""
    if "\\boxed " in text:
        return "\\boxed " + text.split("\\boxed ")[-1].split("$")[0]
    start = text.rfind("\\boxed")
    if start < 0:
        start = text.rfind("\\fbox")
        if start < 0:
            return None
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def unbox(boxed: str) -> str | None:
    """What is inside ``\\boxed{…}`` / ``\\boxed x``; None for anything else (``\\fbox{…}``)."""
    if "\\boxed " in boxed:
        return boxed[len("\\boxed ") :] if boxed.startswith("\\boxed ") else None
    if boxed.startswith("\\boxed{") and boxed.endswith("}"):
        return boxed[len("\\boxed{") : -1]
    return None


def minerva_answer(text: str) -> str:
    """The answer of Minerva's closing sentence, or :data:`INVALID_ANSWER`."""
    match = _MINERVA.search(text + "I hope it is correct.")
    return match.group(1).strip() if match else INVALID_ANSWER


def _normalize_minerva_shorthand(answer: str) -> str:
    answer = re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}", answer)
    return re.sub(r"(sqrt)([^{])", "sqrt{\\2}", answer)


def _dollar_spans(answer: str) -> str:
    """``re.sub(r"(.*?)(\\$)(.*?)(\\$)(.*)", "$\\3$", answer)``, in linear time.

    ``.`` stops at a newline, so the regex works line by line: a line with two ``$`` or more
    becomes ``$<what lies between its first two>$``; any other line is left as it is. The regex
    itself is quadratic on a long line with fewer than two ``$`` (a policy's whole output, when
    nothing else was found), which is what makes open-instruct's check run for minutes.
    """
    lines = answer.split("\n")
    for i, line in enumerate(lines):
        first = line.find("$")
        second = line.find("$", first + 1) if first >= 0 else -1
        if second >= 0:
            lines[i] = "$" + line[first + 1 : second] + "$"
    return "\n".join(lines)


def normalize_final_answer(answer: str) -> str:
    """Minerva's normalisation of a final answer (appendix D of Lewkowycz et al. 2022)."""
    answer = answer.split("=")[-1]
    for before, after in _SUBSTITUTIONS:
        answer = answer.replace(before, after)
    for expression in _REMOVED:
        answer = answer.replace(expression, "")
    answer = _dollar_spans(answer)
    answer = re.sub(r"(\\text\{)(.*?)(\})", "\\2", answer)
    answer = re.sub(r"(\\textbf\{)(.*?)(\})", "\\2", answer)
    answer = re.sub(r"(\\overline\{)(.*?)(\})", "\\2", answer)
    answer = re.sub(r"(\\boxed\{)(.*)(\})", "\\2", answer)
    answer = _normalize_minerva_shorthand(answer)
    answer = answer.replace("$", "")
    if answer.replace(",", "").isdigit():
        answer = answer.replace(",", "")
    return answer


# ------------------------------------------------------------------ Hendrycks' MATH normalisation


class _GiveUp(Exception):
    """Hendrycks' normalisation failed on this string: compare the raw strings instead."""


def _fix_fracs(text: str) -> str:
    head, *rest = text.split("\\frac")
    out = head
    for part in rest:
        out += "\\frac"
        if not part:
            raise _GiveUp  # theirs indexes part[0]
        if part[0] == "{":
            out += part
            continue
        if len(part) < 2:
            return text  # their assert, caught right there: the string unchanged
        a, b, tail = part[0], part[1], part[2:]
        out += "{" + a + "}{" + b + "}" + tail if b != "{" else "{" + a + "}" + b + tail
    return out


def _fix_a_slash_b(text: str) -> str:
    parts = text.split("/")
    if len(parts) != 2:
        return text
    try:
        a, b = int(parts[0]), int(parts[1])
    except ValueError as exc:  # theirs lets int()'s ValueError escape
        raise _GiveUp from exc
    if text != f"{a}/{b}":
        return text
    return "\\frac{" + str(a) + "}{" + str(b) + "}"


def _remove_right_units(text: str) -> str:
    if "\\text{ " not in text:
        return text
    parts = text.split("\\text{ ")
    if len(parts) != 2:
        raise _GiveUp
    return parts[0]


def _fix_sqrt(text: str) -> str:
    if "\\sqrt" not in text:
        return text
    head, *rest = text.split("\\sqrt")
    out = head
    for part in rest:
        if not part:
            raise _GiveUp  # theirs indexes part[0]
        out += "\\sqrt{" + part[0] + "}" + part[1:] if part[0] != "{" else "\\sqrt" + part
    return out


def strip_string(text: str) -> str:
    """Hendrycks' MATH normalisation; raises :class:`_GiveUp` where theirs raises."""
    text = text.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    text = text.replace("tfrac", "frac").replace("dfrac", "frac")
    text = text.replace("\\left", "").replace("\\right", "")
    text = text.replace("^{\\circ}", "").replace("^\\circ", "")
    text = text.replace("\\$", "")
    text = _remove_right_units(text)
    text = text.replace("\\%", "")
    text = text.replace(" .", " 0.").replace("{.", "{0.")
    if not text:
        return text
    if text[0] == ".":
        text = "0" + text
    sides = text.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        text = sides[1]
    text = _fix_sqrt(text)
    text = text.replace(" ", "")
    text = _fix_fracs(text)
    if text == "0.5":
        text = "\\frac{1}{2}"
    return _fix_a_slash_b(text)


def hendrycks_is_equiv(a: str | None, b: str | None) -> bool:
    """Equal after Hendrycks' normalisation (equal as given where it gives up)."""
    if a is None or b is None:
        return a is None and b is None
    try:
        return strip_string(a) == strip_string(b)
    except (_GiveUp, IndexError):
        return a == b


#: open-instruct's bound on one sympy comparison (``math_utils.timeout(seconds=5)``).
SYMPY_TIMEOUT_S = 5


#: open-instruct's ANTLR runtime (what sympy's LaTeX parser was generated with).
ANTLR_RUNTIME = "antlr4-python3-runtime==4.11.0"


def antlr_runtime_dir() -> Path:
    """Where the ANTLR 4.11 runtime is kept apart: ``$JUDGEFLOW_ANTLR_RUNTIME``, else a folder
    of the environment judgeflow runs in."""
    given = os.environ.get("JUDGEFLOW_ANTLR_RUNTIME")
    return Path(given) if given else Path(sys.prefix) / "judgeflow-antlr4-4.11"


def use_antlr_runtime() -> bool:
    """Put the ANTLR 4.11 runtime first on this process's path, if it is installed and nothing
    here imported antlr4 yet; for a process that parses LaTeX only (the verifier sandbox's
    child): omegaconf, in the same process, would break on it."""
    folder = antlr_runtime_dir()
    if "antlr4" in sys.modules or not antlr_runtime_installed(folder):
        return False
    sys.path.insert(0, str(folder))
    return True


def antlr_runtime_installed(folder: Path) -> bool:
    """The 4.11 runtime is whole in `folder`: its package and its metadata (which sympy reads
    to check the version)."""
    return (folder / "antlr4").is_dir() and any(
        folder.glob("antlr4_python3_runtime-4.11*.dist-info")
    )


@functools.cache
def latex_backend() -> Literal["antlr", "lark"]:
    """sympy's ANTLR backend (open-instruct's) when its runtime loads in this process, else
    its Lark backend."""
    from sympy.parsing.latex import parse_latex

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return "antlr" if str(parse_latex("x+1", backend="antlr")) == "x + 1" else "lark"
    except Exception:  # ImportError: no 4.11 runtime here (sympy checks its version)
        return "lark"


def sympy_is_equiv(a: str, b: str) -> bool:
    """Both parse as LaTeX and their difference simplifies to 0. A parse error, a failed
    subtraction or a comparison past :data:`SYMPY_TIMEOUT_S` is "not equal", as in
    open-instruct. The alarm only works in a main thread (the sandbox's child runs there) and
    cannot stop a single long C call; the sandbox's own timeout is the backstop."""
    if len(a) > MAX_SYMPY_CHARS or len(b) > MAX_SYMPY_CHARS:
        return False
    import lark  # noqa: F401  (sympy's Lark backend: without it every comparison would be False)
    import sympy
    from sympy.parsing.latex import parse_latex

    backend = latex_backend()
    try:
        with _alarm(SYMPY_TIMEOUT_S):
            difference = parse_latex(a, backend=backend) - parse_latex(b, backend=backend)
            return bool(sympy.simplify(difference) == 0)
    except Exception:  # the alarm, parse errors, TypeError on subtracting relations, sympy's
        return False


class _SympyTimeout(Exception):
    pass


@contextlib.contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise _SympyTimeout

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)


def is_equiv(answer: str, label: str) -> bool:
    """open-instruct's test, ``is_equiv(...) or hendrycks_is_equiv(...)``, with the cheap string
    comparison first: the same answer whenever both finish, and no sympy call when the strings
    already agree."""
    return hendrycks_is_equiv(answer, label) or sympy_is_equiv(answer, label)
