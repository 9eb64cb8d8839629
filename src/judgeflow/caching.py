"""Cache identities of the pipeline's stages: what a stage's result depends on, as one string.

A scheduled retraining on unchanged data should cost nothing, and a change should re-run exactly
the stages downstream of it. Each stage's key names its inputs by content, never by time:

- download: source URI + revision + a cheap fingerprint of the source listing (per file: name,
  size and whatever version marker the filesystem reports: ETag, mtime, blob id, sha256);
- prepare:  the manifest's content hash + the preparation parameters + the code version of
  `judgeflow.data`;
- evaluate: the model directory + the prepared data + the evaluation settings;
- sft:      the SFT data's sha256 + the base model and SFT settings + the engines' code;
- train:    the prepared train/validation files' sha256 + the training-relevant configuration
  (model, GRPO, engine, sequence lengths, seed, nodes × GPUs; not tracking, evaluation or
  placement) + the code version of the engines and rewards.

`usable` says whether a cached result still points at files that exist (a deleted checkpoint
makes its cache entry a miss). The orchestrator (Prefect, `tasks/policies.py`) decides where
keys and results are stored; nothing here imports it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import judgeflow
from judgeflow.config import RunConfig, judgeflow_home
from judgeflow.config.inputs import MixerSource
from judgeflow.config.redaction import strip_credentials
from judgeflow.data.io import exists

PACKAGE_DIR = Path(judgeflow.__file__).parent

# Source files whose behaviour a stage's output depends on (relative to the package).
PREPARE_CODE = ("data",)
TRAIN_CODE = ("engines", "rewards", "stages", "cli/dry_run.py", "cluster",
              "inference/judge_reward.py", "inference/served_judge_client.py",
              "inference/judge_failures.py",
              "inference/verdicts.py")  # fmt: skip
EVALUATE_CODE = ("evaluation", "stages/evaluate.py", "data/prompt_hashes.py", "data/templates.py",
                 "engines", "rewards", "inference/judge_reward.py",
                 "inference/served_judge_client.py", "inference/judge_failures.py",
                 "inference/verdicts.py")  # fmt: skip

# Markers filesystems report for "this file's version" (s3: ETag; local: mtime; hf: blob_id/lfs).
_VERSION_FIELDS = ("ETag", "etag", "mtime", "LastModified", "last_modified", "blob_id", "sha256")


def cache_dirs() -> dict[str, Path]:
    """Where results and cache keys are kept; both must be readable by every worker and run.

    `$JUDGEFLOW_PREFECT_RESULTS` / `$JUDGEFLOW_PREFECT_CACHE_KEYS` override the defaults under
    `$JUDGEFLOW_HOME` (put that on the shared filesystem for a cluster). They are different
    directories on purpose: Prefect's result records and cache keys must not share a path.
    The locks that make concurrent runs compute a key once live next to the keys (`locks`), so
    every run that can read a key also sees its lock.
    """
    home = judgeflow_home()
    keys = Path(os.environ.get("JUDGEFLOW_PREFECT_CACHE_KEYS") or home / "prefect-cache-keys")
    return {
        "results": Path(os.environ.get("JUDGEFLOW_PREFECT_RESULTS") or home / "prefect-results"),
        "keys": keys,
        "locks": keys / ".locks",
    }


def digest(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


@functools.cache
def code_version(*paths: str) -> str:
    """Package version + sha256 of the given modules' source (files or packages, recursively)."""
    h = hashlib.sha256(judgeflow.__version__.encode())
    for rel in paths:
        root = PACKAGE_DIR / rel
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for file in files:
            h.update(str(file.relative_to(PACKAGE_DIR)).encode() + b"\x00" + file.read_bytes())
    return f"{judgeflow.__version__}+{h.hexdigest()[:16]}"


# ---------------------------------------------------------------------------- download


def source_fingerprint(source: str, revision: str | None = None) -> list[dict[str, Any]]:
    """What the source holds now, from a listing (no data is read): per-file size and version."""
    from judgeflow.storage import credentials_out_of_errors, list_data_files, resolve_uri

    url = resolve_uri(source, revision)
    fs, root, files = list_data_files(url)
    out = []
    for path in files:
        with credentials_out_of_errors():
            info = fs.info(path)
        entry = {"path": os.path.relpath(path, root) if path != root else Path(path).name}
        entry["size"] = info.get("size")
        entry.update({k: str(info[k]) for k in _VERSION_FIELDS if info.get(k) is not None})
        lfs = info.get("lfs")
        if isinstance(lfs, dict) and lfs.get("sha256"):
            entry["sha256"] = lfs["sha256"]
        out.append(entry)
    return out


def mixer_listing(mixer: list[MixerSource]) -> list[list[Any]]:
    """What a mixture's download holds: each source (no password), revision, split and what it
    lists now (`source_fingerprint`)."""
    return [
        [strip_credentials(p.source), p.revision, p.split, source_fingerprint(p.source, p.revision)]
        for p in mixer
    ]


