"""Every field of `RunConfig` is read by what runs: change it, and what the running engine,
backend or preparation is given changes. A key only one engine or backend reads is declared
in `ONLY_READ_BY`, and setting it for another warns by name.

The walk perturbs one leaf at a time, on the recipe where that key means something, and compares
the inputs each consumer would receive (the engines' `params_from` / verl's overrides, the
evaluation's: the HF generator's arguments under TRL, verl's validation command under verl, the
submitit parameters, the stage spec, the preparation's arguments). No consumer is stubbed: these
are the functions the pipeline calls.
"""

from __future__ import annotations

import types
import typing
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from judgeflow.caching import prepare_identity
from judgeflow.cluster.submit import executor_options, executor_parameters
from judgeflow.config import ConfigError, IgnoredKeyWarning, RunConfig, load_config
from judgeflow.engines import llamafactory, trl
from judgeflow.engines.verl import verl_overrides
from judgeflow.engines.verl_eval import evaluation_gpus, validation_overrides
from judgeflow.evaluation import params_from as evaluation_params
from judgeflow.key_readers import ONLY_READ_BY
from judgeflow.secrets import resolve_secrets
from judgeflow.stages import evaluation_job_config, grrm_rl_train_job, stage_spec, store_for
from judgeflow.stages.evaluate import overlap_params
from judgeflow.stages.register import gate_params
from judgeflow.storage import Manifest, ManifestFile
from judgeflow.tracking import resolve_tracking_uri

# Keys that choose *what* runs rather than tune it; each is covered where it acts.
SWITCHES = {
    "recipe": "names the MLflow run and the registered model (tests/flows)",
    "mode": "picks prompts, reward and flow (tests/flows, tests/rewards)",
    "engine": "picks the engine itself (test_engine_choice below)",
    "sft.enabled": "adds the SFT stages to judge-grpo (tests/flows/test_judge_flow.py)",
    "sft.source": "the SFT stage's data (tests/flows/test_judge_flow.py)",
    "evaluation.enabled": "adds the evaluate stages (tests/flows)",
    "data.source": "what download fetches (tests/data/test_storage.py)",
    "data.revision": "what download fetches (tests/data/test_storage.py)",
    "data.val_source": "a second download and preparation (tests/data/test_val_source.py)",
    "data.shards": "fans GRRM preparation out over Ray (tests/flows/test_prepare_sharded.py)",
    "data.ray_address": "where sharded preparation runs (tests/flows/test_prepare_sharded.py)",
    "cluster.retries": "task retries of a killed stage (tests/cluster/test_slurm_stages.py)",
    "cluster.retry_delay_s": "delay between those retries (tests/cluster/test_slurm_stages.py)",
    "grpo.adv_estimator": "one allowed value (grpo), passed to verl (test_adv_estimator below)",
    "storage.credentials_block": "S3 keys from a Prefect block (tests/flows/test_credentials.py)",
    "cluster.poll_s": "how often a job is polled (tasks/jobs.py → cluster/monitor.py)",
    "register.enabled": "adds the register stages (tests/flows/test_registry.py)",
}

MANIFEST = Manifest(
    "sample://grrm_tiny",
    None,
    "/data",
    [ManifestFile("train.jsonl", "a" * 64, 1, 1), ManifestFile("test.jsonl", "b" * 64, 1, 1)],
)


