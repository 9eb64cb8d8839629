"""Every cached task has the parameters its stage's cache key reads; a rename fails loudly. The
job stages are retried as the config says."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from prefect import task

from judgeflow.config import load_config
from tasks.data import download, prepare
from tasks.evaluate import evaluate
from tasks.grrm import prepare_grrm
from tasks.policies import KEY_INPUTS, cached, cached_job
from tasks.sft import prepare_sft, sft
from tasks.train import train

REPO = Path(__file__).resolve().parents[2]


def test_every_cached_task_has_its_key_inputs() -> None:
    tasks = [download, prepare, prepare_grrm, prepare_sft, sft, train, evaluate]
    assert {t.name for t in tasks} == set(KEY_INPUTS)
    for t in tasks:
        assert cached(t).cache_policy.stage == t.name


def test_a_renamed_key_parameter_fails_when_the_task_is_cached() -> None:
    @task(name="train")
    def renamed(cfg: object, prepared: object) -> None:  # was `data`
        return None

    with pytest.raises(TypeError, match="no parameter data"):
        cached(renamed)


def test_cluster_retries_and_retry_delay_s_reach_the_job_stages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the flows make of a job stage (train, sft), `cached_job`: Prefect retries it as the
    config says (a killed job retried for real: tests/cluster/test_judge_grpo_on_slurm.py), and
    every flow runs its job stages through it (in `flows/pipeline_run.py`)."""
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path))
    cfg = load_config("grpo-pointwise", overrides=["cluster.retries=5", "cluster.retry_delay_s=7"])
    for stage in (train, sft):
        retrying = cached_job(stage, cfg)
        assert (retrying.retries, retrying.retry_delay_seconds) == (5, 7)
        assert retrying.cache_policy.stage == stage.name
    # Both flows run their job stages through PipelineRun (run.sft, run.train), never directly.
    wrapped = _wrappers_of_job_stages(REPO / "flows" / "pipeline_run.py")
    assert wrapped == {"train": {"cached_job"}, "sft": {"cached_job"}}
    for flow_file in ("flows/judge_grpo.py", "flows/grrm.py"):
        assert _wrappers_of_job_stages(REPO / flow_file) == {}, flow_file


def _wrappers_of_job_stages(path: Path) -> dict[str, set[str]]:
    """For each job stage task (`train`, `sft`) a flow file passes to a call: the functions it
    is passed to (`cached_job(train, cfg)` -> {"train": {"cached_job"}})."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in ("train", "sft"):
                    found.setdefault(arg.id, set()).add(node.func.id)
    return found


def test_what_pays_a_policy_is_part_of_its_training_and_evaluation_keys() -> None:
    """A policy paid by other reward rules, or by another judge, is another model, measured
    anew: neither the training nor an evaluation is reused across them."""
    from judgeflow.caching import evaluate_key, train_key
    from judgeflow.config import load_config

    report = {"splits": {"train": {"sha256": "a"}, "val": {"sha256": "b"}}}
    judged = ["reward.judge=/runs/1/final", "reward.judge_mode=pointwise",
              "reward.judge_max_new_tokens=8"]  # fmt: skip

    def keys(recipe: str, *overrides: str) -> tuple[str, str]:
        cfg = load_config(recipe, overrides=list(overrides))
        return train_key(cfg, report), evaluate_key(cfg, "/models/policy", report)

    base = keys("rlvr")
    for other in (
        keys("rlvr", "rlvr.verification_reward=1"),
        keys("rlvr", "rlvr.r1_style_format=gated"),
        keys("rlvr-judged", *judged),
        keys("rlvr-judged", *judged[1:], "reward.judge=/runs/2/final"),
    ):
        assert other[0] != base[0] and other[1] != base[1]
    assert keys("rlvr-judged", *judged) != keys(
        "rlvr-judged", *judged[1:], "reward.judge=/runs/2/final"
    )
    assert keys("rlvr") == base  # and the same settings, the same keys
