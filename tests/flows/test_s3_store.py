"""judge-grpo with `storage.root=s3://…` against an S3-compatible server on loopback (moto):
everything a later stage or another machine reads is in the bucket, checksummed; evaluation and
GRPO read the SFT and final models from S3 through the local content-keyed cache; and a second
run on unchanged data, with this machine's staging and cache gone, is served from the cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from judgeflow.storage import STORE_MANIFEST

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_whole_run_on_s3_then_an_unchanged_run_trains_nothing(
    prefect_server: str, mlflow_server: str, judgeflow_home: Path, s3_env: str
) -> None:
    import s3fs

    from flows.judge_grpo import judge_grpo

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_env})
    fs.mkdir("jf-e2e")
    overrides = [
        f"tracking.tracking_uri={mlflow_server}",
        "storage.root=s3://jf-e2e/store",
        "grpo.max_steps=2",
        "sft.num_train_epochs=1",
        "evaluation.limit=4",
        "register.model_name=judge-s3-test",  # a registry of its own on the shared server
    ]
    first = judge_grpo(mode="pointwise", profile="tiny", overrides=overrides)
    assert first["checkpoint"].startswith("s3://jf-e2e/store/runs/")

    published = {k.rsplit("/", 1)[0] for k in fs.find("jf-e2e/store") if k.endswith(STORE_MANIFEST)}
    kinds = sorted(k.split("/")[2] for k in published)
    # sources: RL, validation and SFT data; prepared: RL (with validation) + SFT rows; runs: the
    # SFT model and the GRPO model
    assert kinds == ["prepared", "prepared", "runs", "runs", "sources", "sources", "sources"], (
        published
    )
    assert f"s3://{sorted(p for p in published if p.endswith('/final'))[0]}" == first["checkpoint"]

    tags = MlflowClient(mlflow_server).get_run(first["mlflow_run_id"]).data.tags
    assert tags["judgeflow.sft.model_dir"].startswith("s3://jf-e2e/store/runs/")
    assert tags["judgeflow.train.start_model"] == tags["judgeflow.sft.model_dir"]
    metrics = MlflowClient(mlflow_server).get_run(first["mlflow_run_id"]).data.metrics
    assert {"before/n", "sft/n", "after/n"} <= set(metrics)  # evaluated the models in S3
    assert metrics["after/n"] == 4
    # The registered version points at the weights in the bucket.
    version = MlflowClient(mlflow_server).get_model_version("judge-s3-test", "1")
    assert version.tags["judgeflow.model_uri"] == first["checkpoint"]

    # Another machine: nothing of this one's staging or fetch cache. Everything is cached.
    shutil.rmtree(judgeflow_home / "staging")
    shutil.rmtree(judgeflow_home / "store-cache")
    second = judge_grpo(mode="pointwise", profile="tiny", overrides=overrides)
    assert second["stages"] == dict.fromkeys(first["stages"], "cached")
    assert second["checkpoint"] == first["checkpoint"]


def test_grrm_on_s3_reads_and_publishes_through_the_store(
    prefect_server: str, mlflow_server: str, judgeflow_home: Path, s3_env: str
) -> None:
    import s3fs

    from flows.grrm import grrm

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_env})
    fs.mkdir("jf-grrm")
    overrides = [
        f"tracking.tracking_uri={mlflow_server}",
        "storage.root=s3://jf-grrm/store",
        "sft.num_train_epochs=1",
        "grpo.max_steps=2",
        "evaluation.limit=4",
        "register.model_name=grrm-s3-test",
    ]
    first = grrm(recipe="grrm-full", stage="full", profile="tiny", overrides=overrides)
    assert first["checkpoint"].startswith("s3://jf-grrm/store/runs/")
    published = {
        k.rsplit("/", 1)[0] for k in fs.find("jf-grrm/store") if k.endswith(STORE_MANIFEST)
    }
    assert sorted(k.split("/")[2] for k in published) == ["prepared", "runs", "runs", "sources"]
    assert first["metrics"]["after/n"] == 4.0

    shutil.rmtree(judgeflow_home / "staging")
    shutil.rmtree(judgeflow_home / "store-cache")
    second = grrm(recipe="grrm-full", stage="full", profile="tiny", overrides=overrides)
    assert second["stages"] == dict.fromkeys(first["stages"], "cached")
