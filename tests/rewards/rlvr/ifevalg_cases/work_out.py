"""Work out what open-instruct's IFEvalG says for each case of a case file, and write it back.

Not part of the suite: it needs open-instruct's ``open_instruct/IFEvalG`` (at e6c3044) on the
path, with its dependencies (nltk, langdetect, immutabledict, absl-py). The suite reads the
answers it wrote (``test_ifevalg.py``). Run, from a scratch folder holding open-instruct::

    PYTHONPATH=/path/to/open-instruct python tests/rewards/rlvr/ifevalg_cases/work_out.py FILE.json

Each case is ``{"id", "kwargs", "response"}``; this adds

- ``build``: ``"ok"``; ``"random"`` where ``build_description`` draws an argument (built under
  eight seeds, its arguments differ); or ``"raises: TypeName"``;
- ``follows``: ``check_following(response)`` (true/false), ``"raises: TypeName"``, or ``null``
  where the build did not give one instruction to check.

A case's kwargs are passed as open-instruct's verifier passes them (``None`` values dropped).

With ``--verifier``, each case is ``{"prediction", "label"}`` and this adds ``open_instruct``:
the score of open-instruct's own ``IFEvalVerifier`` (``ground_truth_utils.py``, imported with
the modules it needs for other verifiers stubbed out), or ``"raises: TypeName"``.
"""

from __future__ import annotations

import json
import logging
import random
import sys
from pathlib import Path

from open_instruct.IFEvalG import instructions_registry


def _build(instruction_id: str, kwargs: dict, seed: int):
    random.seed(seed)
    instruction = instructions_registry.INSTRUCTION_DICT[instruction_id](instruction_id)
    instruction.build_description(**kwargs)
    return instruction


def work_out(case: dict) -> dict:
    kwargs = {k: v for k, v in (case.get("kwargs") or {}).items() if v is not None}
    try:
        # built under eight seeds: a draw from a small range (randint(2, 3)) can agree twice
        first, *others = [_build(case["id"], kwargs, seed) for seed in range(1, 9)]
    except Exception as exc:
        return {**case, "build": f"raises: {type(exc).__name__}", "follows": None}
    try:
        same = all(first.get_instruction_args() == o.get_instruction_args() for o in others)
    except Exception:  # some classes cannot report their arguments; compare their state
        same = all(vars(first) == vars(other) for other in others)
    if not same:
        return {**case, "build": "random", "follows": None}
    try:
        follows: object = bool(first.check_following(case["response"]))
    except Exception as exc:
        follows = f"raises: {type(exc).__name__}"
    return {**case, "build": "ok", "follows": follows}


def _verifier():
    import types

    class Stub(types.ModuleType):  # the modules ground_truth_utils imports for other verifiers
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            if name == "setup_logger":
                return lambda *args, **kwargs: logging.getLogger("open_instruct")
            return {} if name.isupper() else (lambda *args, **kwargs: None)

    for name in (
        "context_window_checker",
        "logger_utils",
        "if_functions",
        "judge_utils",
        "math_utils",
        "rubrics",
        "rubrics.prompts",
        "rubrics.run_utils",
        "utils",
    ):
        sys.modules[f"open_instruct.{name}"] = Stub(name)
    import open_instruct
    from open_instruct import ground_truth_utils

    for name in ("context_window_checker", "logger_utils"):
        setattr(open_instruct, name, sys.modules[f"open_instruct.{name}"])
    return ground_truth_utils.IFEvalVerifier()


def work_out_verifier(verifier, case: dict) -> dict:
    try:
        found: object = verifier([], case["prediction"], case["label"]).score
    except Exception as exc:
        found = f"raises: {type(exc).__name__}"
    return {**case, "open_instruct": found}


if __name__ == "__main__":
    names = [name for name in sys.argv[1:] if name != "--verifier"]
    verifier = _verifier() if "--verifier" in sys.argv else None
    for name in names:
        path = Path(name)
        cases = [
            work_out_verifier(verifier, case) if verifier else work_out(case)
            for case in json.loads(path.read_text())
        ]
        lines = ",\n".join(json.dumps(case, ensure_ascii=False) for case in cases)
        path.write_text(f"[\n{lines}\n]\n")  # one case a line
        print(f"{path}: {len(cases)} cases")