def download_key(cfg: RunConfig) -> str:
    if cfg.data.mixer:
        return "download-" + digest("mixer", mixer_listing(cfg.data.mixer))
    assert cfg.data.source is not None  # DataConfig: a source or a mixer
    fingerprint = source_fingerprint(cfg.data.source, cfg.data.revision)
    source = strip_credentials(cfg.data.source)  # a key is kept: the data's name, no password
    return "download-" + digest(source, cfg.data.revision, fingerprint)


# ---------------------------------------------------------------------------- prepare


def prepare_identity(cfg: RunConfig) -> dict[str, Any]:
    """Everything besides the data that decides what `prepare` writes."""
    d = cfg.data
    if cfg.mode == "rlvr":  # open-instruct's rows: no judge format, labels or A/B balancing
        return {
            "mode": cfg.mode,
            "val_fraction": d.val_fraction,
            "seed": d.seed,
            "skip_invalid": d.skip_invalid,
            "remap_verifier": dict(sorted(cfg.rlvr.remap_verifier.items())),
            "tokenizer": cfg.model.path if d.filter_overlong_prompts else None,
            "max_prompt_length": d.max_prompt_length if d.filter_overlong_prompts else None,
            # only when set: other runs keep their cache keys
            **({"system_prompt": d.system_prompt} if d.system_prompt is not None else {}),
            **(
                {"chat_template": d.chat_template_jinja}
                if d.chat_template_jinja is not None and d.filter_overlong_prompts
                else {}
            ),
            **({"mixer": _mixer_identity(d.mixer, d.mixer_seed)} if d.mixer else {}),
            **({"eval_mixer": _mixer_identity(d.eval_mixer, d.mixer_seed)} if d.eval_mixer else {}),
            # rows a trained judge pays (only when one does: other runs keep their cache keys)
            **(
                {"judge_datasets": sorted({x.lower() for x in cfg.reward.judge_datasets})}
                if cfg.reward.paid_by_judge
                else {}
            ),
        }
    return {
        "mode": cfg.mode,
        "val_fraction": d.val_fraction,
        "balance_positions": d.balance_positions,
        "seed": d.seed,
        "input_format": d.format,
        "skip_invalid": d.skip_invalid,
        "chosen_label": d.chosen_label,
        "rejected_label": d.rejected_label,
        "tokenizer": cfg.model.path if d.filter_overlong_prompts else None,
        "max_prompt_length": d.max_prompt_length if d.filter_overlong_prompts else None,
    }


def _mixer_identity(mixer: list[MixerSource], seed: int) -> list[Any]:
    """What of a mixer decides the rows taken (the files are the manifest's)."""
    return [[repr(p.amount), p.split, dict(sorted(p.remap_verifier.items())), seed] for p in mixer]


def model_version(path: str) -> str:
    """A local model directory by content marker (name, size, mtime of its files), so a model
    rebuilt in the same place is a new model; a hub id stands for itself."""
    root = Path(path)
    if not root.is_dir():
        return path
    files = sorted(p for p in root.iterdir() if p.is_file())
    return digest(path, [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files])


def prepare_key(cfg: RunConfig, manifest_hash: str) -> str:
    tokenizer = model_version(cfg.model.path) if cfg.data.filter_overlong_prompts else None
    return "prepare-" + digest(
        manifest_hash, prepare_identity(cfg), tokenizer, code_version(*PREPARE_CODE)
    )


def prepare_grrm_key(cfg: RunConfig, manifest_hash: str) -> str:
    """GRRM's SFT / RL train / RL test files depend on the data, its columns and augmentation."""
    d = cfg.data
    return "prepare-grrm-" + digest(
        manifest_hash,
        d.grrm.model_dump(mode="json"),
        d.seed,
        d.skip_invalid,
        code_version(*PREPARE_CODE),
    )


# ---------------------------------------------------------------------------- train


def training_config(cfg: RunConfig) -> dict[str, Any]:
    """The configuration a trained model depends on (not tracking, evaluation or placement)."""
    return {
        "mode": cfg.mode,
        "engine": cfg.resolved_engine,
        "model": cfg.model.model_dump(mode="json"),
        "model_version": model_version(cfg.model.path),
        "grpo": cfg.grpo.model_dump(mode="json"),
        "max_prompt_length": cfg.data.max_prompt_length,
        "max_response_length": cfg.data.max_response_length,
        "seed": cfg.data.seed,
        "nodes": cfg.cluster.nodes,
        "gpus_per_node": cfg.cluster.gpus_per_node,
        **reward_identity(cfg),
        **chat_template_identity(cfg),
    }


def chat_template_identity(cfg: RunConfig) -> dict[str, Any]:
    """A policy's `data.chat_template` (its Jinja) when set: the prepared rows hold messages, so
    the template, not the data, says what text a model was trained and measured on. Empty when
    unset, so other runs keep their cache keys."""
    template = cfg.data.chat_template_jinja if cfg.mode == "rlvr" else None
    return {"chat_template": template} if template is not None else {}


