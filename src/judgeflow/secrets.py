"""Secrets a stage's job needs (an HF token, a database password), kept out of everything a
person or another program can read: flow parameters, logs, MLflow params, sbatch scripts and the
job folder.

A job's secrets are
- `cluster.secrets`: job variable → where its value is, never the value: `env:VAR` (a variable
  of the process that runs the flow) or `prefect:BLOCK` (a Prefect Secret block, loaded by the
  flow into that process's environment, see `BLOCK_ENV_PREFIX`);
- any `cluster.env` entry whose name looks secret (`HF_TOKEN`, `DB_PASSWORD`, …) or whose value
  holds a URL with credentials (`DATABASE_URL=postgresql://user:password@db/x`;
  `judgeflow.redaction.is_secret`). `judgeflow run --set cluster.env.HF_TOKEN=…` turns such an
  entry into an `env:` reference itself, so the value never becomes a flow parameter.

They reach the job through one file only, the job's input file (mode 0600, its owner alone),
from which the job adds them to the stage command's environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from judgeflow.config import ClusterConfig, ConfigError
from judgeflow.redaction import is_secret

__all__ = [
    "BLOCK_ENV_PREFIX",
    "CLI_ENV_PREFIX",
    "SecretError",
    "block_env_name",
    "public_env",
    "reference",
    "resolve_secrets",
]

#: Where the flow leaves a Prefect Secret block's value for `prefect:BLOCK` references.
BLOCK_ENV_PREFIX = "JUDGEFLOW_SECRET_BLOCK__"
#: Where `judgeflow run` leaves a secret given with `--set cluster.env.NAME=…`.
CLI_ENV_PREFIX = "JUDGEFLOW_SECRET__"
_REFERENCE = re.compile(r"(env|prefect):([A-Za-z0-9_.\-/]+)")


class SecretError(ConfigError):
    """A secret reference that does not resolve; names the reference, never a value."""


def reference(value: str, key: str) -> tuple[str, str]:
    """`("env", "VAR")` or `("prefect", "BLOCK")` for a `cluster.secrets` value."""
    match = _REFERENCE.fullmatch(value)
    if match is None:
        raise SecretError(
            f"cluster.secrets.{key} must say where the secret is — env:VARIABLE or "
            "prefect:SECRET_BLOCK — not hold it (the value is not shown)"
        )
    return match.group(1), match.group(2)


def block_env_name(block: str) -> str:
    return BLOCK_ENV_PREFIX + re.sub(r"\W", "_", block).upper()


def public_env(cluster: ClusterConfig) -> dict[str, str]:
    """`cluster.env` without its secret entries: what may go into sbatch scripts, job folders
    and logs."""
    return {k: v for k, v in cluster.env.items() if not is_secret(k, v)}


def resolve_secrets(
    cluster: ClusterConfig, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every secret a job of `cluster` needs, by job variable name, with its value."""
    environ = os.environ if environ is None else environ
    out = {k: v for k, v in cluster.env.items() if is_secret(k, v)}
    for name, ref in cluster.secrets.items():
        scheme, where = reference(ref, name)
        variable = where if scheme == "env" else block_env_name(where)
        if variable not in environ:
            hint = (
                f"set {variable} in the environment that runs the flow"
                if scheme == "env"
                else f"create the Prefect Secret block {where!r} (the flow loads it)"
            )
            raise SecretError(f"cluster.secrets.{name}={ref} is not available: {hint}")
        out[name] = environ[variable]
    return out
