"""A run's configuration and what must never leave it.

- `run_config`: the typed `RunConfig`, assembled from its sections, and `validate_config`
- its sections, by what they describe: `inputs` (model, data), `training` (sft, grpo),
  `policy_reward` (rlvr, reward), `evaluation_and_registry` (evaluation, register),
  `infrastructure` (cluster, storage, tracking); `section` (their strict base), `errors`
- `load`: a recipe preset + profile + `dotted.key=value` overrides → a validated `RunConfig`
- `keys`: which engine, backend or recipe family reads a key (the rest warn when set for another)
- `redaction`: what counts as a secret, URLs without credentials, the config as MLflow params
- `secrets`: the secrets a stage's job needs, resolved from references, never from parameters
- `credentials`: storage credentials from a secret store into this process's environment
- `hints`: how each front end names the data functions' options in an error's hints

This package exports the run configuration (`run_config`, its sections, `errors`, `load`); import
the others by module.
"""

from judgeflow.config.errors import ConfigError, IgnoredKeyWarning, SecretParameterWarning
from judgeflow.config.evaluation_and_registry import EvaluationConfig, RegisterConfig
from judgeflow.config.infrastructure import ClusterConfig, StorageConfig, TrackingConfig
from judgeflow.config.inputs import DATA_URL_KEYS, DataConfig, GrrmDataConfig, ModelConfig
from judgeflow.config.load import (
    PROFILES_DIR,
    RECIPES_DIR,
    list_profiles,
    list_recipes,
    load_config,
    parse_override,
    set_dotted,
)
from judgeflow.config.policy_reward import RewardConfig, RlvrConfig
from judgeflow.config.run_config import RunConfig, validate_config, with_policy
from judgeflow.config.training import GrpoConfig, SftConfig
from judgeflow.home import judgeflow_home

__all__ = [
    "DATA_URL_KEYS",
    "PROFILES_DIR",
    "RECIPES_DIR",
    "ClusterConfig",
    "ConfigError",
    "DataConfig",
    "EvaluationConfig",
    "GrpoConfig",
    "GrrmDataConfig",
    "IgnoredKeyWarning",
    "ModelConfig",
    "RegisterConfig",
    "RewardConfig",
    "RlvrConfig",
    "RunConfig",
    "SecretParameterWarning",
    "SftConfig",
    "StorageConfig",
    "TrackingConfig",
    "judgeflow_home",
    "list_profiles",
    "list_recipes",
    "load_config",
    "parse_override",
    "set_dotted",
    "validate_config",
    "with_policy",
]
