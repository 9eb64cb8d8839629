"""The MLflow model registry: every trained model a version, and a `champion` that moves only to
a version that is better on the same evaluation.

A version's source is `runs:/<run>/registered/<name>`: a small pointer file logged in the
pipeline's run (`judgeflow-model.json`: where the weights are, and their lineage). The weights
stay where the pipeline put them (artifact store, S3); MLflow holds the lineage tags, the
evaluation table (description) and the aliases. `models:/NAME@champion` resolves through the
version's `judgeflow.model_uri` tag.

Each version records its metrics per evaluation set (`judgeflow.eval.<set>`: JSON), where a
set is the evaluation data's content hash plus the evaluation settings. Two versions are
compared only on the same set; the pipeline evaluates the champion on a new set when it has to.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from judgeflow.tracking import resolve_tracking_uri

__all__ = [
    "CHALLENGER",
    "CHAMPION",
    "Decision",
    "ModelRegistry",
    "RegistryError",
    "VersionInfo",
    "decide",
]

CHAMPION = "champion"
CHALLENGER = "challenger"
POINTER_FILE = "judgeflow-model.json"
TAG_MODEL_URI = "judgeflow.model_uri"
TAG_MODE = "judgeflow.mode"
TAG_EVAL_SET = "judgeflow.eval_set"
TAG_EVAL = "judgeflow.eval."  # + eval set: JSON of the metrics on that set
TAG_DECISION = "judgeflow.decision"
TAG_PROMOTED = "judgeflow.promoted"
TAG_FORCED = "judgeflow.forced"
TAG_METRIC = "judgeflow.primary_metric"
TAG_MANAGED = "judgeflow.managed"  # on the registered model: judgeflow created it


class RegistryError(LookupError):
    """A `models:/` URI or registered model that does not resolve; says what exists."""


@dataclass(frozen=True)
class VersionInfo:
    name: str
    version: str
    model_uri: str
    run_id: str | None
    aliases: list[str]
    tags: dict[str, str]
    created_ms: int
    description: str = ""

    def evaluation(self, eval_set: str | None) -> dict[str, float] | None:
        """Its metrics on `eval_set`, if it was ever evaluated there."""
        text = self.tags.get(TAG_EVAL + eval_set) if eval_set else None
        return {k: float(v) for k, v in json.loads(text).items()} if text else None

    @property
    def ref(self) -> str:
        return f"{self.name}/{self.version}"


@dataclass(frozen=True)
class Decision:
    """What the gate did with a version, and why, in numbers."""

    name: str
    version: str
    promoted: bool
    forced: bool
    reason: str
    metric: str
    value: float | None
    champion_version: str | None = None
    champion_value: float | None = None
    margin: float = 0.0
    eval_set: str | None = None
    already_registered: bool = False
    url: str | None = None

    @property
    def verdict(self) -> str:
        return "promoted to champion" if self.promoted else "kept as challenger"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict}


def decide(
    metric: str,
    value: float | None,
    champion: VersionInfo | None,
    champion_value: float | None,
    *,
    margin: float,
    force: bool,
    name: str,
    champion_gone: bool = False,
) -> tuple[bool, str]:
    """(promote?, why). The first version of a model becomes champion; later ones only when
    `value` beats the champion's value on the same evaluation by more than `margin`, or when
    the champion's weights are gone (a champion nobody can load serves nobody)."""
    shown = "–" if value is None else f"{value:.4f}"
    if champion is None:
        return True, f"first version of {name}: becomes champion ({metric} {shown})"
    if champion_gone and champion_value is None:
        return True, (
            f"promoted: champion v{champion.version}'s weights are gone ({champion.model_uri}), "
            f"so it cannot be measured or served ({metric} {shown})"
        )
    against = (
        f"champion v{champion.version}'s {champion_value:.4f}"
        if champion_value is not None
        else f"champion v{champion.version}"
    )
    if force:
        return True, f"forced (register.force=true): {metric} {shown} against {against}"
    if value is None or not math.isfinite(value):
        return False, (
            f"kept as challenger: this run has no {metric} to compare with {against} "
            "(evaluation off or the metric missing); promote it with register.force=true"
        )
    if champion_value is None:
        return False, (
            f"kept as challenger: {against} has no {metric} on this evaluation set, so the two "
            "cannot be compared; promote it with register.force=true"
        )
    if value > champion_value + margin:
        return True, (
            f"promoted: {metric} {value:.4f} beats {against} by more than the margin {margin:g}"
        )
    return False, (
        f"kept as challenger: {metric} {value:.4f} does not beat {against} by more than the "
        f"margin {margin:g}"
    )


