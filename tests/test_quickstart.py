"""The README's main command, run exactly as a user runs it: `make demo` in the checkout, as a
plain subprocess with the default environment (no fixture, no test server, no JUDGEFLOW_HOME).

It must finish, print exactly the tables the README quotes (benchmarks/results/demo-pointwise.txt,
written by `benchmarks/demo.py tables`), and meet the demo's targets: after training the judge
emits a verdict in ≥ 90% of cases, GRPO beats the SFT model it started from (reward and exact
match), and GRPO's training reward rose (last third of the steps above the first third).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from servers import invocations, mlflow_models_serve

pytestmark = [pytest.mark.slow(seconds=260), pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[1]
QUOTED = REPO / "benchmarks" / "results" / "demo-pointwise.txt"
VAL = REPO / "src" / "judgeflow" / "samples" / "tinyjudge_pointwise_val.jsonl"
CHAMPION = "models:/judge-grpo-pointwise@champion"
#: GRPO's reward gain over its SFT start that the demo must show (benchmarks/demo.py's bar).
MIN_GAIN = 0.15


def printed_tables(output: str) -> str:
    """The run's closing tables: from the comparison's title to the registry's first line."""
    start = output.index("Judge on the validation split")
    end = output.index("registered", start)
    return output[start:end]


def _user_environment() -> dict[str, str]:
    """This machine's environment without anything a test harness may have put there."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PREFECT_", "MLFLOW_", "JUDGEFLOW_", "PYTEST_"))
    }


def test_make_demo_runs_as_the_readme_says_and_the_judge_learns(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["make", "demo"],
        cwd=REPO,
        env=_user_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=840,
    )
    output = proc.stdout + proc.stderr
    sys.stdout.write(output[-6000:])  # shown by pytest when the test fails
    assert proc.returncode == 0, output[-3000:]
    assert "Timed out" not in output
    assert "before → after" in output and "reward_mean" in output

    run_id = re.search(r"MLflow run id : (\w+)", output)
    assert run_id, "the demo prints its MLflow run id"
    tracking = f"sqlite:///{REPO / '.judgeflow' / 'mlflow.db'}"
    client = MlflowClient(tracking)
    run = client.get_run(run_id.group(1))
    m = run.data.metrics
    assert m["after/format_failure_rate"] <= 0.10
    assert m["after/reward_mean"] >= m["sft/reward_mean"] + MIN_GAIN, "GRPO must beat SFT"
    assert m["after/exact_match"] > m["sft/exact_match"]
    # The README quotes these tables: today's run prints them, figure for figure.
    quoted = printed_tables(QUOTED.read_text(encoding="utf-8"))
    assert printed_tables(output) == quoted, (
        "make demo printed other tables than the README quotes; if the change is intended, "
        "run `.venv/bin/python benchmarks/demo.py tables` and `benchmarks/readme.py`"
    )
    # A repeated demo reuses the trained model: its curves are in the run that trained it.
    trained_in = run.data.tags["judgeflow.train.mlflow_run_id"]
    rewards = [p.value for p in client.get_metric_history(trained_in, "train/reward_mean")]
    third = len(rewards) // 3
    assert third > 0
    assert sum(rewards[-third:]) / third > sum(rewards[:third]) / third, rewards
    # GRPO started from the SFT model, and the curves and the comparison are in the run.
    tags = run.data.tags
    assert tags["judgeflow.train.start_model"] == tags["judgeflow.sft.model_dir"]
    assert (Path(tags["judgeflow.sft.model_dir"]) / "config.json").is_file()
    plots = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert {"plots/training_curves.png", "plots/before_after.png"} <= plots
    # The judge and its SFT model are registered; the registry has a champion and says why.
    assert re.search(r"registered +: judge-grpo-pointwise v\d+ ", output)
    assert re.search(r"registered +: judge-grpo-pointwise-sft v\d+ ", output)
    champion = client.get_model_version_by_alias("judge-grpo-pointwise", "champion")
    assert champion.tags["judgeflow.primary_metric"] == "exact_match"
    _use_the_champion(tracking, tmp_path, m["after/exact_match"], m["after/format_failure_rate"])
    _a_policy_paid_by_the_champion(tracking)
    # Prefect's and MLflow's state stayed in the project's .judgeflow, not in ~/.prefect.
    assert "memo_store.toml" not in output
    assert (REPO / ".judgeflow" / "prefect").is_dir()


def _served_judge_pays(url: str, rows: list[list[str]]) -> list[float | None]:
    """What the served champion pays for each (question, answer) as a policy's judge
    (`reward.judge_url`): judgeflow's client, two concurrent requests of four rows."""
    from judgeflow.inference.judge_reward import JudgedItem, ServedJudge, judge_scores

    judge = ServedJudge(url, "pointwise", max_new_tokens=24, batch_size=4, concurrency=2)
    items = [
        JudgedItem(query=q, answer=a, reference="", group=str(i)) for i, (q, a) in enumerate(rows)
    ]
    scores = judge_scores(judge, items).scores
    assert judge.calls == 2
    return scores


