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

import ast
import re
import types
import typing
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from judgeflow.caching import prepare_identity
from judgeflow.cluster import ray_jobs
from judgeflow.cluster.submit import executor_options, executor_parameters
from judgeflow.config import ConfigError, IgnoredKeyWarning, RunConfig, load_config
from judgeflow.config.keys import ONLY_READ_BY
from judgeflow.config.secrets import resolve_secrets
from judgeflow.engines import llamafactory, trl
from judgeflow.engines.verl import verl_overrides
from judgeflow.engines.verl_eval import evaluation_gpus, validation_overrides
from judgeflow.evaluation import params_from as evaluation_params
from judgeflow.rewards import reward_module_path
from judgeflow.stages import (
    evaluation_job_config,
    grrm_rl_train_preparation,
    job_spec,
    judging_batch,
    store_for,
)
from judgeflow.stages.evaluate import overlap_params
from judgeflow.stages.register import gate_params
from judgeflow.stages.served_judge import judge_model_config, judge_server_command
from judgeflow.storage import Manifest, ManifestFile
from judgeflow.tracking import resolve_tracking_uri

REPO = Path(__file__).resolve().parents[2]
HERE = "tests/config/test_every_key_takes_effect.py"
_RETRIES = "tests/flows/test_retries.py::test_transient_download_failure_is_retried"
_CACHE = "tests/flows/test_retraining_cache.py::test_unchanged_data_reuses_every_stage_and_changes_rerun_only_what_depends_on_them"  # fmt: skip

