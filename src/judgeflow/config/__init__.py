"""A run's configuration and what must never leave it.

- `schema`: the typed `RunConfig` and its sections, `ConfigError`, where local state lives
- `load`: a recipe preset + profile + `dotted.key=value` overrides → a validated `RunConfig`
- `keys`: which engine, backend or recipe family reads a key (the rest warn when set for another)
- `redaction`: what counts as a secret, URLs without credentials, the config as MLflow params
- `secrets`: the secrets a stage's job needs, resolved from references, never from parameters
- `credentials`: storage credentials from a secret store into this process's environment
- `hints`: how each front end names the data functions' options in an error's hints

This package exports the run configuration (`schema`, `load`); import the others by module.
"""

from judgeflow.config.load import (
    PROFILES_DIR,
    RECIPES_DIR,
    list_profiles,
    list_recipes,
    load_config,
    parse_override,
    set_dotted,
)
from judgeflow.config.schema import (
    DATA_URL_KEYS,
    ClusterConfig,
    ConfigError,
    DataConfig,
    EvaluationConfig,
    GrpoConfig,
    GrrmDataConfig,
    IgnoredKeyWarning,
    ModelConfig,
    RegisterConfig,
    RunConfig,
    SecretParameterWarning,
    SftConfig,
    StorageConfig,
    TrackingConfig,
    judgeflow_home,
    validate_config,
    with_policy,
)

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