@dataclass
class ModelRegistry:
    """Registered models and versions in the MLflow registry at `tracking_uri`."""

    tracking_uri: str | None = None
    client: MlflowClient = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tracking_uri = resolve_tracking_uri(self.tracking_uri)
        self.client = MlflowClient(self.tracking_uri, registry_uri=self.tracking_uri)

    # -- reading

    def versions(self, name: str) -> list[VersionInfo]:
        """Every version of `name`, newest first."""
        found = self.client.search_model_versions(f"name = '{_quoted(name)}'")
        aliases: dict[str, list[str]] = {}
        if found:  # a search leaves the aliases out; the registered model has them
            for alias, version in self.client.get_registered_model(name).aliases.items():
                aliases.setdefault(str(version), []).append(alias)
        infos = [replace(self._info(v), aliases=aliases.get(str(v.version), [])) for v in found]
        return sorted(infos, key=lambda v: int(v.version), reverse=True)

    def names(self) -> list[str]:
        """Registered models judgeflow manages (tag `judgeflow.managed`)."""
        models = self.client.search_registered_models(f"tags.`{TAG_MANAGED}` = 'true'")
        return sorted(m.name for m in models)

    def by_alias(self, name: str, alias: str) -> VersionInfo | None:
        try:
            return self._info(self.client.get_model_version_by_alias(name, alias))
        except MlflowException:
            return None

    def champion(self, name: str) -> VersionInfo | None:
        return self.by_alias(name, CHAMPION)

    def find(self, name: str, model_uri: str) -> VersionInfo | None:
        """The version whose weights are `model_uri` (a re-run served from the cache)."""
        query = f"name = '{_quoted(name)}' and tags.`{TAG_MODEL_URI}` = '{_quoted(model_uri)}'"
        found = self.client.search_model_versions(query)  # (a search leaves aliases out)
        first = min(found, key=lambda v: int(v.version)) if found else None
        return self._info(self.client.get_model_version(name, first.version)) if first else None

    def resolve(self, uri: str) -> VersionInfo:
        """`models:/NAME@ALIAS`, `models:/NAME/VERSION` or `models:/NAME` (its newest version)."""
        if not uri.startswith("models:/"):
            raise RegistryError(f"{uri!r} is not a models:/ URI (models:/NAME@champion)")
        ref = uri.removeprefix("models:/").strip("/")
        name, _, alias = ref.partition("@")
        version = None
        if not alias and "/" in ref:
            name, version = ref.rsplit("/", 1)
        try:
            if alias:
                return self._info(self.client.get_model_version_by_alias(name, alias))
            if version:
                return self._info(self.client.get_model_version(name, version))
            latest = self.versions(name)
        except MlflowException as exc:
            raise RegistryError(self._not_found(uri, name, exc)) from None
        if not latest:
            raise RegistryError(self._not_found(uri, name, None))
        return latest[0]

    # -- writing

    def record_evaluation(
        self, name: str, version: str, eval_set: str, metrics: Mapping[str, float]
    ) -> None:
        """Keep a version's metrics on an evaluation set (so later gates can compare)."""
        self.client.set_model_version_tag(
            name, version, TAG_EVAL + eval_set, _metrics_json(metrics)
        )

    def register(
        self,
        *,
        name: str,
        model_uri: str,
        run_id: str,
        mode: str,
        metric: str,
        evaluation: Mapping[str, float] | None,
        eval_set: str | None,
        tags: Mapping[str, Any],
        description: str,
        margin: float = 0.0,
        force: bool = False,
        champion_evaluation: Mapping[str, float] | None = None,
        note: str = "",
        champion_gone: bool = False,
    ) -> Decision:
        """Register `model_uri` as a version of `name` (once: a version with the same weights
        is found again) and decide whether `champion` moves to it.

        `evaluation` holds this model's metrics on `eval_set` (bare names: `exact_match`);
        `champion_evaluation` the champion's on the same set when the caller just measured it;
        `note` is added to the recorded reason.
        """
        champion = self.champion(name)
        existing = self.find(name, model_uri)
        if existing is not None and not force:
            return self._already(existing, metric, evaluation, eval_set)
        champion_value = None
        if champion is not None:
            on_set = champion_evaluation or champion.evaluation(eval_set) or {}
            champion_value = on_set.get(metric)
        value = (evaluation or {}).get(metric)
        promoted, reason = decide(
            metric, value, champion, champion_value, margin=margin, force=force, name=name,
            champion_gone=champion_gone,
        )  # fmt: skip
        if champion is not None and existing is not None and champion.version == existing.version:
            promoted, reason = True, f"already champion: {existing.ref}"
        reason += f" {note}" if note and champion is not None else ""
        info = existing or self._create(name, model_uri, run_id, mode, tags, description)
        version = info.version
        decision_tags = {
            TAG_DECISION: reason,
            TAG_PROMOTED: str(promoted).lower(),
            TAG_FORCED: str(force and champion is not None).lower(),
            TAG_METRIC: metric,
            CHALLENGER: str(not promoted).lower(),
        }
        if eval_set and evaluation:
            decision_tags[TAG_EVAL + eval_set] = _metrics_json(evaluation)
            decision_tags[TAG_EVAL_SET] = eval_set
        for key, value_ in decision_tags.items():
            self.client.set_model_version_tag(name, version, key, value_)
        if champion is not None and champion_evaluation and eval_set:
            self.record_evaluation(name, champion.version, eval_set, champion_evaluation)
        self.client.set_registered_model_alias(name, CHAMPION if promoted else CHALLENGER, version)
        return Decision(
            name=name,
            version=version,
            promoted=promoted,
            forced=force and champion is not None,
            reason=reason,
            metric=metric,
            value=value,
            champion_version=champion.version if champion else None,
            champion_value=champion_value,
            margin=margin,
            eval_set=eval_set,
            url=self.version_url(name, version),
        )

    def version_url(self, name: str, version: str) -> str | None:
        uri = str(self.tracking_uri)
        if not uri.startswith("http"):
            return None
        return f"{uri.rstrip('/')}/#/models/{name}/versions/{version}"

    # -- helpers

    def _create(
        self,
        name: str,
        model_uri: str,
        run_id: str,
        mode: str,
        tags: Mapping[str, Any],
        description: str,
    ) -> VersionInfo:
        try:
            self.client.get_registered_model(name)
        except MlflowException:
            try:
                self.client.create_registered_model(
                    name,
                    tags={TAG_MANAGED: "true", TAG_MODE: mode},
                    description=f"judgeflow: {mode} judge; the `{CHAMPION}` alias is the one to use.",
                )
            except MlflowException as exc:  # another run registering at once created it first
                if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
        pointer = {"model_uri": model_uri, "mode": mode, "registered_model": name}
        artifact_path = f"registered/{name}"
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / POINTER_FILE
            path.write_text(json.dumps(pointer, indent=2) + "\n")
            self.client.log_artifact(run_id, str(path), artifact_path)
        version_tags = {
            **{k: str(v) for k, v in tags.items() if v is not None and str(v) != ""},
            TAG_MODEL_URI: model_uri,
            TAG_MODE: mode,
            "judgeflow.mlflow_run_id": run_id,
        }
        created = self.client.create_model_version(
            name,
            f"runs:/{run_id}/{artifact_path}",
            run_id=run_id,
            tags=version_tags,
            description=description,
        )
        return self._info(created)

    def _already(
        self,
        existing: VersionInfo,
        metric: str,
        evaluation: Mapping[str, float] | None,
        eval_set: str | None,
    ) -> Decision:
        promoted = CHAMPION in existing.aliases
        before = existing.tags.get(TAG_DECISION, "")
        status = CHAMPION if promoted else CHALLENGER
        return Decision(
            name=existing.name,
            version=existing.version,
            promoted=promoted,
            forced=existing.tags.get(TAG_FORCED) == "true",
            reason=f"already registered as {existing.ref} ({status}); then: {before}",
            metric=metric,
            value=(evaluation or {}).get(metric),
            eval_set=eval_set,
            already_registered=True,
            url=self.version_url(existing.name, existing.version),
        )

    def _info(self, v: ModelVersion) -> VersionInfo:
        return VersionInfo(
            name=v.name,
            version=str(v.version),
            model_uri=(v.tags or {}).get(TAG_MODEL_URI) or str(v.source),
            run_id=v.run_id,
            aliases=list(v.aliases or []),
            tags=dict(v.tags or {}),
            created_ms=int(v.creation_timestamp or 0),
            description=v.description or "",
        )

    def _not_found(self, uri: str, name: str, exc: Exception | None) -> str:
        known = self.names()
        hint = f"registered models: {', '.join(known)}" if known else "no registered models yet"
        where = f"(tracking URI {self.tracking_uri})"
        detail = f": {exc}" if exc else ": it has no versions"
        return f"{uri} does not resolve {where}{detail}. {hint}; list them with `judgeflow models`"


def _metrics_json(metrics: Mapping[str, float]) -> str:
    """Top-level metrics only (per-subset ones would not fit an MLflow tag)."""
    flat = {
        k: round(float(v), 6)
        for k, v in sorted(metrics.items())
        if "/" not in k and isinstance(v, int | float) and math.isfinite(v)
    }
    return json.dumps(flat, separators=(",", ":"))


def _quoted(text: str) -> str:
    return text.replace("'", "\\'")
