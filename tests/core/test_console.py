"""What a person reads: the before → after rows, the run-summary table, the step lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from judgeflow.config import ConfigError
from judgeflow.console import comparison_rows, comparison_table, plain_text, summary_tables
from judgeflow.engines.llamafactory import sft_line
from judgeflow.engines.trl import step_line


def test_comparison_rows_hold_each_evaluation_and_the_change() -> None:
    metrics = {
        "before/reward_mean": 0.0, "sft/reward_mean": 0.4, "after/reward_mean": 0.9,
        "before/format_failure_rate": 1.0, "after/format_failure_rate": 0.0,
        "after/mae": 0.5, "before/n": 8.0,
    }  # fmt: skip
    rows = comparison_rows(metrics, ["before", "sft", "after"])
    assert [r["metric"] for r in rows] == ["reward_mean", "format_failure_rate", "mae"]
    assert rows[0] == {"metric": "reward_mean", "before": 0.0, "sft": 0.4, "after": 0.9, "change": pytest.approx(0.9)}  # fmt: skip
    assert rows[1]["sft"] is None and rows[1]["change"] == -1.0
    assert "change" not in rows[2]  # one value: nothing to compare
    assert comparison_rows(metrics, ["after", "nope"])[0] == {"metric": "reward_mean", "after": 0.9}
    table = comparison_table(rows, "t")
    assert [c.header for c in table.columns] == ["metric", "before", "sft", "after", "change"]
    # The champion measured for the registry's gate is a column, not part of this run's change.
    gated = comparison_rows({**metrics, "champion/reward_mean": 0.95}, ["before", "after", "champion"])  # fmt: skip
    assert gated[0]["champion"] == 0.95 and gated[0]["change"] == pytest.approx(0.9)


def test_the_comparison_lists_the_primary_metric_right_after_the_format_failure_rate() -> None:
    metrics = {
        "before/accuracy": 0.5, "before/consistent_accuracy": 0.1, "before/position_bias": 0.9,
        "before/format_failure_rate": 0.2, "before/reward_mean": 0.4, "before/pairs": 4.0,
        "before/subset/Math/consistent_accuracy": 0.0, "before/accuracy_std": 0.1,
    }  # fmt: skip
    rows = comparison_rows(metrics, ["before"])
    assert [r["metric"] for r in rows] == [
        "reward_mean", "format_failure_rate", "consistent_accuracy", "accuracy", "position_bias",
    ]  # fmt: skip


def test_evaluation_tables_show_the_breakdowns() -> None:
    from rich.console import Console

    from judgeflow.console import evaluation_tables
    from judgeflow.evaluation import JudgeEvaluation, judge_rows
    from judgeflow.evaluation.metrics import summarise

    rows = [
        {"data_source": "tinyjudge/legs", "prompt": [{"role": "user", "content": "q"}],
         "reward_model": {"ground_truth": {"helpfulness": label}},
         "extra_info": {"index": i, "subset": "Precise IF [x]" if i else None}}
        for i, label in enumerate([4, 2, 0])
    ]  # fmt: skip
    judged = judge_rows("pointwise", rows, ["<score>4</score>", "<score>3</score>", "no"])
    metrics, details = summarise("pointwise", judged)
    tables = evaluation_tables(JudgeEvaluation(metrics, judged, details), "pointwise")
    console = Console(record=True, width=120)
    for table in tables:
        console.print(table)
    text = console.export_text()
    assert [t.title for t in tables][:2] == ["Judge quality (pointwise)", "Per subset (samples pooled)"]  # fmt: skip
    assert "Precise IF [x]" in text and "tinyjudge/legs" in text  # markup-safe names
    assert "exact_match" in text.splitlines()[4]  # the primary metric heads the table
    header = next(t for t in tables if str(t.title).startswith("Confusion"))
    assert [c.header for c in header.columns] == ["true", "0", "1", "2", "3", "4", "fail", "total"]


def test_a_policys_run_prints_its_verifiers_rate_overall_and_per_verifier() -> None:
    metrics = {
        "sft/verifiable_correct_rate": 0.4, "after/verifiable_correct_rate": 0.7,
        "sft/format_failure_rate": 0.0, "after/format_failure_rate": 0.0,
        "sft/subset/gsm8k/verifiable_correct_rate": 0.5,
        "after/subset/gsm8k/verifiable_correct_rate": 0.8,
        "sft/subset/string_matcher/verifiable_correct_rate": 0.3,
        "after/subset/string_matcher/verifiable_correct_rate": 0.6,
    }  # fmt: skip
    summary = {"comparison": comparison_rows(metrics, ["sft", "after"]), "metrics": metrics}
    text = plain_text(summary_tables(summary))
    assert "Policy on the held-out prompts (before → after)" in text
    assert "verifiable_correct_rate by subset" in text
    assert [line.split()[3] for line in text.splitlines() if "string_matcher" in line] == ["0.300"]


def test_run_summary_has_one_column_per_key_metric_and_no_json_blobs() -> None:
    from judgeflow.stages.records import summary_table

    rows = [
        {"stage": "download", "status": "cached", "duration_s": 0.1},
        {"stage": "sft", "status": "ran", "duration_s": 40.0, "metrics": {"sft/loss": 0.07}},
        {"stage": "train", "status": "ran", "duration_s": 60.0,
         "metrics": {"global_step": 40, "train/reward_mean": 0.91, "train/loss": 0.01}},
        {"stage": "evaluate[after]", "status": "ran", "duration_s": 1.0,
         "metrics": {"after/subset/legs/exact_match": 0.5, "after/reward_mean": 1.0,
                     "after/exact_match": 1.0}},
        {"stage": "register[final]", "status": "ran", "duration_s": 0.5,
         "note": "v2 kept as challenger: exact_match 0.5 does not beat champion v1's 1.0"},
    ]  # fmt: skip
    table = summary_table(rows, link="mlflow run x", jobs={"train": ["12"]})
    assert set(table[0]) == {
        "stage", "status", "duration_s", "global_step", "reward_mean", "exact_match", "loss",
        "slurm_job_ids", "note", "error", "mlflow",
    }  # fmt: skip
    assert table[-1]["note"].startswith("v2 kept as challenger") and table[0]["note"] == ""
    assert summary_table(rows[:1], link="", jobs={})[0].keys() == table[0].keys() - {
        "global_step",
        "reward_mean",
        "exact_match",
        "loss",
        "note",
    }  # no metric, no note: no such columns
    by_stage = {r["stage"]: r for r in table}
    assert by_stage["train"]["reward_mean"] == 0.91 and by_stage["train"]["global_step"] == 40
    assert by_stage["evaluate[after]"]["exact_match"] == 1.0  # not a subset's 0.5
    assert by_stage["sft"]["loss"] == 0.07 and by_stage["download"]["loss"] == ""
    assert by_stage["train"]["slurm_job_ids"] == "12"


def test_step_lines_are_one_short_readable_line() -> None:
    line = step_line(12, 40, {"train/reward_mean": 0.625, "train/reward_std": 0.31, "train/kl": 0.002, "train/entropy": 3.0})  # fmt: skip
    assert line == "grpo step 12/40 | reward 0.625 ± 0.310 | kl 0.0020"
    assert step_line(3, 40, {"train/entropy": 1.0}) == ""  # nothing worth a line
    assert sft_line(5, 60, {"sft/loss": 1.23456, "sft/learning_rate": 9.1e-4}) == "sft step 5/60 | loss 1.2346 | lr 9.1e-04"  # fmt: skip


def test_a_new_judgeflow_home_gets_its_tiny_model_built(tmp_path: Path, monkeypatch) -> None:
    from judgeflow.cli.recipes import _ensure_model

    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path))
    _ensure_model(str(tmp_path / "tiny-model"))
    assert (tmp_path / "tiny-model" / "config.json").is_file()
    with pytest.raises(ConfigError, match=r"judgeflow dev tiny-model /nowhere/model"):
        _ensure_model("/nowhere/model")
    _ensure_model("Qwen/Qwen3-8B")  # a hub id is left to the engine


def test_the_terminal_view_shows_stage_names_verbatim_and_a_bar_per_stage() -> None:
    from rich.console import Console

    from judgeflow.console import report_progress, report_stage, terminal_view

    console = Console(record=True, width=120, force_terminal=True)
    with terminal_view(console):
        report_progress("train", 12, 40, {"train/reward_mean": 0.625})
        report_stage("evaluate[sft]", "ran", 1.25)
    text = console.export_text()
    assert "ran evaluate[sft] (1.2 s)" in text
    assert "12/40" in text and "reward 0.625" in text
    report_stage("outside a view", "ran", 0.0)  # no view installed: nothing happens, no error
