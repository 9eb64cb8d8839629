"""The champion gate, against a real `mlflow server`: versions, aliases, tags, idempotence;
overlap-allowed and unchecked numbers kept apart and never promoting; a champion whose weights
are missing."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from judgeflow.config import load_config
from judgeflow.data import prepare_judge
from judgeflow.evaluation.decontamination import (
    CHECKED,
    LINEAGE_FILE,
    OVERLAP_ALLOWED,
    UNCHECKED,
    overlap_set,
    unchecked_set,
    write_lineage,
)
from judgeflow.registry.models import (
    CHAMPION,
    ChampionNotFoundError,
    ModelRegistry,
    RegistryError,
    VersionInfo,
    decide,
)
from judgeflow.samples import sample_path
from judgeflow.stages import PreparedData, evaluate_stage
from judgeflow.stages.register import champion_config, champion_to_measure, register_stage


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
        (0.1 + 0.2, 0.3, 0.0, False, False, "does not beat"),  # equal but for float rounding
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


@pytest.mark.parametrize("champion", [None, _champion()])
@pytest.mark.parametrize(
    ("status", "why_not", "forced_says"),
    [
        (OVERLAP_ALLOWED, "measured on evaluation rows it trained on", "with overlap allowed"),
        (UNCHECKED, f"is unchecked: the model has no lineage file ({LINEAGE_FILE})", "unchecked"),
    ],
)
def test_numbers_measured_with_overlap_or_unchecked_promote_only_when_forced(
    champion: VersionInfo | None, status: str, why_not: str, forced_says: str
) -> None:
    """Not even as the first version, and not even when they beat the champion."""
    promoted, reason = decide(
        "exact_match", 0.9, champion, 0.5, margin=0.0, force=False, name="m",
        decontamination=status,
    )  # fmt: skip
    assert not promoted
    assert why_not in reason and "register.force" in reason
    forced, why = decide(
        "exact_match", 0.1, champion, 0.5, margin=0.0, force=True, name="m",
        decontamination=status,
    )  # fmt: skip
    assert forced and forced_says in why


def test_checked_numbers_of_a_first_version_promote() -> None:
    """What the pipeline's gate is given: the trained model's `after` evaluation, checked
    because training writes the model's lineage."""
    promoted, reason = decide(
        "exact_match", 0.2, None, None, margin=0.0, force=False, name="m", decontamination=CHECKED
    )
    assert promoted and reason.startswith("first version of m: becomes champion")


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


def _first_kept_apart_then_a_checked_champion(
    registry: ModelRegistry,
    client: MlflowClient,
    base: dict[str, Any],
    status: str,
    kept_set: str,
    reason: str,
) -> None:
    """v1, measured with `status` on `kept_set`, stays a marked challenger even as the first
    version; v2, checked on base's set, becomes champion."""
    name = base["name"]
    first = registry.register(
        model_uri="/m/1", run_id=_run(client), evaluation={"exact_match": 0.9},
        decontamination=status, **{**base, "eval_set": kept_set},
    )  # fmt: skip
    assert not first.promoted and first.decontamination == status
    assert reason in first.reason
    v1 = client.get_model_version(name, "1").tags
    assert v1["judgeflow.decontamination"] == status and v1["challenger"] == "true"
    assert f"judgeflow.eval.{kept_set}" in v1 and f"judgeflow.eval.{base['eval_set']}" not in v1
    assert registry.champion(name) is None

    clean = registry.register(
        model_uri="/m/2", run_id=_run(client), evaluation={"exact_match": 0.5},
        decontamination=CHECKED, **base,
    )  # fmt: skip
    assert clean.promoted and clean.version == "2"


