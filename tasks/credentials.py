"""Secrets a run names (Prefect Secret blocks) into this process's environment, never into
parameters: the storage credentials, and the jobs' `cluster.secrets` of the form prefect:BLOCK."""

from __future__ import annotations

import os

from prefect.blocks.system import Secret

from judgeflow.config import RunConfig
from judgeflow.config.credentials import credential_env
from judgeflow.config.secrets import block_env_name, reference


def use_storage_credentials(cfg: RunConfig) -> list[str]:
    """Export the credentials `storage.credentials_block` names; returns the variable names set.

    The values go to this process's environment only (jobs it submits inherit them); they are
    never logged and never part of the flow's parameters.
    """
    name = cfg.storage.credentials_block
    if not name:
        return []
    env = credential_env(Secret.load(name).get(), name=name)
    os.environ.update(env)
    return sorted(env)


def use_job_secrets(cfg: RunConfig) -> list[str]:
    """Load the Secret blocks `cluster.secrets` names (`prefect:BLOCK`) for the stage jobs;
    returns the block names. `env:VAR` references need nothing: VAR is read when a job starts."""
    import json

    loaded = []
    for key, ref in cfg.cluster.secrets.items():
        scheme, block = reference(ref, key)
        if scheme != "prefect":
            continue
        value = Secret.load(block).get()
        os.environ[block_env_name(block)] = value if isinstance(value, str) else json.dumps(value)
        loaded.append(block)
    return loaded
