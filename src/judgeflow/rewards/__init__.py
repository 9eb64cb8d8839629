"""verl reward functions for judgeflow's judges, one self-contained module per mode.

verl imports a custom reward function by file path inside its workers
(`custom_reward_function.path`), so each judge's module here uses only the standard library and
this package just says where the files are; policy RLVR's (`rlvr/score.py`) imports judgeflow, whose
environment the verl workers run in. Every module exposes
`compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict`.
"""

from __future__ import annotations

from pathlib import Path

from judgeflow.modes import MODES

_HERE = Path(__file__).resolve().parent

REWARD_MODULES: dict[str, str] = {
    mode: str(_HERE / ("rlvr/score.py" if mode == "rlvr" else f"{mode}.py")) for mode in MODES
}
REWARD_FUNCTION_NAME = "compute_score"

__all__ = ["REWARD_FUNCTION_NAME", "REWARD_MODULES", "reward_module_path"]


def reward_module_path(mode: str) -> str:
    """Absolute path of the reward module for `mode`, for `custom_reward_function.path`."""
    try:
        return REWARD_MODULES[mode]
    except KeyError:
        valid = ", ".join(sorted(REWARD_MODULES))
        raise ValueError(f"unknown reward mode {mode!r}; expected one of: {valid}") from None