def test_overlap_allowed_numbers_are_kept_apart_and_never_promote(mlflow_server: str) -> None:
    registry = ModelRegistry(mlflow_server)
    client = MlflowClient(mlflow_server)
    name = f"judge-test-{uuid.uuid4().hex[:8]}"
    base = {"name": name, "mode": "pointwise", "metric": "exact_match", "tags": {},
            "description": "", "eval_set": "s1"}  # fmt: skip

    # Measured with overlap allowed: kept as challenger even as the first version, marked.
    _first_kept_apart_then_a_checked_champion(
        registry, client, base, OVERLAP_ALLOWED, overlap_set("s1"),
        "measured on evaluation rows it trained on",
    )  # fmt: skip

    # The champion measured on rows it had trained on: its numbers go to the overlap set and
    # are not compared with this version's clean ones.
    blind = registry.register(
        model_uri="/m/3", run_id=_run(client), evaluation={"exact_match": 0.7},
        decontamination=CHECKED, champion_evaluation={"exact_match": 0.6, "overlap_rows": 4.0},
        champion_eval_set=overlap_set("s3"), **{**base, "eval_set": "s3"},
    )  # fmt: skip
    assert not blind.promoted and blind.champion_value is None
    assert "trained on 4 of these evaluation prompts" in blind.reason
    assert "not compared with clean numbers" in blind.reason
    champion = registry.versions(name)[-2]
    assert champion.version == "2" and champion.evaluation(overlap_set("s3")) is not None
    assert champion.evaluation("s3") is None

    forced = registry.register(
        model_uri="/m/4", run_id=_run(client), evaluation={"exact_match": 0.1},
        decontamination=OVERLAP_ALLOWED, force=True, **base,
    )  # fmt: skip
    assert forced.promoted and forced.forced


def test_a_champion_whose_weights_are_missing_is_an_error_that_names_it(
    mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the register stage: the champion's weights checked where its version says."""
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))
    client = MlflowClient(mlflow_server)
    name = f"judge-test-{uuid.uuid4().hex[:8]}"
    overrides = [f"tracking.tracking_uri={mlflow_server}", f"register.model_name={name}"]
    cfg = load_config("grpo-pointwise", overrides=overrides)
    evaluation = {"metrics": {"eval/exact_match": 0.5},
                  "details": {"eval_set": "s1", "decontamination": CHECKED}}  # fmt: skip
    weights = [tmp_path / f"m{i}" for i in (1, 2, 3)]
    for path in weights:
        path.mkdir()

    def register(model: Path, force: bool = False):  # type: ignore[no-untyped-def]
        forcing = cfg.model_copy(update={"register": cfg.register.model_copy(update={"force": force})})  # fmt: skip
        return register_stage(
            forcing, run_id=_run(client), model_dir=str(model), kind="final", evaluation=evaluation
        )

    assert register(weights[0]).promoted
    shutil.rmtree(weights[0])  # the champion's weights: gone (or on another machine's disk)
    assert champion_to_measure(cfg, "final", evaluation | {"details": {"eval_set": "s2"}}) is None
    with pytest.raises(ChampionNotFoundError) as missing:
        register(weights[1])
    text = str(missing.value)
    assert f"the champion of {name} is v1" in text and str(weights[0]) in text
    assert "register.force=true" in text and f"judgeflow models {name}" in text
    assert len(ModelRegistry(mlflow_server).versions(name)) == 1  # nothing registered

    forced = register(weights[2], force=True)
    assert forced.promoted and forced.forced and "weights were not found" in forced.reason


def test_unchecked_numbers_are_kept_apart_and_never_promote(mlflow_server: str) -> None:
    """Numbers of a model without lineage (what it trained on is unknown) are treated like
    overlap-allowed ones: their own set, never the first champion, never compared."""
    registry = ModelRegistry(mlflow_server)
    client = MlflowClient(mlflow_server)
    name = f"judge-test-{uuid.uuid4().hex[:8]}"
    base = {"name": name, "mode": "pointwise", "metric": "exact_match", "tags": {},
            "description": "", "eval_set": "s1"}  # fmt: skip

    _first_kept_apart_then_a_checked_champion(
        registry, client, base, UNCHECKED, unchecked_set("s1"),
        "is unchecked: the model has no lineage file",
    )  # fmt: skip

    # The champion measured without lineage: its numbers go to the unchecked set and are not
    # compared with this version's checked ones, however they stand.
    blind = registry.register(
        model_uri="/m/3", run_id=_run(client), evaluation={"exact_match": 0.7},
        decontamination=CHECKED, champion_evaluation={"exact_match": 0.1},
        champion_eval_set=unchecked_set("s3"), **{**base, "eval_set": "s3"},
    )  # fmt: skip
    assert not blind.promoted and blind.champion_value is None
    assert "champion v2 has no lineage file" in blind.reason
    assert "exact_match here, 0.1000, is unchecked" in blind.reason
    assert "not compared with checked numbers" in blind.reason
    champion = registry.versions(name)[-2]
    assert champion.version == "2" and champion.evaluation(unchecked_set("s3")) is not None
    assert champion.evaluation("s3") is None
    # A later run on that set finds the note again from the champion's tags.
    again = registry.register(
        model_uri="/m/4", run_id=_run(client), evaluation={"exact_match": 0.8},
        decontamination=CHECKED, **{**base, "eval_set": "s3"},
    )  # fmt: skip
    assert not again.promoted and "is unchecked and is not compared" in again.reason

    forced = registry.register(
        model_uri="/m/5", run_id=_run(client), evaluation={"exact_match": 0.1},
        decontamination=UNCHECKED, force=True, **{**base, "eval_set": unchecked_set("s1")},
    )  # fmt: skip
    assert forced.promoted and forced.forced


