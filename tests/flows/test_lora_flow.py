"""LoRA end to end on CPU (issue 37): the tiny pointwise judge with an adapter in SFT and in GRPO,
through real Prefect and MLflow servers, real LLaMA-Factory and TRL; its champion judges a file
with `judgeflow judge`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from judgeflow.samples import sample_path

pytestmark = pytest.mark.slow
#: What benchmarks/lora.py sets on top of the tiny profile (its LORA_SETS, held equal below).
LORA = [
    "sft.finetuning_type=lora",
    "sft.lora.rank=8",
    "sft.learning_rate=5.0e-3",
    "grpo.lora.rank=8",
    "grpo.learning_rate=1.0e-3",
]
BIN = Path(sys.executable).parent


def test_the_benchmark_measures_the_setup_this_test_runs() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from lora import LORA_SETS
    finally:
        sys.path.pop(0)
    assert list(LORA_SETS) == LORA


def test_a_lora_judge_learns_is_registered_merged_and_its_champion_judges_rows(
    prefect_server: str, mlflow_server: str, judgeflow_home: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM

    from flows.judge_grpo import judge_grpo

    name = "judge-grpo-pointwise-lora-flowtest"
    summary = judge_grpo(
        mode="pointwise",
        profile="tiny",
        overrides=[f"tracking.tracking_uri={mlflow_server}", f"register.model_name={name}", *LORA],
    )

    client = MlflowClient(mlflow_server)
    run = client.get_run(summary["mlflow_run_id"])
    m = run.data.metrics
    # SFT trained an adapter and merged it: GRPO started from a whole model.
    sft_dir = Path(run.data.tags["judgeflow.sft.model_dir"])
    assert (sft_dir / "adapter" / "adapter_config.json").is_file()
    assert (sft_dir / "model.safetensors").is_file()
    assert run.data.tags["judgeflow.train.start_model"] == str(sft_dir)
    # GRPO trained only its adapter, and the checkpoint is that adapter merged.
    start = AutoModelForCausalLM.from_pretrained(judgeflow_home / "tiny-model")
    total = sum(p.numel() for p in start.parameters())
    assert 0 < m["train/summary/trainable_params"] < total / 5
    final = Path(summary["checkpoint"])
    assert (final / "model.safetensors").is_file() and not (final / "adapter_config.json").exists()
    # It learns: SFT taught the format, GRPO made the judge better than its SFT start.
    assert m["after/format_failure_rate"] <= 0.10
    assert m["after/exact_match"] > m["sft/exact_match"]
    assert m["after/reward_mean"] > m["sft/reward_mean"]
    registered = summary["registry"]["final"]
    assert registered["name"] == name and registered["promoted"]

    # The champion judges a file like any other model.
    val = sample_path("tinyjudge_pointwise_val.jsonl")
    out = tmp_path / "verdicts.jsonl"
    judged = subprocess.run(
        [str(BIN / "judgeflow"), "judge", f"models:/{name}@champion", "--data", str(val),
         "--output", str(out)],
        env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_server},
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert judged.returncode == 0, judged.stdout + judged.stderr
    rows = [json.loads(line) for line in Path(val).read_text().splitlines()]
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(verdicts) == len(rows)
    labels = [r["output"][0]["answer"]["label"]["helpfulness"] for r in rows]
    agree = sum(v.get("score") == label for v, label in zip(verdicts, labels, strict=True))
    assert agree / len(rows) == pytest.approx(m["after/exact_match"])  # what it was measured at
