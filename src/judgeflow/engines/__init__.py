"""Training and generation engines: TRL runs here (the `trl` package), verl and LLaMA-Factory
on clusters (a module each).

Names are resolved on first use: importing this package must not pull in torch or TRL. The
one-shot `generate()` function lives in `judgeflow.engines.generate` and is not re-exported
here, because the package attribute `generate` is that submodule once it has been imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from judgeflow.engines.generate import Generator, HFGenerator
    from judgeflow.engines.llamafactory import SftParams, SftResult, run_sft
    from judgeflow.engines.trl import GrpoParams, TrainResult, train_grpo
    from judgeflow.engines.verl_eval import VerlValidationGenerator

__all__ = [
    "Generator",
    "GrpoParams",
    "HFGenerator",
    "SftParams",
    "SftResult",
    "TrainResult",
    "VerlValidationGenerator",
    "run_sft",
    "train_grpo",
]

_HOMES = {
    "Generator": "generate",
    "HFGenerator": "generate",
    "VerlValidationGenerator": "verl_eval",
    "GrpoParams": "trl",
    "TrainResult": "trl",
    "train_grpo": "trl",
    "SftParams": "llamafactory",
    "SftResult": "llamafactory",
    "run_sft": "llamafactory",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