# Keys that choose *what* runs rather than tune it: what each does, and the tests that show it
# (`path::test`: the test changes the key and sees what runs change). A citation must name a
# test that exists and uses the key (test_every_switch_cites_tests_that_use_it).
SWITCHES: dict[str, tuple[str, list[str]]] = {
    "recipe": (
        "names verl's experiment and the registered model",
        [f"{HERE}::test_recipe_names_the_run_and_the_registered_model"],
    ),
    "mode": (
        "picks prompts and reward",
        [f"{HERE}::test_mode_picks_the_prompts_and_the_reward"],
    ),
    "engine": ("picks the engine itself", [f"{HERE}::test_engine_choice"]),
    "sft.enabled": ("adds the SFT stages to judge-grpo (off: none run)", [_RETRIES, _CACHE]),
    "sft.source": (
        "the SFT stage's data",
        ["tests/data/test_sources.py::test_sft_source_is_what_the_sft_stage_prepares"],
    ),
    "evaluation.enabled": ("adds the evaluate stages (off: none run)", [_RETRIES, _CACHE]),
    "data.source": (
        "what download fetches",
        ["tests/data/test_sources.py::test_data_source_is_what_download_fetches", _RETRIES],
    ),
    "data.revision": (
        "what download fetches (pinned, kept apart)",
        ["tests/data/test_sources.py::test_data_revision_is_recorded_and_kept_apart"],
    ),
    "data.mixer": (
        "what download fetches and preparation takes, source by source",
        [
            "tests/data/test_mixer.py::test_a_mixture_trains_on_each_sources_amount_counted_by_source"
        ],
    ),
    "data.eval_mixer": (
        "a second download and preparation: the validation rows",
        ["tests/data/test_mixer.py::test_an_eval_mixer_is_the_validation_rows"],
    ),
    "data.val_source": (
        "a second download and preparation",
        [
            "tests/data/test_val_source.py::test_judge_trains_on_all_of_source_and_validates_on_val_source"
        ],
    ),
    "data.shards": (
        "fans GRRM preparation out over Ray",
        [
            "tests/flows/test_sharded_prepare.py::test_grrm_stage_takes_the_rl_train_split_from_the_sharded_flow"
        ],
    ),
    "data.ray_address": (
        "where sharded preparation runs",
        ["tests/flows/test_sharded_prepare.py::test_data_ray_address_is_where_the_shards_run"],
    ),
    "cluster.retries": (
        "task retries of a killed stage",
        [
            "tests/cluster/test_judge_grpo_on_slurm.py::test_stages_run_as_slurm_jobs_and_a_train_job_killed_twice_resumes_from_its_checkpoints",
            "tests/flows/test_cache_keys.py::test_cluster_retries_and_retry_delay_s_reach_the_job_stages",
        ],
    ),
    "cluster.retry_delay_s": (
        "delay between those retries",
        [
            "tests/flows/test_cache_keys.py::test_cluster_retries_and_retry_delay_s_reach_the_job_stages"
        ],
    ),
    "grpo.adv_estimator": (
        "one allowed value (grpo), passed to verl",
        [f"{HERE}::test_adv_estimator"],
    ),
    "storage.credentials_block": (
        "S3 keys from a Prefect block",
        [
            "tests/flows/test_credentials.py::test_credentials_from_a_block_reach_s3_and_nothing_else"
        ],
    ),
    "cluster.poll_s": (
        "how often a job is polled (tasks/submission.py → cluster/monitor.py)",
        ["tests/cluster/test_monitor.py::test_cluster_poll_s_is_how_often_a_job_is_looked_at"],
    ),
    "register.enabled": ("adds the register stages (off: none run)", [_RETRIES]),
    "reward.judge_recipe": (
        "the rlvr-judged flow trains the named judge first with this recipe when it has no "
        "version at its alias",
        [
            "tests/registry/test_judge_first.py::test_the_judge_is_trained_first_only_while_it_has_no_champion",
            "tests/registry/test_judge_first.py::test_without_a_judge_recipe_nothing_is_trained_and_pinning_says_what_to_run",
        ],
    ),
    "reward.judge_profile": (
        "the profile that judge recipe runs with",
        [
            "tests/registry/test_judge_first.py::test_a_judge_recipe_that_registers_another_model_is_refused"
        ],
    ),
    "reward.judge_url": (
        "a served judge pays instead of one loaded in the reward's process",
        [
            "tests/engines/test_verl_validation.py::test_verls_batch_manager_pays_through_a_served_judge"
        ],
    ),
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
        "spec": asdict(job_spec(cfg, "train", "run", {}, dry_run=True)),
        "evaluation_job": executor_parameters(evaluation_job_config(cfg).cluster, name="eval"),
        "sft": asdict(llamafactory.params_from(cfg, "/out/sft")),
        "store": store_for(cfg).root,
        "tracking": (cfg.tracking.experiment, resolve_tracking_uri(cfg.tracking.tracking_uri)),
        "model": cfg.model.path,
        "gate": gate_params(cfg),  # the registry's champion gate
        "overlap": overlap_params(cfg),  # the contamination check before any evaluation
        "judging": judging_batch(cfg),  # rows `judgeflow judge` judges (and records) at a time
        "judge_server": judge_server_command(cfg),  # a judge-paid policy's judge, on Slurm
        "judge_served": judge_model_config(cfg, "instance") if judge_server_command(cfg) else None,
        # what a job's input file gives it (every env: variable set, every block loaded)
        "job_secrets": resolve_secrets(cfg.cluster, environ=_AnyVariable()),
    }
    if cfg.cluster.backend == "ray":  # the job server, its token, and what a Ray Job is given
        spec = job_spec(cfg, "train", "run", {}, dry_run=True)
        seen["ray"] = (
            ray_jobs.connection(cfg.cluster),
            ray_jobs.submission(spec, cfg.cluster, "id"),
        )
    if cfg.mode == "grrm":
        seen["prepare"] = asdict(grrm_rl_train_preparation(cfg, MANIFEST))
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
    "rlvr.remap_verifier": {"numbers": "gsm8k"},
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
    "grpo.trl_extra": {"weight_decay": 0.01},
    "grpo.stop_strings": ["</answer>"],
    "data.chat_template": "zephyr",
    "sft.extra": {"weight_decay": 0.01},
    "tracking.wandb.project": "judgeflow",  # verl's W&B project is the MLflow experiment
    "tracking.wandb.tags": ["nightly"],
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
    "reward.judge_datasets": ["judge"],
    "reward.judge_panel": ["/models/second-judge"],
    "grpo.lora.target": ["q_proj", "v_proj"],
    "cluster.ray_runtime_env": {"env_vars": {"HF_HOME": "/data/hf"}},
}
#: A judge-paid policy whose judge needs no registry (a store URI), for the `reward.*` keys.
PAID_BY_A_JUDGE = ["reward.judge=/models/judge", "reward.judge_mode=pointwise",
                   "reward.judge_max_new_tokens=8"]  # fmt: skip
