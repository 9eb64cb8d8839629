"""Secrets a stage's job needs (an HF token, a database password), kept out of everything a
person or another program can read: flow parameters, logs, MLflow params, sbatch scripts and the
job folder.

A job's secrets are
- `cluster.secrets`: job variable → where its value is, never the value: `env:VAR` (a variable
  of the process that runs the flow) or `prefect:BLOCK` (a Prefect Secret block, loaded by the
  flow into that process's environment, see `BLOCK_ENV_PREFIX`);
- any `cluster.env` entry whose name looks secret (`HF_TOKEN`, `DB_PASSWORD`, …) or whose value
  holds a URL with credentials (`DATABASE_URL=postgresql://user:password@db/x`;
  `judgeflow.config.redaction.is_secret`). `judgeflow run --set cluster.env.HF_TOKEN=…` turns such an
  entry into an `env:` reference itself, so the value never becomes a flow parameter.

They reach the job through one file only, the job's input file (mode 0600, its owner alone),
from which the job adds them to the stage command's environment.

A data URL with credentials (`data.source=https://user:token@host/x.jsonl`) is needed by the
process that downloads it, not by a job: `judgeflow run --set` passes the URL without them
(`keep_url_credentials`) and the download finds them again (`with_url_credentials`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from judgeflow.config.credentials import credential_env
from judgeflow.config.errors import ConfigError
from judgeflow.config.infrastructure import ClusterConfig
from judgeflow.config.inputs import DATA_URL_KEYS
from judgeflow.config.redaction import is_secret, strip_credentials

__all__ = [
    "BLOCK_ENV_PREFIX",
    "CLI_ENV_PREFIX",
    "DATA_URL_KEYS",
    "MLFLOW_CREDENTIAL_ENV",
    "SecretError",
    "block_env_name",
    "keep_url_credentials",
    "public_env",
    "reference",
    "resolve_secrets",
    "secret_variables",
    "url_variable",
    "with_url_credentials",
]

#: Where the flow leaves a Prefect Secret block's value for `prefect:BLOCK` references.
BLOCK_ENV_PREFIX = "JUDGEFLOW_SECRET_BLOCK__"
#: Where `judgeflow run` leaves a secret given with `--set cluster.env.NAME=…`.
CLI_ENV_PREFIX = "JUDGEFLOW_SECRET__"
#: MLflow's own variables for an authenticated server (basic auth, or a bearer token), which
#: `judgeflow.tracking` sets from a tracking URI's credentials.
MLFLOW_CREDENTIAL_ENV = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
                         "MLFLOW_TRACKING_TOKEN")  # fmt: skip
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


def url_variable(url: str) -> str:
    """The variable that holds `url` with its credentials, named after `url` without them."""
    bare = strip_credentials(url)
    return f"{CLI_ENV_PREFIX}URL_{hashlib.sha256(bare.encode()).hexdigest()[:16].upper()}"


def keep_url_credentials(url: str) -> str:
    """`url` without its credentials; the whole URL goes to this process's environment (under
    `url_variable`), where the download finds it again (`with_url_credentials`). A URL without
    credentials is returned as it is."""
    bare = strip_credentials(url)
    if bare != url:
        os.environ[url_variable(bare)] = url
    return bare


def with_url_credentials(url: str, environ: Mapping[str, str] | None = None) -> str:
    """The URL `keep_url_credentials` (or the user, naming `url_variable`) left for `url`, or
    `url` itself."""
    if strip_credentials(url) != url:
        return url  # its own credentials
    environ = os.environ if environ is None else environ
    return environ.get(url_variable(url)) or url


def secret_variables(cluster: ClusterConfig, environ: Iterable[str] | None = None) -> list[str]:
    """The variables of this process that hold secrets a job gets from its input file: MLflow's
    credentials, what `judgeflow run` and the Prefect Secret blocks left here, and what the
    `env:` references of `cluster.secrets` name. A job is submitted without them (Slurm copies
    the submitting environment into the job, and may keep it)."""
    names = set(os.environ if environ is None else environ)
    hidden = {n for n in names if n.startswith((CLI_ENV_PREFIX, BLOCK_ENV_PREFIX))}
    hidden |= names.intersection(MLFLOW_CREDENTIAL_ENV)
    for key, ref in cluster.secrets.items():
        scheme, where = reference(ref, key)
        if scheme == "env" and where in names:
            hidden.add(where)
    return sorted(hidden)


#: A Prefect Secret block to load and what its value becomes: the variables to set.
BlockToEnv = tuple[str, Callable[[Any], dict[str, str]]]


def blocks_to_load(credentials_block: str | None, cluster: ClusterConfig) -> list[BlockToEnv]:
    """The Prefect Secret blocks a run loads into its process's environment before its steps, each
    with the variables its value becomes: `storage.credentials_block` (the storage keys,
    `credential_env`) and each `cluster.secrets` value prefect:BLOCK (one variable per block,
    `block_env_name`, which the stage jobs read)."""
    blocks: list[BlockToEnv] = []
    if credentials_block:
        blocks.append(
            (credentials_block, functools.partial(credential_env, name=credentials_block))
        )
    for key, ref in cluster.secrets.items():
        scheme, block = reference(ref, key)
        if scheme == "prefect":
            blocks.append((block, functools.partial(_block_value_env, block)))
    return blocks


def _block_value_env(block: str, value: Any) -> dict[str, str]:
    return {block_env_name(block): value if isinstance(value, str) else json.dumps(value)}
