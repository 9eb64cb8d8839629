"""The model registry end to end: real Prefect server, a real `mlflow server` of this test alone,
real training of the tiny model, and `judgeflow evaluate` as a user runs it.

Two successive tiny runs register two versions with their lineage; the good one holds
`champion`, a deliberately worse one (one GRPO step) is kept as challenger and says why;
`judgeflow evaluate models:/judge-grpo-pointwise@champion` works on held-out rows, refuses the
rows the model trained on, and scores them with `--allow-overlap`, reporting the overlap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NAME = "judge-grpo-pointwise"


def _judgeflow(*args: str, home: Path, tracking: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JUDGEFLOW_HOME": str(home), "MLFLOW_TRACKING_URI": tracking}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "judgeflow"), *args],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    sys.stdout.write(proc.stdout[-4000:] + proc.stderr[-4000:])  # shown when the test fails
    return proc


def test_two_runs_a_champion_a_challenger_and_evaluating_the_champion(
    prefect_server: str, own_mlflow_server: str, judgeflow_home: Path
) -> None:
    from flows.judge_grpo import judge_grpo

    tracking = own_mlflow_server
    client = MlflowClient(tracking)
    base = [f"tracking.tracking_uri={tracking}"]

    # 1. The demo's run: SFT warm start, 40 GRPO steps. The first version becomes champion.
    good = judge_grpo(mode="pointwise", profile="tiny", overrides=base)
    decision = good["registry"]["final"]
    assert decision["promoted"] and decision["version"] == "1", decision
    assert decision["reason"].startswith(f"first version of {NAME}")
    sft = good["registry"]["sft"]
    assert sft["name"] == f"{NAME}-sft" and sft["promoted"]

    version = client.get_model_version(NAME, "1")
    run = client.get_run(good["mlflow_run_id"])
    tags = version.tags
    # Lineage: data, config, code, the parent SFT version, the run; weights where training left them.
    assert tags["judgeflow.data.source"] == "sample://tinyjudge_pointwise.jsonl"
    assert tags["judgeflow.data.manifest_hash"] == run.data.tags["judgeflow.data.manifest_hash"]
    assert tags["judgeflow.config_hash"] == run.data.tags["judgeflow.config_hash"]
    assert tags["judgeflow.code_version"] and tags["judgeflow.git_commit"]
    assert tags["judgeflow.parent_version"] == f"{NAME}-sft/1"
    assert tags["judgeflow.start_model"] == run.data.tags["judgeflow.sft.model_dir"]
    assert tags["judgeflow.mlflow_run_id"] == version.run_id == good["mlflow_run_id"]
    assert tags["judgeflow.model_uri"] == good["checkpoint"]
    assert (
        tags["judgeflow.promoted"] == "true" and tags["judgeflow.primary_metric"] == "exact_match"
    )
    assert "| exact_match |" in version.description  # the evaluation table
    assert client.get_model_version_by_alias(NAME, "champion").version == "1"
    # The run links to its version, and its evaluation left the pictures.
    assert run.data.tags[f"judgeflow.registered.{NAME}"] == "1"
    assert run.data.tags[f"judgeflow.registered.{NAME}.url"].endswith(f"/models/{NAME}/versions/1")
    plots = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert {"plots/after_confusion.png", "plots/after_subsets.png"} <= plots, plots
    details = {a.path for a in client.list_artifacts(run.info.run_id, "eval")}
    assert "eval/after_details.json" in details
    champion_exact = run.data.metrics["after/exact_match"]
    assert champion_exact > run.data.metrics["sft/exact_match"]

    # 2. A deliberately worse run: one GRPO step from the same SFT model (everything before
    # training comes from the cache). It is registered, kept as challenger, and says why.
    weak = judge_grpo(mode="pointwise", profile="tiny", overrides=[*base, "grpo.max_steps=1"])
    assert weak["stages"]["sft"] == "cached" and weak["stages"]["register[sft]"] == "cached"
    decision = weak["registry"]["final"]
    assert not decision["promoted"] and decision["version"] == "2", decision
    assert decision["champion_version"] == "1"
    assert decision["champion_value"] == pytest.approx(champion_exact)
    assert "kept as challenger: exact_match" in decision["reason"]
    assert f"champion v1's {champion_exact:.4f}" in decision["reason"]
    v2 = client.get_model_version(NAME, "2")
    assert v2.tags["challenger"] == "true" and v2.tags["judgeflow.decision"] == decision["reason"]
    assert client.get_model_version_by_alias(NAME, "champion").version == "1"
    assert client.get_model_version_by_alias(NAME, "challenger").version == "2"
    weak_run = client.get_run(weak["mlflow_run_id"])
    assert weak_run.data.tags[f"judgeflow.registered.{NAME}.decision"] == decision["reason"]

    # The Prefect run summary says it too, with the numbers.
    import asyncio

    from prefect import get_client

    async def summary_artifact() -> list[dict[str, object]]:
        async with get_client() as prefect:
            arts = await prefect.read_artifacts()
            flow_run = weak_run.data.tags["prefect.flow_run_id"]
            ours = [a for a in arts if a.key == "run-summary" and str(a.flow_run_id) == flow_run]
            return json.loads(str(ours[0].data))

    rows = {row["stage"]: row for row in asyncio.run(summary_artifact())}
    assert "kept as challenger" in str(rows["register[final]"]["note"])

    # 3. `judgeflow evaluate` on the champion, as a user runs it.
    val_file = next(judgeflow_home.glob("artifacts/prepared/*/pointwise.val.parquet"))
    held_out = _judgeflow(
        "evaluate", f"models:/{NAME}@champion", "--data", str(val_file),
        "--output", str(judgeflow_home / "eval-val"), home=judgeflow_home, tracking=tracking,
    )  # fmt: skip
    assert held_out.returncode == 0
    assert f"{NAME}/1" in held_out.stdout and "exact_match" in held_out.stdout
    assert "none with the model's training data" in held_out.stdout
    written = {p.name for p in (judgeflow_home / "eval-val").iterdir()}
    assert {"eval_confusion.png", "eval_details.json", "predictions.json"} <= written, written
    evals = client.search_runs([client.get_experiment_by_name("judgeflow-evaluate").experiment_id])
    assert evals[0].data.metrics["eval/exact_match"] == pytest.approx(champion_exact)
    # The champion's numbers on this set are kept on the version for later gates.
    kept = client.get_model_version(NAME, "1").tags
    assert f"judgeflow.eval.{evals[0].data.tags['judgeflow.eval_set']}" in kept

    # The whole source holds the rows it trained on: refused, then scored with --allow-overlap.
    refused = _judgeflow(
        "evaluate", f"models:/{NAME}@champion", "--data", "sample://tinyjudge_pointwise.jsonl",
        home=judgeflow_home, tracking=tracking,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "have a prompt that" in refused.stderr and "--allow-overlap" in refused.stderr
    allowed = _judgeflow(
        "evaluate", f"models:/{NAME}@champion", "--data", "sample://tinyjudge_pointwise.jsonl",
        "--allow-overlap", home=judgeflow_home, tracking=tracking,
    )  # fmt: skip
    assert allowed.returncode == 0
    assert "rows the model trained on were scored" in allowed.stdout

    # `judgeflow models` lists both versions with the alias and the decision.
    listing = _judgeflow("models", "grpo-pointwise", home=judgeflow_home, tracking=tracking)
    assert listing.returncode == 0
    assert "champion" in listing.stdout and "challenger" in listing.stdout
    assert f"{NAME}-sft" in listing.stdout