def _a_policy_paid_by_the_champion(tracking: str) -> None:
    """The judge-paid policy demo after `make demo`, as the docs give it (shortened): the run
    names the judge version that paid it, and so does the registered policy and `judgeflow
    models`."""
    command = [str(REPO / ".venv" / "bin" / "judgeflow"), "run", "rlvr-judged", "--profile",
               "tiny-hackable", "--set", "grpo.max_steps=6", "--set", "sft.enabled=false",
               "--set", "evaluation.limit=12"]  # fmt: skip
    proc = subprocess.run(command, cwd=REPO, env=_user_environment(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    client = MlflowClient(tracking)
    champion = client.get_model_version_by_alias("judge-grpo-pointwise", "champion")
    paid_by = f"models:/judge-grpo-pointwise/{champion.version}"
    assert f"paid by       : {paid_by} (pointwise judge)" in output
    assert "judge overlap" not in output  # checked: the held-out questions are not the judge's
    run_id = re.search(r"MLflow run id : (\w+)", output).group(1)  # type: ignore[union-attr]
    run = client.get_run(run_id)
    assert run.data.tags["judgeflow.reward.judge"] == paid_by
    assert run.data.tags["judgeflow.reward.judge_run_id"] == champion.run_id
    assert run.data.tags["judgeflow.reward.judge_overlap"] == "checked"
    m = run.data.metrics
    assert 0.0 <= m["after/reference_f1"] <= 1.0 and 0.0 <= m["after/reward_mean"] <= 1.0
    assert m["after/judged_n"] == 12.0  # evaluation.limit
    policy = max(client.search_model_versions("name = 'rlvr-judged-policy'"),
                 key=lambda v: int(v.version))  # fmt: skip
    assert policy.tags["judgeflow.reward.judge"] == paid_by
    assert policy.tags["judgeflow.primary_metric"] == "reference_f1"
    # The hacking gate decided before the registry: six steps from the base model do not make
    # its answers better with confidence on twelve prompts, so the policy is suspected and kept
    # from champion, and the run, the version, the metrics and the summary say why.
    gate = run.data.tags["judgeflow.reward.hacking"]
    assert gate.startswith("suspected: ") and policy.tags["judgeflow.reward.hacking"] == gate
    assert m["hacking/suspected"] == 1.0 and m["hacking/prompts"] == 12.0
    assert "hacking gate  : suspected: " in output
    assert client.get_registered_model("rlvr-judged-policy").aliases.get("champion") is None
    assert policy.tags["judgeflow.decision"].startswith("kept as challenger: reward hacking")
    models = subprocess.run([str(REPO / ".venv" / "bin" / "judgeflow"), "models",
                             "judge-grpo-pointwise"], cwd=REPO, env=_user_environment(),
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert f"rlvr-judged-policy/{policy.version}" in models.stdout, models.stdout


def _use_the_champion(
    tracking: str, tmp_path: Path, exact_match: float, format_failure_rate: float
) -> None:
    """What README's "Using a trained judge" shows, on the demo's champion: `mlflow models
    serve` scores each posted row 0-4 (as well as the evaluation measured), and `judgeflow
    judge` writes a verdict for every row of a file."""
    rows = [json.loads(line) for line in VAL.read_text().splitlines()]
    frame = {
        "columns": ["query", "response"],
        "data": [[r["input"][0]["content"], r["output"][0]["answer"]["content"]] for r in rows],
    }
    labels = [r["output"][0]["answer"]["label"]["helpfulness"] for r in rows]
    service, url = mlflow_models_serve(CHAMPION, tracking, tmp_path / "serve.log")
    try:
        predictions = invocations(url, {"dataframe_split": frame})["predictions"]  # type: ignore[index]
        paid = _served_judge_pays(f"{url}/invocations", frame["data"][:8])
    finally:
        service.stop()
    # the served judge as a policy's reward: its score / 4, what it said when asked directly
    assert paid == [None if not p["valid"] else p["score"] / 4 for p in predictions[:8]], (
        paid,
        predictions[:8],
    )
    assert len(predictions) == len(rows)
    assert all(p["score"] in range(5) for p in predictions if p["valid"]), predictions
    valid = sum(bool(p["valid"]) for p in predictions)
    assert valid / len(rows) == pytest.approx(1 - format_failure_rate)
    agree = sum(p["score"] == label for p, label in zip(predictions, labels, strict=True))
    assert agree / len(rows) == pytest.approx(exact_match)

    out = tmp_path / "verdicts.jsonl"
    judged = subprocess.run(
        [str(REPO / ".venv" / "bin" / "judgeflow"), "judge", CHAMPION, "--data", str(VAL),
         "--output", str(out)],
        cwd=REPO, env={**_user_environment(), "MLFLOW_TRACKING_URI": tracking},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert judged.returncode == 0, judged.stdout + judged.stderr
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert [v["id"] for v in verdicts] == [str(i) for i in range(len(rows))]
    assert [v["score"] for v in verdicts] == [p["score"] for p in predictions]