def reward_identity(cfg: RunConfig) -> dict[str, Any]:
    """What pays a policy (mode rlvr): the reward rules and, when a judge pays, which judge (a
    pipeline pins `reward.judge` to the version's weights, so another version is another key)
    and how it is asked. Empty for the judges, whose reward is their mode's."""
    if cfg.mode != "rlvr":
        return {}
    # how many requests at once, how long each may wait or be retried, where the judge is served,
    # when a failing judge stops the run and how a missing judge is trained first change no
    # score (the judge is pinned to a version); what answers at a URL does (`judge_model`)
    placement = {"judge_concurrency", "judge_gpus", "judge_timeout_s", "judge_retry_s",
                 "judge_max_failure_rate", "judge_recipe", "judge_profile"}  # fmt: skip
    judge = (
        cfg.reward.model_dump(mode="json", exclude=placement) if cfg.reward.paid_by_judge else None
    )
    return {"rlvr": cfg.rlvr.model_dump(mode="json"), "judge": judge}


def prepared_data_hash(report: dict[str, Any]) -> str:
    """Content identity of the prepared files: the sha256 of each split from the data report."""
    splits = report.get("splits") or {}
    return digest({name: (s or {}).get("sha256") for name, s in sorted(splits.items())})


def train_key(cfg: RunConfig, report: dict[str, Any]) -> str:
    return "train-" + digest(
        prepared_data_hash(report), training_config(cfg), code_version(*TRAIN_CODE)
    )


def prepare_sft_key(cfg: RunConfig, manifest_hash: str) -> str:
    """The validated SFT parquet depends on the SFT source's content, `skip_invalid` and a
    policy's `data.system_prompt`."""
    system = sft_system_prompt(cfg)
    return "prepare-sft-" + digest(
        manifest_hash,
        cfg.data.skip_invalid,
        *([system] if system is not None else []),  # unset: the key it always had
        code_version(*PREPARE_CODE),
    )


def sft_system_prompt(cfg: RunConfig) -> str | None:
    """The system turn the SFT rows get: a policy's `data.system_prompt` (judges' SFT rows are
    rendered by their templates and keep theirs)."""
    return cfg.data.system_prompt if cfg.mode == "rlvr" else None


def sft_key(cfg: RunConfig, sft_file: str) -> str:
    """The SFT model depends on its data (sha256), the base model and the SFT settings."""
    from judgeflow.data.io import sha256_file

    return "sft-" + digest(
        sha256_file(sft_file),
        cfg.model.model_dump(mode="json"),
        model_version(cfg.model.path),
        cfg.sft.model_dump(mode="json", exclude={"enabled", "source"}),
        cfg.data.seed,
        cfg.cluster.nodes,
        cfg.cluster.gpus_per_node,
        code_version(*TRAIN_CODE),
        *([template] if (template := chat_template_identity(cfg)) else []),
    )


def evaluate_key(cfg: RunConfig, model_dir: str, report: dict[str, Any]) -> str:
    """A model measured on the same data with the same settings gives the same numbers."""
    return "evaluate-" + digest(
        model_dir,
        model_version(model_dir),
        cfg.mode,
        prepared_data_hash(report),
        cfg.evaluation.model_dump(mode="json"),
        code_version(*EVALUATE_CODE),
        *([reward_identity(cfg)] if cfg.mode == "rlvr" else []),  # what scores a policy
        *([template] if (template := chat_template_identity(cfg)) else []),  # how it is asked
    )


# ---------------------------------------------------------------------------- validity


def usable(result: Any) -> bool:
    """Whether a cached result's files are still there (else the cache entry must be a miss)."""
    paths: list[str | None]
    if hasattr(result, "model_dir"):  # TrainedModel
        paths = [result.model_dir]
    elif hasattr(result, "model"):  # a wrapper around a TrainedModel
        return usable(result.model)
    elif hasattr(result, "sft_file") and hasattr(result, "rl"):  # GrrmData
        return exists(result.sft_file) and usable(result.rl)
    elif hasattr(result, "file") and hasattr(result, "report"):  # SftData
        paths = [result.file]
    elif hasattr(result, "train_file"):  # PreparedData
        paths = [result.train_file, result.val_file, result.report_file]
    elif hasattr(result, "files") and hasattr(result, "paths"):  # Manifest
        # published to a remote store: the copy there is what other machines read
        paths = [result.uri] if result.uri else [str(p) for p in result.paths]
    else:
        return True
    return all(exists(p) for p in paths if p)


__all__ = [
    "cache_dirs",
    "code_version",
    "digest",
    "download_key",
    "evaluate_key",
    "model_version",
    "prepare_grrm_key",
    "prepare_identity",
    "prepare_key",
    "prepare_sft_key",
    "prepared_data_hash",
    "sft_key",
    "source_fingerprint",
    "train_key",
    "training_config",
    "usable",
]