def consumers(cfg: RunConfig) -> dict[str, Any]:
    """What each part of the pipeline is given for `cfg` (no files are written)."""
    seen: dict[str, Any] = {
        "executor": executor_parameters(cfg.cluster, name="train"),
        "executor_options": executor_options(cfg.cluster),
        "spec": asdict(stage_spec(cfg, "train", "run", {}, dry_run=True)),
        "evaluation_job": executor_parameters(evaluation_job_config(cfg).cluster, name="eval"),
        "sft": asdict(llamafactory.params_from(cfg, "/out/sft")),
        "store": store_for(cfg).root,
        "tracking": (cfg.tracking.experiment, resolve_tracking_uri(cfg.tracking.tracking_uri)),
        "model": cfg.model.path,
        "gate": gate_params(cfg),  # the registry's champion gate
        "overlap": overlap_params(cfg),  # the contamination check before any evaluation
        # what a job's input file gives it (every env: variable set, every block loaded)
        "job_secrets": resolve_secrets(cfg.cluster, environ=_AnyVariable()),
    }
    if cfg.mode == "grrm":
        seen["prepare"] = asdict(grrm_rl_train_job(cfg, MANIFEST))
        seen["prepare_sft_analysis"] = cfg.data.grrm.analysis_key
    else:
        seen["prepare"] = prepare_identity(cfg)
    if cfg.resolved_engine == "trl":
        seen["trl"] = asdict(trl.params_from(cfg, "/out"))
        seen["evaluation"] = evaluation_params(cfg)
    else:
        seen["verl"] = verl_overrides(
            cfg, train_files=["/t.parquet"], val_files=["/v.parquet"], checkpoint_dir="/ckpt"
        )
        seen["evaluation"] = validation_overrides(  # verl's validation mode generates
            cfg,
            eval_file="/v.parquet",
            train_file="/t.parquet",
            output_dir="/eval",
            n_gpus=evaluation_gpus(cfg),
        )
    return seen