#: How a served judge is asked (its protocol, model, time limits): read where a judge is served,
#: so taking effect under a judge served at a URL (verl's beside it reads judge_timeout_s too).
SERVED_JUDGE_KEYS = ("reward.judge_api", "reward.judge_model", "reward.judge_timeout_s",
                     "reward.judge_retry_s")  # fmt: skip
PAID_BY_A_SERVED_JUDGE = ["reward.judge=null", "reward.judge_url=http://judge:5001/invocations",
                          "reward.judge_mode=pointwise", "reward.judge_max_new_tokens=8"]  # fmt: skip


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
    owners = [r for r, keys in ONLY_READ_BY.items() if any(key.startswith(k) for k in keys)]
    owner = owners[0] if owners else None
    verl = ["cluster.backend=slurm", "engine=verl"]
    trl_ = ["engine=trl"]
    if owner == "grrm":
        recipes = ["grrm-full"]
    elif owner in ("judge", "rlvr"):
        recipes = [
            *(["grpo-pointwise", "grpo-pairwise"] if "judge" in owners else []),
            *(["rlvr"] if "rlvr" in owners else []),
        ]
    elif key in ("data.balance_positions",):
        recipes = ["grpo-pairwise"]
    else:
        recipes = ["grpo-pointwise", "grpo-pairwise", "grrm-full"]
    runs = [verl] if owner in ("verl", "slurm") else [trl_] if owner == "trl" else [trl_, verl]
    if owner == "ray":  # a Ray cluster the user runs
        runs = [["cluster.backend=ray", "engine=trl"]]
    if key.startswith("tracking.wandb."):  # verl's W&B project is its MLflow experiment
        on = [] if key == "tracking.wandb.project" else ["tracking.wandb.project=judgeflow"]
        runs = [[*o, "tracking.experiment=judgeflow", *on] for o in runs]
    if key.startswith("sft.lora."):  # the adapter of finetuning_type lora
        runs = [[*o, "sft.finetuning_type=lora"] for o in runs]
    if key in ("grpo.lora.alpha", "grpo.lora.target"):  # read with LoRA on
        runs = [[*o, "grpo.lora.rank=8"] for o in runs]
    if key == "data.mixer_seed":  # read where a mixer takes part of a source
        runs = [[*o, "data.source=null", 'data.mixer=[{"source": "a.jsonl", "amount": 0.5}]']
                for o in runs]  # fmt: skip
    if key.startswith("reward."):  # read where a judge pays
        paid = PAID_BY_A_SERVED_JUDGE if key in SERVED_JUDGE_KEYS else PAID_BY_A_JUDGE
        recipes, runs = ["rlvr-judged"], [[*o, *paid] for o in runs]
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
        ("data.shards=4", "engine=trl", "grrm"),
        ("rlvr.verification_reward=1", "engine=trl", "rlvr"),
        ("data.ray_address=auto", "engine=trl", "grrm"),
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


@pytest.mark.parametrize(
    ("overrides", "warned"),
    [
        (["sft.lora.rank=16"], "sft.lora.rank applies only with sft.finetuning_type=lora"),
        (["grpo.lora.alpha=32"], "grpo.lora.alpha applies only with grpo.lora.rank > 0"),
        (["grpo.lora.target=[q_proj]"], "grpo.lora.target applies only with grpo.lora.rank"),
    ],
)
def test_a_lora_setting_without_lora_warns(overrides: list[str], warned: str) -> None:
    with pytest.warns(IgnoredKeyWarning, match=re.escape(warned)):
        load_config("grpo-pointwise", overrides=overrides)
    with warnings.catch_warnings():  # with LoRA on, the same settings are read
        warnings.simplefilter("error", IgnoredKeyWarning)
        load_config("grpo-pointwise", overrides=[
            "sft.finetuning_type=lora", "grpo.lora.rank=8", *overrides])  # fmt: skip


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
    assert cfg.grpo.adv_estimator == "grpo"
    assert "algorithm.adv_estimator=grpo" in consumers(cfg)["verl"]
    with pytest.raises(ConfigError, match="grpo.adv_estimator"):  # the only value there is
        load_config("grpo-pointwise", overrides=["grpo.adv_estimator=gae"])