def test_the_gate_on_real_evaluations_promotes_checked_and_keeps_unchecked_apart(
    mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model: Path
) -> None:
    """The register stage given what the pipeline gives it, evaluations of the tiny model:

    - a trained model's `after` evaluation is checked (training wrote its lineage), and the
      first version becomes champion (the demo's path);
    - that champion's weights lose their lineage; a run on a new evaluation set measures it
      (`evaluate[champion]`): unchecked, kept under `<set>-unchecked`, not compared, and the new
      version is kept as challenger saying why; the next run does not measure it again;
    - an unchecked evaluation of this run's model (weights without lineage) is not given a
      champion measurement, and does not promote.
    """
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))
    client = MlflowClient(mlflow_server)
    name = f"judge-test-{uuid.uuid4().hex[:8]}"
    prepared = prepare_judge(
        "pointwise", [sample_path("tinyjudge_pointwise.jsonl")], tmp_path / "data" / "p.parquet",
        val_fraction=0.25,
    )  # fmt: skip
    assert prepared.val_path is not None
    data = PreparedData(
        train_file=str(prepared.train_path), val_file=str(prepared.val_path), report_file="",
        report={},
    )  # fmt: skip

    def config(limit: int) -> Any:  # another limit: another evaluation set
        return load_config("grpo-pointwise", profile="tiny", overrides=[
            f"tracking.tracking_uri={mlflow_server}", f"register.model_name={name}",
            f"evaluation.limit={limit}", "evaluation.max_new_tokens=4"])  # fmt: skip

    def weights(label: str, *, lineage: bool) -> str:
        model = tmp_path / label
        shutil.copytree(tiny_model, model)
        if lineage:  # what a training stage writes: it trained on the train split
            write_lineage(model, stage="grpo", mode="pointwise", data_file=prepared.train_path)
        return str(model)

    def register(cfg: Any, model: str, evaluation: Any, champion: Any = None) -> Any:
        return register_stage(
            cfg, run_id=_run(client), model_dir=model, kind="final", evaluation=evaluation,
            champion_evaluation=champion,
        )  # fmt: skip

    first_cfg = config(2)
    v1 = weights("v1", lineage=True)
    after = evaluate_stage(first_cfg, v1, data)
    assert after["details"]["decontamination"] == CHECKED
    assert champion_to_measure(first_cfg, "final", after) is None  # no champion yet
    first = register(first_cfg, v1, after)
    assert first.promoted and first.reason.startswith(f"first version of {name}")

    (Path(v1) / LINEAGE_FILE).unlink()  # the champion's weights lost their lineage
    cfg = config(3)
    v2 = weights("v2", lineage=True)
    ours = evaluate_stage(cfg, v2, data)
    champion = champion_to_measure(cfg, "final", ours)
    assert champion is not None and champion.model_uri == v1
    measured = evaluate_stage(champion_config(cfg, v1), v1, data)
    clean_set = ours["details"]["eval_set"]
    assert measured["details"]["decontamination"] == UNCHECKED
    assert measured["details"]["eval_set"] == unchecked_set(clean_set)
    second = register(cfg, v2, ours, measured)
    assert not second.promoted and second.champion_value is None
    assert "champion v1 has no lineage file" in second.reason
    kept = client.get_model_version(name, "1").tags
    assert f"judgeflow.eval.{unchecked_set(clean_set)}" in kept
    assert f"judgeflow.eval.{clean_set}" not in kept
    assert champion_to_measure(cfg, "final", ours) is None  # measured once, kept apart

    v3 = weights("v3", lineage=False)
    unchecked = evaluate_stage(config(4), v3, data)
    assert unchecked["details"]["decontamination"] == UNCHECKED
    assert champion_to_measure(config(4), "final", unchecked) is None  # nothing to compare
    third = register(config(4), v3, unchecked)
    assert not third.promoted and third.decontamination == UNCHECKED
    assert "is unchecked: the model has no lineage file" in third.reason
    assert ModelRegistry(mlflow_server).champion(name).version == "1"  # type: ignore[union-attr]
