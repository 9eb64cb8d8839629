"""Which model a stage starts from when the user did not say: found through MLflow tags.

A finished SFT stage tags the pipeline run with `judgeflow.sft.key` (the content key of its data
and settings, `caching.sft_key`) and `judgeflow.sft.model_dir`. An RLVR-only run looks the key up
and starts from the newest SFT model of that lineage that still exists.
"""

from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient

from judgeflow.caching import sft_key
from judgeflow.config import RunConfig
from judgeflow.data.io import exists
from judgeflow.tracking import resolve_tracking_uri

SFT_KEY_TAG = "judgeflow.sft.key"
SFT_MODEL_TAG = "judgeflow.sft.model_dir"


def newest_sft_model(cfg: RunConfig, sft_file: str | Path, *, scan: int = 20) -> str | None:
    """The newest SFT model trained on `sft_file` with `cfg`'s base model and SFT settings."""
    client = MlflowClient(resolve_tracking_uri(cfg.tracking.tracking_uri))
    experiment = client.get_experiment_by_name(cfg.tracking.experiment)
    if experiment is None:
        return None
    runs = client.search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.`{SFT_KEY_TAG}` = '{sft_key(cfg, str(sft_file))}'",
        order_by=["attributes.start_time DESC"],
        max_results=scan,
    )
    for run in runs:
        model = run.data.tags.get(SFT_MODEL_TAG)
        if model and exists(model):
            return model
    return None
