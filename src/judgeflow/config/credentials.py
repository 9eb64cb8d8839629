"""Storage credentials from a secret store into this process's environment, never into config.

A Prefect Secret block (or any secret store) holds JSON such as
`{"aws_access_key_id": "…", "aws_secret_access_key": "…", "endpoint_url": "https://…"}`;
`credential_env` turns it into the variables s3fs/boto read. The config carries only the block's
name, so the keys reach neither Prefect parameters nor MLflow params, and jobs inherit them from
the environment of the process that submits them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: Secret JSON key -> environment variable (the endpoint for S3-compatible stores).
ENV_NAMES: Mapping[str, tuple[str, ...]] = {
    "aws_access_key_id": ("AWS_ACCESS_KEY_ID",),
    "aws_secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "aws_session_token": ("AWS_SESSION_TOKEN",),
    "region_name": ("AWS_DEFAULT_REGION",),
    "endpoint_url": ("AWS_ENDPOINT_URL", "FSSPEC_S3_ENDPOINT_URL"),
}


class CredentialsError(ValueError):
    """A credentials secret is not the JSON object judgeflow expects (its values never shown)."""


def credential_env(secret: Any, *, name: str) -> dict[str, str]:
    """The environment variables a credentials secret (JSON text or a mapping) stands for."""
    value = secret
    if isinstance(secret, str):
        try:
            value = json.loads(secret)
        except json.JSONDecodeError:
            raise CredentialsError(
                f"secret {name!r} is not JSON (its value is not shown)"
            ) from None
    if not isinstance(value, Mapping):
        raise CredentialsError(f"secret {name!r} must be a JSON object with keys {list(ENV_NAMES)}")
    unknown = sorted(set(value) - set(ENV_NAMES))
    if unknown:
        raise CredentialsError(
            f"secret {name!r} has unknown keys {unknown}; known: {', '.join(ENV_NAMES)}"
        )
    return {env: str(v) for key, v in value.items() for env in ENV_NAMES[key]}