class _AnyVariable(dict):  # type: ignore[type-arg]
    """An environment in which every variable is set (to its own name)."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> str:
        return f"value of {key}"


def leaves(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += leaves(ann, f"{prefix}{name}.")
        else:
            out.append((f"{prefix}{name}", ann))
    return out


SPECIAL = {  # a valid changed value where the generic rule would not give one
    "data.val_fraction": 0.3,
    "data.chosen_label": 3,
    "cluster.ray_object_store_mb": 256,
    "data.max_prompt_length": 512,
    "cluster.shared_dir": "/elsewhere/jobs",
    "storage.root": "/elsewhere/artifacts",
    "cluster.extra_sbatch": ["--exclusive"],
    "cluster.env": {"SOME_FLAG": "1"},
    "cluster.secrets": {"HF_TOKEN": "env:HF_TOKEN_FOR_JOBS"},
    "cluster.setup": ["module load cuda"],
    "grpo.logger": ["console"],
    "grpo.extra_overrides": ["trainer.balance_batch=false"],
    "grpo.train_batch_size": 8,
    "grpo.ppo_mini_batch_size": 8,
    "grpo.rollout_n": 8,
    "grpo.ulysses_sequence_parallel_size": 2,
    "grpo.loss_mode": "gspo",
    "grpo.loss_agg_mode": "seq-mean-token-mean",
    "grpo.resume_mode": "disable",
    "sft.deepspeed": "/opt/ds.json",
    "sft.template": "qwen",
    "cluster.gpus_per_node": 4,
    "cluster.nodes": 2,
    "tracking.tracking_uri": "http://mlflow.example:5000",
}


def changed(key: str, ann: Any, current: Any) -> Any:
    if key in SPECIAL:
        return SPECIAL[key]
    args = [a for a in typing.get_args(ann) if a is not type(None)]
    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        ann, origin, args = args[0], typing.get_origin(args[0]), list(typing.get_args(args[0]))
    if origin is Literal:
        return next(a for a in args if a != current)
    if ann is bool:
        return not current
    if ann is int:
        return 3 if current in (None, -1) else current + 1
    if ann is float:
        return 0.05 if not current else current / 2
    if ann is str:
        return "changed" if current is None else f"{current}-changed"
    raise AssertionError(f"{key}: add a changed value for {ann} to SPECIAL")


def setups(key: str) -> list[tuple[str, list[str]]]:
    """(recipe, overrides) under which `key` must take effect: its own reader, or both engines."""
    owner = next(
        (r for r, keys in ONLY_READ_BY.items() if any(key.startswith(k) for k in keys)), None
    )
    verl = ["cluster.backend=slurm", "engine=verl"]
    trl_ = ["engine=trl"]
    if owner == "grrm":
        recipes = ["grrm-full"]
    elif owner == "judge":
        recipes = ["grpo-pointwise", "grpo-pairwise"]
    elif key in ("data.balance_positions",):
        recipes = ["grpo-pairwise"]
    else:
        recipes = ["grpo-pointwise", "grpo-pairwise", "grrm-full"]
    runs = [verl] if owner in ("verl", "slurm") else [trl_] if owner == "trl" else [trl_, verl]
    return [(r, o) for o in runs for r in recipes]


ALL = [k for k in leaves(RunConfig) if k[0] not in SWITCHES]


@pytest.mark.parametrize(("key", "ann"), ALL, ids=[k for k, _ in ALL])
def test_every_key_reaches_what_runs(key: str, ann: Any) -> None:
    missed = []
    for overrides in {tuple(o) for _, o in setups(key)}:
        took_effect = False
        for recipe, o in setups(key):
            if tuple(o) != overrides:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", IgnoredKeyWarning)
                base = load_config(recipe, overrides=o)
                current = base
                for part in key.split("."):
                    current = getattr(current, part)
                value = changed(key, ann, current)
                try:
                    other = load_config(recipe, overrides=[*o, f"{key}={_yaml(value)}"])
                except ConfigError:
                    continue
            if consumers(other) != consumers(base):
                took_effect = True
                break
        if not took_effect:
            missed.append(" ".join(overrides))
    assert not missed, f"{key} changes nothing that runs under: {missed}"


def _yaml(value: Any) -> str:
    import json

    return json.dumps(value)


def test_switches_and_declarations_name_real_keys() -> None:
    keys = {k for k, _ in leaves(RunConfig)}
    declared = {k for owned in ONLY_READ_BY.values() for k in owned}
    assert set(SWITCHES) <= keys
    assert all(any(k == d or k.startswith(f"{d}.") for k in keys) for d in declared)


@pytest.mark.parametrize(
    ("override", "engine", "reader"),
    [
        ("grpo.entropy_coeff=0.01", "engine=trl", "verl"),
        ("cluster.partition=gpu", "engine=trl", "slurm"),
        ("data.val_fraction=0.2", "engine=trl", "judge"),
        ("data.grrm.subgroup_augment=2", "engine=trl", "grrm"),
        ("evaluation.batch_size=4", "cluster.backend=slurm", "trl"),
    ],
)
def test_a_key_for_another_engine_warns_by_name(override: str, engine: str, reader: str) -> None:
    key = override.split("=")[0]
    recipe = "grrm-full" if reader == "judge" else "grpo-pointwise"
    with pytest.warns(IgnoredKeyWarning, match=rf"{key} is read only by the {reader}"):
        load_config(recipe, overrides=[engine, override])
    reported: list[str] = []
    load_config(recipe, overrides=[engine, override], report=reported.append)
    assert len(reported) == 1 and key in reported[0]


def test_a_key_for_the_running_engine_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", IgnoredKeyWarning)
        load_config(
            "grpo-pointwise", overrides=["cluster.backend=slurm", "grpo.entropy_coeff=0.01"]
        )
        load_config("grpo-pointwise", profile="tiny")  # the shipped presets set both on purpose


def test_a_users_recipe_file_is_checked_too(tmp_path: Path) -> None:
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("base: grpo-pointwise\nengine: trl\ngrpo:\n  strategy: fsdp2\n")
    with pytest.warns(IgnoredKeyWarning, match="grpo.strategy"):
        load_config(recipe)


def test_engine_choice() -> None:
    assert "trl" in consumers(load_config("grpo-pointwise", overrides=["engine=trl"]))
    slurm = load_config("grpo-pointwise", overrides=["cluster.backend=slurm"])
    assert "verl" in consumers(slurm)


def test_adv_estimator() -> None:
    cfg = load_config("grpo-pointwise", overrides=["cluster.backend=slurm"])
    assert "algorithm.adv_estimator=grpo" in consumers(cfg)["verl"]


def test_evaluation_job_has_its_own_resources() -> None:
    cfg = load_config(
        "grrm-full",
        overrides=["cluster.backend=slurm", "cluster.nodes=2", "cluster.gpus_per_node=8"],
    )
    train = executor_parameters(cfg.cluster, name="train")
    job = executor_parameters(evaluation_job_config(cfg).cluster, name="eval")
    assert (train["nodes"], train["gpus_per_node"]) == (2, 8)
    assert (job["nodes"], job["gpus_per_node"]) == (1, 1)
    assert (
        job["slurm_partition"] == train["slurm_partition"] if "slurm_partition" in train else True
    )
    cpu = load_config(
        "grpo-pointwise", overrides=["cluster.backend=slurm", "cluster.gpus_per_node=0"]
    )
    assert "gpus_per_node" not in executor_parameters(evaluation_job_config(cpu).cluster, name="e")
