"""The register stage: a trained model becomes an MLflow model version with its lineage, and the
champion gate decides whether `champion` moves to it (`judgeflow.registry.models`).

The gate's three steps, finding the champion (`champion_to_measure`), measuring it on this run's
evaluation set and deciding (`register_stage`), must run under one lock per registered model
(`registry_lock`; `flows.pipeline_run.register_model` holds it): otherwise another run can move
`champion` in between, and the decision would weigh one champion's numbers against another.

The lock is an flock (`judgeflow.data.file_lock`, released by the kernel when its process dies)
next to the cache locks, so it excludes every run that uses the same cache-key directory
($JUDGEFLOW_PREFECT_CACHE_KEYS, by default under $JUDGEFLOW_HOME), on this machine or over a
shared filesystem; runs that share only the MLflow server do not see it. Runs in one process
(threads) exclude each other through a lock of this process first.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from judgeflow import caching
from judgeflow.config import RunConfig, with_policy
from judgeflow.config.redaction import strip_credentials
from judgeflow.data import file_lock
from judgeflow.data.io import exists
from judgeflow.evaluation.decontamination import (
    OVERLAP_ALLOWED,
    UNCHECKED,
    overlap_set,
    unchecked_set,
)
from judgeflow.evaluation.hacking import TAG_HACKING
from judgeflow.registry.models import Decision, ModelRegistry, VersionInfo
from judgeflow.registry.paying_judge import (
    TAG_REWARD_JUDGE,
    TAG_REWARD_JUDGE_DATA,
    TAG_REWARD_JUDGE_MODE,
    TAG_REWARD_JUDGE_MODEL,
    TAG_REWARD_JUDGE_RUN,
)
from judgeflow.retries import retrying
from judgeflow.stages.evaluate import decontamination_of
from judgeflow.tracking import Tracker

#: Tags of the pipeline's MLflow run a version inherits (its lineage).
INHERITED_TAGS = (
    "judgeflow.recipe",
    "judgeflow.config_hash",
    "judgeflow.git_commit",
    "judgeflow.base_model",
    "judgeflow.data.source",
    "judgeflow.data.manifest_hash",
    "judgeflow.sft.source",
    "judgeflow.sft.data_sha256",
)
#: The lineage of a judge-paid policy (`judgeflow.registry.paying_judge`) its version keeps,
#: and the hacking gate's verdict on it.
JUDGE_TAGS = frozenset(
    {TAG_REWARD_JUDGE, TAG_REWARD_JUDGE_RUN, TAG_REWARD_JUDGE_DATA, TAG_REWARD_JUDGE_MODE,
     TAG_REWARD_JUDGE_MODEL, TAG_HACKING}
)  # fmt: skip
SFT_SUFFIX = "-sft"
#: How often a run waiting for a registered model's lock tries again, in seconds.
LOCK_POLL_S = 0.2

logger = logging.getLogger("judgeflow.register")

#: The registered models whose lock this context holds (`registry_lock`).
_HELD: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "registry_locks", default=()
)
#: This process's lock of each lock file, so that its threads exclude each other whatever the
#: filesystem's flock does within one process (NFS emulates it with per-process POSIX locks).
_IN_PROCESS: dict[Path, threading.Lock] = {}
_GUARD = threading.Lock()


@contextlib.contextmanager
def registry_lock(name: str) -> Iterator[None]:
    """Hold the lock of registered model `name` for the block, waiting (and logging once that
    it waits) while another run has it."""
    path = caching.cache_dirs()["locks"] / f"register-{_digest(name)}.lock"
    fd = _try_take(path)
    if fd is None:
        said = "register %s: another run is deciding on this model's champion; waiting for its"
        logger.info(said + " decision (lock %s)", name, path)
    while fd is None:
        time.sleep(LOCK_POLL_S)
        fd = _try_take(path)
    token = _HELD.set((*_HELD.get(), name))
    try:
        yield
    finally:
        _HELD.reset(token)
        try:
            file_lock.release(fd)  # the file stays: one per registered model, taken again
        finally:
            _IN_PROCESS[path].release()


def holds_registry_lock(name: str) -> bool:
    """Whether this context is inside `registry_lock(name)`."""
    return name in _HELD.get()


def _try_take(path: Path) -> int | None:
    """The lock file's descriptor, holding both locks, or None (neither held) when another
    thread or process has it; never waits."""
    with _GUARD:
        in_process = _IN_PROCESS.setdefault(path, threading.Lock())
    if not in_process.acquire(blocking=False):
        return None
    try:
        return file_lock.take(path)
    except file_lock.LockBusy:
        in_process.release()
        return None
    except BaseException:
        in_process.release()
        raise


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:32]


def registered_name(cfg: RunConfig, kind: str) -> str:
    """`kind` "final" is the recipe's model; "sft" its warm-start models (`<name>-sft`)."""
    return cfg.registered_model_name + (SFT_SUFFIX if kind == "sft" else "")


