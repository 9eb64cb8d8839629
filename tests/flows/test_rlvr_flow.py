"""rlvr end to end on CPU: the tiny profile's LLaMA-Factory SFT, GRPO with TRL paid by the
verifiers (zero-variance groups skipped), the held-out evaluations and the champion gate, against
real Prefect and MLflow servers. Shortened (`grpo.max_steps`): that the tiny run learns is the
benchmark's to show across seeds (`benchmarks/demo.py seeds --modes rlvr`), not a test's.

The training rows come as open-instruct users bring them: a mixture (`data.mixer`) of two
sources, the tiny task's animal questions and its number questions, each file its own source,
and every prompt rendered with open-instruct's `tulu` chat template (`data.chat_template`) by
SFT, GRPO and the evaluations alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.slow

STEPS = 12


def test_rlvr_pipeline_trains_evaluates_and_registers_a_policy(
    prefect_server: str, mlflow_server: str, judgeflow_home: Path
) -> None:
    from flows.rlvr import rlvr
    from judgeflow.samples import sample_path

    rows = sample_path("rlvr/tinyrlvr.jsonl").read_text().splitlines()
    sources = []
    for verifier in ("string_matcher", "gsm8k"):
        path = judgeflow_home / f"{verifier}.jsonl"
        path.write_text("".join(f"{r}\n" for r in rows if json.loads(r)["dataset"] == verifier))
        sources.append({"source": str(path), "amount": 1.0 if verifier == "gsm8k" else 100})
    overrides = [
        f"tracking.tracking_uri={mlflow_server}",
        f"grpo.max_steps={STEPS}",
        "data.source=null",
        f"data.mixer={json.dumps(sources)}",
        "data.chat_template=tulu",
    ]
    summary = rlvr(recipe="rlvr", profile="tiny", overrides=overrides)

    assert list(summary["stages"]) == [
        "download", "download[val]", "prepare", "evaluate[before]", "download[sft]",
        "prepare[sft]", "sft", "evaluate[sft]", "train", "evaluate[after]", "register[sft]",
        "register[final]",
    ]  # fmt: skip
    client = MlflowClient(mlflow_server)
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    m = run.data.metrics
    # every source of the mixture counted: 100 of the animal rows, all of the number rows
    numbers = sum(json.loads(r)["dataset"] == "gsm8k" for r in rows)
    assert m["data/mixer_00_rows_taken"] == 100 and m["data/mixer_01_rows_taken"] == numbers
    assert m["data/rows_read"] == 100 + numbers
    # The held-out prompts (106), scored by the verifiers, overall and per verifier.
    for label in ("before", "sft", "after"):
        assert m[f"{label}/n"] == 106.0
        assert 0.0 <= m[f"{label}/verifiable_correct_rate"] <= 1.0
        for verifier in ("gsm8k", "string_matcher"):
            assert 0.0 <= m[f"{label}/subset/{verifier}/verifiable_correct_rate"] <= 1.0
    # The policy keeps the template it was asked with (TRL's processing class, saved with it).
    from transformers import AutoTokenizer

    from judgeflow.config.chat_templates import CHAT_TEMPLATES

    saved = AutoTokenizer.from_pretrained(summary["checkpoint"])
    assert saved.chat_template == CHAT_TEMPLATES["tulu"]
    # The random-init model writes no R1 format; SFT on the teacher teaches it.
    assert m["before/format_failure_rate"] == 1.0
    assert m["sft/format_failure_rate"] <= 0.1
    # What GRPO logged per step: the verifiers' rate, and what zero-variance skipping kept.
    steps = client.get_metric_history(run.info.run_id, "train/verifiable_correct_rate")
    assert [s.step for s in steps] == list(range(1, STEPS + 1))
    for verifier in ("gsm8k", "string_matcher"):  # per verifier, on the steps with its rows
        assert client.get_metric_history(
            run.info.run_id, f"train/verifiable_correct_rate/{verifier}"
        )
    ratios = client.get_metric_history(run.info.run_id, "train/real_batch_size_ratio")
    assert len(ratios) == STEPS and all(0.0 <= r.value <= 1.0 for r in ratios)
    # The champion gate decided on verifiable_correct_rate; a first version becomes champion.
    final = summary["registry"]["final"]
    assert final["promoted"] and final["metric"] == "verifiable_correct_rate"
    assert final["value"] == m["after/verifiable_correct_rate"]
    champion = client.get_model_version_by_alias("rlvr-policy", "champion")
    assert champion.version == str(final["version"])
    # The trained policy is the model GRPO saved, from the SFT model.
    assert Path(summary["checkpoint"], "model.safetensors").is_file()
    assert run.data.tags["judgeflow.train.start_model"] == run.data.tags["judgeflow.rl.start_model"]
