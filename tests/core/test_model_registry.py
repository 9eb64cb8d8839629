"""The champion gate, against a real `mlflow server`: versions, aliases, tags, idempotence."""

from __future__ import annotations

import uuid

import pytest
from mlflow.tracking import MlflowClient

from judgeflow.model_registry import (
    CHAMPION,
    ModelRegistry,
    RegistryError,
    VersionInfo,
    decide,
)


def _champion(version: str = "1") -> VersionInfo:
    return VersionInfo("m", version, "/models/a", None, [CHAMPION], {}, 0)


@pytest.mark.parametrize(
    ("value", "champion_value", "margin", "force", "promoted", "says"),
    [
        (0.8, 0.5, 0.0, False, True, "promoted: exact_match 0.8000 beats champion v1's 0.5000"),
        (
            0.5,
            0.5,
            0.0,
            False,
            False,
            "does not beat champion v1's 0.5000 by more than the margin 0",
        ),
        (0.54, 0.5, 0.05, False, False, "margin 0.05"),
        (0.56, 0.5, 0.05, False, True, "beats"),
        (0.1, 0.5, 0.0, True, True, "forced (register.force=true)"),
        (None, 0.5, 0.0, False, False, "has no exact_match to compare"),
        (0.9, None, 0.0, False, False, "has no exact_match on this evaluation set"),
    ],
)
def test_gate_compares_on_the_primary_metric_with_a_margin(
    value: float | None,
    champion_value: float | None,
    margin: float,
    force: bool,
    promoted: bool,
    says: str,
) -> None:
    got, reason = decide(
        "exact_match", value, _champion(), champion_value, margin=margin, force=force, name="m"
    )
    assert got is promoted
    assert says in reason


def test_the_first_version_becomes_champion() -> None:
    promoted, reason = decide("accuracy", 0.0, None, None, margin=0.0, force=False, name="m")
    assert promoted and reason.startswith("first version of m")


def _run(client: MlflowClient) -> str:
    experiment = client.create_experiment(f"registry-{uuid.uuid4().hex[:8]}")
    return client.create_run(experiment).info.run_id


def test_versions_aliases_and_tags_on_a_real_server(mlflow_server: str) -> None:
    registry = ModelRegistry(mlflow_server)
    client = MlflowClient(mlflow_server)
    name = f"judge-test-{uuid.uuid4().hex[:8]}"
    common = {"name": name, "mode": "pointwise", "metric": "exact_match", "eval_set": "set1"}

    first = registry.register(
        model_uri="/models/first", run_id=_run(client), evaluation={"exact_match": 0.5},
        tags={"judgeflow.data.source": "sample://x", "judgeflow.slurm_job_ids": ""},
        description="| metric | after |", **common,
    )  # fmt: skip
    assert first.promoted and first.version == "1" and first.url
    worse = registry.register(
        model_uri="/models/worse", run_id=_run(client), evaluation={"exact_match": 0.25},
        tags={}, description="", **common,
    )  # fmt: skip
    assert not worse.promoted
    assert worse.champion_version == "1" and worse.champion_value == 0.5
    assert "kept as challenger: exact_match 0.2500" in worse.reason
    better = registry.register(
        model_uri="/models/better", run_id=_run(client), evaluation={"exact_match": 0.75},
        tags={}, description="", **common,
    )  # fmt: skip
    assert better.promoted and better.champion_value == 0.5

    champion = registry.resolve(f"models:/{name}@champion")
    assert champion.version == better.version and champion.model_uri == "/models/better"
    assert registry.resolve(f"models:/{name}@challenger").model_uri == "/models/worse"
    assert registry.resolve(f"models:/{name}/1").model_uri == "/models/first"
    assert registry.resolve(f"models:/{name}").version == "3"  # the newest
    v2 = client.get_model_version(name, "2")
    assert v2.tags["challenger"] == "true" and v2.tags["judgeflow.promoted"] == "false"
    assert "does not beat" in v2.tags["judgeflow.decision"]
    assert v2.tags["judgeflow.mlflow_run_id"] == v2.run_id
    assert v2.source == f"runs:/{v2.run_id}/registered/{name}"
    v1 = client.get_model_version(name, "1")
    assert v1.tags["judgeflow.data.source"] == "sample://x"
    assert "judgeflow.slurm_job_ids" not in v1.tags  # empty values are not tags
    assert v1.description == "| metric | after |"
    assert name in registry.names()
    listed = {v.version: v.aliases for v in registry.versions(name)}
    assert listed == {"3": ["champion"], "2": ["challenger"], "1": []}

    # The same weights again (a cached retraining): no new version, the earlier decision.
    again = registry.register(
        model_uri="/models/worse", run_id=_run(client), evaluation={"exact_match": 0.25},
        tags={}, description="", **common,
    )  # fmt: skip
    assert again.already_registered and again.version == "2" and not again.promoted
    champion_again = registry.register(
        model_uri="/models/better", run_id=_run(client), evaluation={"exact_match": 0.75},
        tags={}, description="", **common,
    )  # fmt: skip
    assert champion_again.already_registered and champion_again.promoted
    assert "(champion)" in champion_again.reason
    assert len(registry.versions(name)) == 3

    # Forced promotion is recorded as forced.
    forced = registry.register(
        model_uri="/models/worse", run_id=_run(client), evaluation={"exact_match": 0.25},
        tags={}, description="", force=True, **common,
    )  # fmt: skip
    assert forced.promoted and forced.forced and forced.version == "2"
    assert client.get_model_version(name, "2").tags["judgeflow.forced"] == "true"
    assert registry.champion(name).version == "2"  # type: ignore[union-attr]


def test_champion_measured_on_a_new_evaluation_set(mlflow_server: str) -> None:
    """A champion evaluated only on another set is compared with what the caller just measured,
    and that measurement is kept on the champion's version."""
    registry = ModelRegistry(mlflow_server)
    client = MlflowClient(mlflow_server)
    name = f"judge-test-{uuid.uuid4().hex[:8]}"
    base = {"name": name, "mode": "pairwise", "metric": "consistent_accuracy", "tags": {},
            "description": ""}  # fmt: skip
    registry.register(model_uri="/m/1", run_id=_run(client), evaluation={"consistent_accuracy": 0.9}, eval_set="old", **base)  # fmt: skip
    blind = registry.register(model_uri="/m/2", run_id=_run(client), evaluation={"consistent_accuracy": 0.6}, eval_set="new", **base)  # fmt: skip
    assert not blind.promoted and "no consistent_accuracy on this evaluation set" in blind.reason
    measured = registry.register(
        model_uri="/m/3", run_id=_run(client), evaluation={"consistent_accuracy": 0.6},
        eval_set="new", champion_evaluation={"consistent_accuracy": 0.4}, **base,
    )  # fmt: skip
    assert measured.promoted and measured.champion_value == 0.4
    assert registry.versions(name)[-1].evaluation("new") == {"consistent_accuracy": 0.4}
    assert registry.versions(name)[-1].evaluation("old") == {"consistent_accuracy": 0.9}


def test_unknown_model_uri_says_what_exists(mlflow_server: str) -> None:
    registry = ModelRegistry(mlflow_server)
    with pytest.raises(RegistryError, match="judgeflow models"):
        registry.resolve("models:/no-such-model@champion")
    with pytest.raises(RegistryError, match="not a models:/ URI"):
        registry.resolve("runs:/abc/model")
