"""Secrets a run names (Prefect Secret blocks) into this process's environment, never into
parameters: the storage credentials, and the jobs' `cluster.secrets` of the form prefect:BLOCK
(`judgeflow.config.secrets.blocks_to_load` says which blocks, and what each value becomes)."""

from __future__ import annotations

import os

from prefect.blocks.system import Secret

from judgeflow.config import RunConfig
from judgeflow.config.secrets import blocks_to_load


def use_secrets(cfg: RunConfig) -> list[str]:
    """Load the Secret blocks `storage.credentials_block` and `cluster.secrets` (prefect:BLOCK)
    name into this process's environment; returns the variable names set.

    The values go to this process's environment only (the jobs it submits inherit them); they are
    never logged and never part of the flow's parameters. `env:VAR` references need nothing: VAR
    is read when a job starts.
    """
    names: list[str] = []
    for block, to_env in blocks_to_load(cfg.storage.credentials_block, cfg.cluster):
        env = to_env(Secret.load(block).get())
        os.environ.update(env)
        names.extend(env)
    return sorted(names)