def primary_metric(cfg: RunConfig) -> str:
    from judgeflow.evaluation import PRIMARY_METRIC

    return cfg.register.primary_metric or PRIMARY_METRIC[cfg.mode]


def gate_params(cfg: RunConfig, kind: str = "final") -> dict[str, Any]:
    """What the registry's gate is given for `cfg`: the model, its metric, margin and force."""
    return {
        "name": registered_name(cfg, kind),
        "metric": primary_metric(cfg),
        "margin": cfg.register.margin,
        "force": cfg.register.force,
    }


@retrying("look up the champion")
def champion_to_measure(
    cfg: RunConfig, kind: str, evaluation: Mapping[str, Any] | None
) -> VersionInfo | None:
    """The champion, when the gate needs its numbers on this run's evaluation set and the
    registry has none, clean, measured with overlap allowed or unchecked (the data or the
    evaluation settings changed since it was measured). Not when this run's own numbers were
    measured with overlap allowed or unchecked: they cannot promote it, so there is nothing to
    compare."""
    eval_set = (evaluation or {}).get("details", {}).get("eval_set")
    if not cfg.register.enabled or not eval_set or cfg.register.force:
        return None
    if decontamination_of(evaluation) in (OVERLAP_ALLOWED, UNCHECKED):
        return None
    champion = ModelRegistry(cfg.tracking.tracking_uri).champion(registered_name(cfg, kind))
    measured = (eval_set, overlap_set(eval_set), unchecked_set(eval_set))
    if champion is None or any(champion.evaluation(s) for s in measured):
        return None
    return champion if exists(champion.model_uri) else None  # gone: the gate names it


def champion_config(cfg: RunConfig, model_uri: str) -> RunConfig:
    """`cfg` for evaluating the champion on this run's data: its weights, and overlap with its
    own training data reported instead of refused (it may have trained on prompts that are
    validation data now: those numbers land on the overlap set, are not compared, and the
    decision says so; so do a champion's without lineage, on the unchecked set)."""
    evaluation = cfg.evaluation.model_copy(update={"allow_overlap": True})
    return with_policy(cfg, model_uri).model_copy(update={"evaluation": evaluation})


