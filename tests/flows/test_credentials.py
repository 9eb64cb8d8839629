"""S3 credentials from a Prefect Secret block: they reach s3fs, and neither the flow run's
parameters nor MLflow params hold them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from prefect import flow

from judgeflow.config import load_config
from judgeflow.config.credentials import CredentialsError, credential_env
from judgeflow.config.redaction import flatten

SECRET = "moto-secret-key-4711"


def test_a_bad_secret_is_named_and_its_value_never_shown() -> None:
    with pytest.raises(CredentialsError, match="'s3' is not JSON") as err:
        credential_env(f"key={SECRET}", name="s3")
    assert SECRET not in str(err.value)
    with pytest.raises(CredentialsError, match="unknown keys \\['password'\\]") as err:
        credential_env({"password": SECRET}, name="s3")
    assert SECRET not in str(err.value)


def test_credentials_from_a_block_reach_s3_and_nothing_else(
    prefect_server: str,
    s3_server: str,
    judgeflow_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import s3fs
    from prefect import get_client
    from prefect.blocks.system import Secret

    from judgeflow import stages
    from tasks.credentials import use_secrets

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_ENDPOINT_URL", "FSSPEC_S3_ENDPOINT_URL", "AWS_DEFAULT_REGION"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    value = {
        "aws_access_key_id": "moto-key",
        "aws_secret_access_key": SECRET,
        "region_name": "us-east-1",
        "endpoint_url": s3_server,
    }
    Secret(value=json.dumps(value)).save("jf-test-s3", overwrite=True)
    s3fs.S3FileSystem(key="moto-key", secret=SECRET, endpoint_url=s3_server).mkdir("jf-cred")
    overrides = ["storage.root=s3://jf-cred/store", "storage.credentials_block=jf-test-s3"]

    @flow(name="credentials-check")
    def check(recipe: str, overrides: list[str]) -> tuple[list[str], str | None]:
        cfg = load_config(recipe, profile="tiny", overrides=overrides)
        names = use_secrets(cfg)
        return names, stages.download_stage(cfg).uri

    state = check("grpo-pointwise", overrides, return_state=True)
    names, uri = state.result()
    assert "AWS_SECRET_ACCESS_KEY" in names and os.environ["AWS_SECRET_ACCESS_KEY"] == SECRET
    assert uri is not None and uri.startswith("s3://jf-cred/store/sources/")

    async def parameters() -> dict:
        async with get_client() as client:
            return (await client.read_flow_run(state.state_details.flow_run_id)).parameters

    import asyncio

    assert SECRET not in json.dumps(asyncio.run(parameters()))
    cfg = load_config("grpo-pointwise", profile="tiny", overrides=overrides)
    assert SECRET not in json.dumps(flatten(cfg))  # MLflow params
