"""Registered models: the MLflow model registry and what a version came from.

- `models`: versions, the `champion` / `challenger` aliases and the gate that moves them
- `sft_models`: the SFT model an RLVR-only run starts from, found by its runs' MLflow tags
- `configs`: the run configuration a model reference is evaluated or judged with, and the
  tags of a run that used a judge

(The jobs a pipeline run submitted are `judgeflow.cluster.submitted`, not a registry.)
"""

from judgeflow.registry.configs import judge_tags, resolve_config
from judgeflow.registry.models import (
    CHALLENGER,
    CHAMPION,
    ChampionNotFoundError,
    Decision,
    ModelRegistry,
    RegistryError,
    VersionInfo,
    decide,
)

__all__ = [
    "CHALLENGER",
    "CHAMPION",
    "ChampionNotFoundError",
    "Decision",
    "ModelRegistry",
    "RegistryError",
    "VersionInfo",
    "decide",
    "judge_tags",
    "resolve_config",
]
