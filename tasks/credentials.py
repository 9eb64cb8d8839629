"""Load the storage credentials of a run from its Prefect Secret block into the environment."""

from __future__ import annotations

import os

from prefect.blocks.system import Secret

from judgeflow.config import RunConfig
from judgeflow.credentials import credential_env


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
