"""verl reward functions for judgeflow's judges, one self-contained module per mode.

verl imports a custom reward function by file path inside its workers
(`custom_reward_function.path`), so each judge's module here uses only the standard library and
this package just says where the files are; policy RLVR's (`rlvr/score.py`) imports judgeflow, whose
environment the verl workers run in. Every module exposes
`compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from judgeflow.modes import MODES

_HERE = Path(__file__).resolve().parent
#: Each mode's reward module under this package (policy RLVR's lives in the `rlvr` package).
_MODULES: dict[str, str] = {mode: "rlvr.score" if mode == "rlvr" else mode for mode in MODES}

REWARD_MODULES: dict[str, str] = {
    mode: str(_HERE / f"{name.replace('.', '/')}.py") for mode, name in _MODULES.items()
}
REWARD_FUNCTION_NAME = "compute_score"

__all__ = [
    "REWARDS_DIR",
    "REWARD_FUNCTION_NAME",
    "REWARD_MODULES",
    "reward_function",
    "reward_module_path",
]


def reward_function(mode: str) -> Callable[..., dict[str, Any]]:
    """`compute_score` of `mode`'s reward module, imported as part of judgeflow: the same file
    verl loads by path (`reward_module_path`)."""
    reward_module_path(mode)  # an unknown mode: the same error
    module = importlib.import_module(f"{__name__}.{_MODULES[mode]}")
    return cast("Callable[..., dict[str, Any]]", getattr(module, REWARD_FUNCTION_NAME))


def reward_module_path(mode: str) -> str:
    """Absolute path of the reward module for `mode`, for `custom_reward_function.path`."""
    try:
        return REWARD_MODULES[mode]
    except KeyError:
        valid = ", ".join(sorted(REWARD_MODULES))
        raise ValueError(f"unknown reward mode {mode!r}; expected one of: {valid}") from None