def test_recipe_names_the_run_and_the_registered_model() -> None:
    def cfg(*overrides: str) -> RunConfig:
        unnamed = ["cluster.backend=slurm", "register.model_name=null"]  # the recipe names it
        return load_config("grpo-pointwise", overrides=[*unnamed, *overrides])

    base, mine = cfg(), cfg("recipe=my-judge")
    assert (base.registered_model_name, mine.registered_model_name) == (
        "grpo-pointwise",
        "my-judge",
    )
    assert "trainer.experiment_name=my-judge" in consumers(mine)["verl"]
    assert "trainer.experiment_name=grpo-pointwise" in consumers(base)["verl"]


@pytest.mark.parametrize("engine", [["engine=trl"], ["cluster.backend=slurm", "engine=verl"]])
def test_mode_picks_the_prompts_and_the_reward(engine: list[str]) -> None:
    pointwise = consumers(load_config("grpo-pointwise", overrides=engine))
    pairwise = consumers(load_config("grpo-pointwise", overrides=[*engine, "mode=pairwise"]))
    assert (pointwise["prepare"]["mode"], pairwise["prepare"]["mode"]) == ("pointwise", "pairwise")
    if "trl" in pointwise:
        assert (pointwise["trl"]["reward"], pairwise["trl"]["reward"]) == ("pointwise", "pairwise")
    else:
        reward = "custom_reward_function.path="
        assert [o for o in pairwise["verl"] if o.startswith(reward)] == [
            f"{reward}{reward_module_path('pairwise')}"
        ]
        assert f"{reward}{reward_module_path('pointwise')}" in pointwise["verl"]


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _cited_source(citation: str) -> str:
    """The source of a cited test (`path`, `path::test` or `path::Class::test`): its code and
    decorators, and the module-level helpers and constants it names (an overrides list, say)."""
    path, _, name = citation.partition("::")
    file = REPO / path
    assert file.is_file(), f"{citation}: no such file"
    text = file.read_text(encoding="utf-8")
    if not name:
        return text
    module = ast.parse(text)
    node: ast.AST = module
    for part in name.split("::"):
        found = [n for n in getattr(node, "body", []) if isinstance(n, _DEFS) and n.name == part]
        assert found, f"{citation}: no {part} in {path}"
        node = found[0]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef), f"{citation}: not a test"
    named = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    helpers = [top for top in module.body if named & _defined_names(top)]
    parts = [node, *node.decorator_list, *helpers]
    return "\n".join(ast.get_source_segment(text, part) or "" for part in parts)


def _defined_names(statement: ast.stmt) -> set[str]:
    """The module-level names a statement defines (a function, a class, an assignment)."""
    if isinstance(statement, _DEFS):
        return {statement.name}
    targets = statement.targets if isinstance(statement, ast.Assign) else []
    if isinstance(statement, ast.AnnAssign):
        targets = [statement.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


@pytest.mark.parametrize("key", SWITCHES)
def test_every_switch_cites_tests_that_use_it(key: str) -> None:
    """Each citation names a test that exists and uses the key (in its own code or a
    module-level helper or constant it names): no citation of a file that is gone."""
    _, citations = SWITCHES[key]
    assert citations, f"{key}: cites no test"
    uses = re.compile(rf"(?<!\w){re.escape(key)}(?!\w)")
    for citation in citations:
        assert uses.search(_cited_source(citation)), f"{citation} does not use {key}"


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