def register_stage(
    cfg: RunConfig,
    *,
    run_id: str,
    model_dir: str,
    kind: str,
    evaluation: Mapping[str, Any] | None,
    champion_evaluation: Mapping[str, Any] | None = None,
    job_ids: Sequence[str] = (),
    comparison: Sequence[Mapping[str, Any]] = (),
    refusal: str | None = None,
) -> Decision:
    """Register `model_dir` (the `cfg` run's `kind` model) and decide on `champion`.

    `evaluation` / `champion_evaluation` are evaluate-stage results (`metrics` with `eval/…`
    names, `details` with the evaluation set and what decontamination found) of this model and
    of the champion. The parent SFT version is the `-sft` version whose weights this model
    started from (`model.path`). `refusal` says why it must not become champion whatever its
    numbers (the hacking gate's reasons; `register.force` overrides it). Call it under the lock
    `champion_to_measure` was called under.
    """
    registry = ModelRegistry(cfg.tracking.tracking_uri)
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    run_tags = tracker.client.get_run(run_id).data.tags
    gate = gate_params(cfg, kind)
    name, metric = gate["name"], gate["metric"]
    parent = registry.find(registered_name(cfg, "sft"), cfg.model.path) if kind != "sft" else None
    champion = registry.champion(name)
    measured = (champion_evaluation or {}).get("details", {})
    if champion is None or measured.get("model") != champion.model_uri:
        champion_evaluation = measured = None  # not this champion's (moved outside judgeflow)
    ours = _bare(evaluation)
    theirs = _bare(champion_evaluation)
    eval_set = (evaluation or {}).get("details", {}).get("eval_set")
    beside = theirs if (measured or {}).get("eval_set") == eval_set else None  # same set only
    tags = {key: run_tags.get(key) for key in INHERITED_TAGS}
    tags |= {
        "judgeflow.data.revision": cfg.data.revision,
        "judgeflow.code_version": _code_version(),
        "judgeflow.slurm_job_ids": ",".join(job_ids),
        "judgeflow.start_model": cfg.model.path,
        "judgeflow.parent_version": parent.ref if parent else None,
        "judgeflow.kind": kind,
    }
    if kind != "sft":  # the judge that paid the policy (the SFT model was not paid by it)
        tags |= {key: value for key, value in run_tags.items() if key in JUDGE_TAGS}
    decision = registry.register(
        name=name,
        model_uri=model_dir,
        run_id=run_id,
        mode=cfg.mode,
        metric=metric,
        evaluation=ours,
        eval_set=eval_set,
        tags=tags,
        description=description(name, metric, ours, beside, evaluation, comparison),
        margin=gate["margin"],
        force=gate["force"],
        champion_evaluation=theirs,
        champion_eval_set=(measured or {}).get("eval_set"),
        champion_gone=champion is not None and not exists(champion.model_uri),
        decontamination=decontamination_of(evaluation),
        refusal=refusal,
        serving={  # what the version's MLflow model needs to judge as evaluation did
            "max_new_tokens": cfg.evaluation.max_new_tokens,
            "batch_size": cfg.evaluation.batch_size,
            "storage_root": strip_credentials(cfg.storage.root),
        },
    )
    tracker.set_tags(
        {
            f"judgeflow.registered.{name}": decision.version,
            f"judgeflow.registered.{name}.decision": decision.reason,
            f"judgeflow.registered.{name}.url": decision.url,
        }
    )
    return decision


def description(
    name: str,
    metric: str,
    ours: Mapping[str, float] | None,
    theirs: Mapping[str, float] | None,
    evaluation: Mapping[str, Any] | None,
    comparison: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The version's description: its evaluation table (markdown), as the MLflow UI shows it."""
    if not ours:
        return f"{name}: registered without an evaluation."
    details = (evaluation or {}).get("details", {})
    checked = details.get("decontamination")
    lines = [
        f"Evaluation on `{details.get('data', 'the validation split')}` "
        f"(set `{details.get('eval_set', '?')}`"
        + (f", decontamination: {checked}" if checked else "")
        + f"); gate metric **{metric}**.",
        "",
        "| metric | this version | champion |",
        "|---|---|---|",
    ]
    for key in sorted(ours, key=lambda k: (k != metric, k)):
        champ = theirs.get(key) if theirs else None
        lines.append(f"| {key} | {ours[key]:.4f} | {'' if champ is None else f'{champ:.4f}'} |")
    subsets = details.get("subsets") or []
    if subsets:
        lines += ["", f"| subset | {metric} | n |", "|---|---|---|"]
        for values in subsets:
            value = values.get(metric)
            shown = "" if value is None else f"{float(value):.4f}"
            lines.append(f"| {values.get('subset')} | {shown} | {int(values.get('n', 0))} |")
    if comparison:
        labels = [k for k in comparison[0] if k not in ("metric", "change")]
        lines += ["", "| metric | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
        for row in comparison:
            cells = [_cell(row.get(label)) for label in labels]
            lines.append(f"| {row['metric']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else ("" if value is None else str(value))


def _bare(evaluation: Mapping[str, Any] | None) -> dict[str, float] | None:
    """`eval/exact_match` -> `exact_match` (top-level metrics only)."""
    if not evaluation or not evaluation.get("metrics"):
        return None
    return {
        key.removeprefix("eval/"): float(value)
        for key, value in evaluation["metrics"].items()
        if key.count("/") == 1
    }


def _code_version() -> str:
    from judgeflow.caching import TRAIN_CODE, code_version

    return code_version(*TRAIN_CODE)
