"""The MLflow model registry: every trained model a version, and a `champion` that moves only to
a version that is better on the same evaluation.

A version's source is `runs:/<run>/registered/<name>`: an MLflow pyfunc model logged in the
pipeline's run (`judgeflow.inference.pyfunc`, so `mlflow.pyfunc.load_model("models:/NAME@champion")`
and `mlflow models serve` work) beside a pointer file (`judgeflow-model.json`: where the weights
are). The weights stay where the pipeline put them (artifact store, S3); MLflow holds the lineage tags, the
evaluation table (description) and the aliases. `models:/NAME@champion` resolves through the
version's `judgeflow.model_uri` tag.

Each version records its metrics per evaluation set (`judgeflow.eval.<set>`: JSON), where a
set is the evaluation data's content hash plus the evaluation settings. Two versions are
compared only on the same set; the pipeline evaluates the champion on a new set when it has to.
Numbers measured on rows the model trained on (`evaluation.allow_overlap`) or on a model without
lineage (`unchecked`: what it trained on is unknown) live under sets of their own
(`judgeflow.evaluation.decontamination.eval_set_for`), so they never meet checked ones, and they never
promote a version unless forced. A champion whose weights cannot be found is an error
(`ChampionNotFoundError`), not a vacancy: with a shared MLflow and machine-local stores, another
machine's champion looks gone from here.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from judgeflow.data.io import is_url
from judgeflow.evaluation.decontamination import (
    LINEAGE_FILE,
    OVERLAP_ALLOWED,
    UNCHECKED,
    overlap_set,
    unchecked_set,
)
from judgeflow.inference import INPUT_COLUMNS
from judgeflow.inference.pyfunc import save_judge_model
from judgeflow.tracking import resolve_tracking_uri

__all__ = [
    "CHALLENGER",
    "CHAMPION",
    "ChampionNotFoundError",
    "Decision",
    "ModelRegistry",
    "RegistryError",
    "VersionInfo",
    "decide",
]

logger = logging.getLogger(__name__)

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
TAG_DECONTAMINATION = "judgeflow.decontamination"  # of the evaluation the gate was given
TAG_MANAGED = "judgeflow.managed"  # on the registered model: judgeflow created it


class RegistryError(LookupError):
    """A `models:/` URI or registered model that does not resolve; says what exists."""


class ChampionNotFoundError(RegistryError):
    """The champion's weights are not where its version says: the gate can neither measure nor
    replace it blind. The message names the version, where it looked, and what to do."""


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
    decontamination: str | None = None  # of this version's evaluation: checked, unchecked, …

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
    decontamination: str | None = None,
    refusal: str | None = None,
) -> tuple[bool, str]:
    """(promote?, why). The first version of a model becomes champion; later ones only when
    `value` beats the champion's value on the same evaluation by more than `margin`. A value
    whose contamination check (`decontamination`) found rows the model trained on
    (`overlap-allowed`) or could not look (`unchecked`: no lineage) promotes nothing, first
    version included; nor does a version with a `refusal` (the hacking gate's reasons); `force`
    promotes whatever the numbers say."""
    shown = "–" if value is None else f"{value:.4f}"
    if refusal and not force:
        return False, (
            f"kept as challenger: {refusal} ({metric} {shown}); check its answers, or promote "
            "it with register.force=true"
        )
    if decontamination == OVERLAP_ALLOWED and not force:
        return False, (
            f"kept as challenger: its {metric} {shown} was measured on evaluation rows it "
            "trained on (evaluation.allow_overlap), and such numbers never promote a version; "
            "evaluate it on held-out data, or promote it with register.force=true"
        )
    if decontamination == UNCHECKED and not force:
        return False, (
            f"kept as challenger: its {metric} {shown} is unchecked: the model has no lineage "
            f"file ({LINEAGE_FILE}), so it may have trained on these evaluation rows, and such "
            "numbers never promote a version; register weights that carry their lineage, or "
            "promote it with register.force=true"
        )
    measured = {
        OVERLAP_ALLOWED: " (measured with overlap allowed)",
        UNCHECKED: " (unchecked: the model has no lineage)",
    }.get(decontamination or "", "")
    if champion is None:
        return True, f"first version of {name}: becomes champion ({metric} {shown}{measured})"
    against = (
        f"champion v{champion.version}'s {champion_value:.4f}"
        if champion_value is not None
        else f"champion v{champion.version}"
    )
    if force:
        return True, f"forced (register.force=true): {metric} {shown}{measured} against {against}"
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
    if value > champion_value + margin + TIE:
        return True, (
            f"promoted: {metric} {value:.4f} beats {against} by more than the margin {margin:g}"
        )
    return False, (
        f"kept as challenger: {metric} {value:.4f} does not beat {against} by more than the "
        f"margin {margin:g}"
    )


#: Two values closer than this are a tie: a rate summed in another order (7/76 as a mean of
#: per-row scores) must not promote a version over one that scored the same.
TIE = 1e-9


def champion_not_found(champion: VersionInfo, tracking_uri: str | None) -> ChampionNotFoundError:
    """The error for a champion whose weights `exists()` did not find (see the class)."""
    where = champion.model_uri
    place = "in the store" if is_url(where) else f"on this machine ({socket.gethostname()})"
    return ChampionNotFoundError(
        f"the champion of {champion.name} is v{champion.version}, but its weights are not at "
        f"{where} (its `{TAG_MODEL_URI}` tag; looked {place}; registry {tracking_uri}). The "
        "gate can neither measure it nor replace it blind. If the weights are on another "
        "machine (a shared MLflow with a machine-local store), register from a machine that "
        "sees them, or use one store for all (storage.root=s3://… or a shared filesystem). If "
        "they are gone for good, promote this version with --set register.force=true, or point "
        f"`champion` at a version whose weights exist (`judgeflow models {champion.name}` lists "
        "them; MlflowClient().set_registered_model_alias(name, 'champion', version))."
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
        champion_eval_set: str | None = None,
        note: str = "",
        champion_gone: bool = False,
        decontamination: str | None = None,
        refusal: str | None = None,
        serving: Mapping[str, Any] | None = None,
    ) -> Decision:
        """Register `model_uri` as a version of `name` (once: a version with the same weights
        is found again) and decide whether `champion` moves to it.

        `evaluation` holds this model's metrics on `eval_set` (bare names: `exact_match`) and
        `decontamination` what its contamination check found (`overlap-allowed` and `unchecked`
        numbers never promote unless `force`); `refusal`, why it must not promote whatever its
        numbers (the hacking gate), unless `force`. `champion_evaluation` is the champion's, just
        measured by the caller, on `champion_eval_set` (default `eval_set`; its overlap or
        unchecked set when the champion trained on some of the rows or has no lineage: kept,
        never compared). `champion_gone`: the champion's
        weights were not found, an error (`ChampionNotFoundError`) unless `force`. `note` is
        added to the recorded reason. `serving` completes the version's MLflow model
        (`max_new_tokens`, `storage_root`, `batch_size`: `judgeflow.inference.pyfunc`); without
        it, or for GRRM, the version is the pointer file alone. The caller holds the model's lock from the champion's
        lookup to here (tasks/register.py), so the champion cannot change in between.
        """
        champion = self.champion(name)
        existing = self.find(name, model_uri)
        for older in {v.version: v for v in (champion, existing) if v is not None}.values():
            self._complete(older, mode, serving)
        if existing is not None and not force:
            return self._already(existing, metric, evaluation, eval_set)
        if champion is not None and champion_gone and not force:
            raise champion_not_found(champion, self.tracking_uri)
        champion_set = champion_eval_set or eval_set
        champion_value, notes = None, [note] if note else []
        if champion is not None:
            measured = champion_evaluation if champion_set == eval_set else None
            champion_value = (measured or champion.evaluation(eval_set) or {}).get(metric)
            if champion_value is None:
                notes += self._apart(champion, metric, eval_set, champion_set, champion_evaluation)
            if champion_gone:  # forced past it
                notes.append(f"(champion v{champion.version}'s weights were not found)")
        value = (evaluation or {}).get(metric)
        unclean = decontamination in (OVERLAP_ALLOWED, UNCHECKED)
        promoted, reason = decide(
            metric, value, champion, champion_value, margin=margin, force=force, name=name,
            decontamination=decontamination, refusal=refusal,
        )  # fmt: skip
        if champion is not None and existing is not None and champion.version == existing.version:
            promoted, reason = True, f"already champion: {existing.ref}"
        if champion is not None:
            reason = " ".join([reason, *notes])
        forced = force and (champion is not None or unclean or bool(refusal))
        info = existing or self._create(name, model_uri, run_id, mode, tags, description, serving)
        version = info.version
        decision_tags = {
            TAG_DECISION: reason,
            TAG_PROMOTED: str(promoted).lower(),
            TAG_FORCED: str(forced).lower(),
            TAG_METRIC: metric,
            CHALLENGER: str(not promoted).lower(),
        }
        if eval_set and evaluation:
            decision_tags[TAG_EVAL + eval_set] = _metrics_json(evaluation)
            decision_tags[TAG_EVAL_SET] = eval_set
        if decontamination:
            decision_tags[TAG_DECONTAMINATION] = decontamination
        for key, value_ in decision_tags.items():
            self.client.set_model_version_tag(name, version, key, value_)
        if champion is not None and champion_evaluation and champion_set:
            self.record_evaluation(name, champion.version, champion_set, champion_evaluation)
        self.client.set_registered_model_alias(name, CHAMPION if promoted else CHALLENGER, version)
        return Decision(
            name=name,
            version=version,
            promoted=promoted,
            forced=forced,
            reason=reason,
            metric=metric,
            value=value,
            champion_version=champion.version if champion else None,
            champion_value=champion_value,
            margin=margin,
            eval_set=eval_set,
            url=self.version_url(name, version),
            decontamination=decontamination,
        )

    @staticmethod
    def _apart(
        champion: VersionInfo,
        metric: str,
        eval_set: str | None,
        champion_set: str | None,
        champion_evaluation: Mapping[str, float] | None,
    ) -> list[str]:
        """Why the champion's numbers on `eval_set`'s rows, if it has some measured with overlap
        allowed or unchecked (no lineage), are not compared: a note for the reason."""
        if not eval_set:
            return []
        notes = []
        for apart in (overlap_set(eval_set), unchecked_set(eval_set)):
            numbers = (
                champion_evaluation if champion_set == apart else None
            ) or champion.evaluation(apart)
            if not numbers or numbers.get(metric) is None:
                continue
            shown = f"its {metric} here, {numbers[metric]:.4f},"
            if apart == overlap_set(eval_set):
                notes.append(
                    f"(champion v{champion.version} trained on "
                    f"{int(numbers.get('overlap_rows', 0))} of these evaluation prompts: {shown} "
                    "was measured with overlap allowed and is not compared with clean numbers)"
                )
            else:
                notes.append(
                    f"(champion v{champion.version} has no lineage file, so what it trained on is "
                    f"unknown: {shown} is unchecked and is not compared with checked numbers)"
                )
        return notes

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
        serving: Mapping[str, Any] | None = None,
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
        artifact_path = self._log_model(run_id, name, model_uri, mode, serving)
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

    def _log_model(
        self,
        run_id: str,
        name: str,
        model_uri: str,
        mode: str,
        serving: Mapping[str, Any] | None,
        *,
        pointer: bool = True,
    ) -> str:
        """Log a version's MLflow model (with `serving`, pointwise and pairwise) and its pointer
        file into `run_id` at `registered/<name>`; returns that artifact path."""
        about = {"model_uri": model_uri, "mode": mode, "registered_model": name}
        artifact_path = f"registered/{name}"
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "model"
            if serving is not None and mode in INPUT_COLUMNS:
                save_judge_model(folder, {**about, **serving})
            folder.mkdir(exist_ok=True)
            if pointer:
                (folder / POINTER_FILE).write_text(json.dumps(about, indent=2) + "\n")
            self.client.log_artifacts(run_id, str(folder), artifact_path)
        return artifact_path

    def _complete(self, info: VersionInfo, mode: str, serving: Mapping[str, Any] | None) -> None:
        """A version registered before versions were MLflow models (the champion, or the same
        weights registered again) gets its model now; its source, `registered/<name>`, stays."""
        if serving is None or mode not in INPUT_COLUMNS or not info.run_id:
            return
        path = f"registered/{info.name}"
        try:
            listed = self.client.list_artifacts(info.run_id, path)
            if not any(a.path == f"{path}/MLmodel" for a in listed):
                self._log_model(
                    info.run_id, info.name, info.model_uri, mode, serving, pointer=False
                )
        except (MlflowException, OSError) as exc:  # a convenience: never in the gate's way
            logger.warning("%s: could not add its MLflow model (%s)", info.ref, exc)

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
