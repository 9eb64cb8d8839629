"""The `judgeflow` command line: prepare, config, errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from judgeflow.cli.typer_app import app
from judgeflow.samples import sample_path

runner = CliRunner()


def _prepare_pairwise(out: Path, tokenizer: Path, max_len: int) -> tuple[str, dict]:
    result = runner.invoke(
        app,
        [
            "prepare", "judge", "--mode", "pairwise",
            "--input", str(sample_path("openjudge_pairwise.jsonl")),
            "--input", str(sample_path("rewardbench2.jsonl")),
            "--output", str(out), "--val-fraction", "0.25", "--balance-positions", "--seed", "3",
            "--tokenizer", str(tokenizer), "--max-prompt-length", str(max_len),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output, json.loads(out.with_suffix(".report.json").read_text())


def test_prepare_judge_pairwise_writes_train_val_and_report(
    tmp_path: Path, tiny_model: Path
) -> None:
    out = tmp_path / "pair.parquet"
    _, unfiltered = _prepare_pairwise(out, tiny_model, 100_000)
    assert unfiltered["dropped"]["by_reason"]["prompt_too_long"] == 0
    longest = unfiltered["prompt_tokens"]["max"]

    output, report = _prepare_pairwise(out, tiny_model, longest - 1)
    train, val = pq.read_table(out), pq.read_table(tmp_path / "pair.val.parquet")
    assert train.num_rows == report["counts"]["examples_written"]["train"]
    assert val.num_rows == report["counts"]["rows_written"]["val"]  # both A/B orders
    assert val.num_rows == 2 * report["counts"]["examples_written"]["val"]
    assert report["dropped"]["by_reason"]["tie"] > 0  # the RewardBench2 sample has Ties rows
    assert report["dropped"]["by_reason"]["prompt_too_long"] >= 1  # the longest no longer fits
    assert report["prompt_tokens"]["max"] < longest
    assert "prompt_too_long" in output


def test_prepare_judge_bad_row_names_file_row_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    row = {
        "input": [{"role": "user", "content": "Hi?"}],
        "output": [
            {"answer": {"role": "assistant", "content": "Hello", "label": {"helpfulness": 7}}}
        ],
        "source": "x",
    }
    bad.write_text(json.dumps(row) + "\n")
    out = tmp_path / "out.parquet"
    result = runner.invoke(
        app, ["prepare", "judge", "--mode", "pointwise", "--input", str(bad), "--output", str(out)]
    )
    assert result.exit_code == 2
    assert "bad.jsonl: row 0, field 'output[0].answer.label.helpfulness'" in result.output
    assert not out.exists()


def test_config_prints_resolved_yaml_and_rejects_unknown_keys() -> None:
    ok = runner.invoke(app, ["config", "grpo-pairwise", "--set", "grpo.learning_rate=3e-6"])
    assert ok.exit_code == 0
    assert "learning_rate: 3.0e-06" in ok.output and "mode: pairwise" in ok.output
    bad = runner.invoke(app, ["config", "grpo-pairwise", "--set", "grpo.lr=3e-6"])
    assert bad.exit_code == 2
    assert "unknown config key 'grpo.lr'" in bad.output


def test_run_rejects_bad_config_before_starting_anything() -> None:
    result = runner.invoke(app, ["run", "grpo-pointwise", "--set", "cluster.nodes=0"])
    assert result.exit_code == 2
    assert "cluster.nodes" in result.output


def test_recipes_lists_presets_and_profiles() -> None:
    result = runner.invoke(app, ["recipes"])
    assert "grpo-pointwise" in result.output and "tiny" in result.output


@pytest.fixture
def judging_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`judgeflow judge` with a home of the test's own and its MLflow on local files."""
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.mark.usefixtures("judging_here")
def test_judge_names_a_bad_row_and_drops_it_only_when_asked(
    tmp_path: Path, tiny_model: Path
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"query": "q", "response": "r"}) + "\n" + json.dumps({"query": "q"}) + "\n"
    )
    out = tmp_path / "verdicts.parquet"
    base = ["judge", str(tiny_model), "--mode", "pointwise", "--data", str(rows), "--output", str(out),
            "--set", "evaluation.max_new_tokens=4"]  # fmt: skip
    refused = runner.invoke(app, base)
    assert refused.exit_code == 2, refused.output
    assert f"{rows}: row 1, field 'response'" in refused.output
    assert "hint: pass --skip-invalid" in refused.output and not out.exists()
    dropped = runner.invoke(app, [*base, "--skip-invalid"])
    assert dropped.exit_code == 0, dropped.output
    assert "dropped   : 1 invalid rows" in dropped.output
    assert [r["id"] for r in pq.read_table(out).to_pylist()] == ["0"]


@pytest.mark.usefixtures("judging_here")
def test_judge_reads_a_shipped_sample(tmp_path: Path, tiny_model: Path) -> None:
    out = tmp_path / "verdicts.jsonl"
    result = runner.invoke(
        app,
        ["judge", str(tiny_model), "--mode", "pointwise", "--data", "sample://rewardbench2.jsonl",
         "--output", str(out), "--set", "evaluation.max_new_tokens=2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # Every response of every record, counted from the file itself, not by the reader under test:
    # a RewardBench2 record is judged once per response, as `{id}/chosen/{i}`, `{id}/rejected/{i}`.
    lines = sample_path("rewardbench2.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    expected = [
        f"{record['id']}/{side}/{i}"
        for record in records
        for side in ("chosen", "rejected")
        for i in range(len(record[side]))
    ]
    assert len(records) > 1 and len(expected) > len(records)  # records of several responses
    assert f"judged    : {len(expected)} rows of sample://rewardbench2.jsonl" in result.output
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == expected  # a verdict for every response of every record, in the file's order


RLVR_SAMPLE = (
    Path(__file__).resolve().parents[2] / "src/judgeflow/samples/rlvr/open_instruct_mixed.jsonl"
)


def test_prepare_rlvr_writes_the_split_and_names_a_bad_row(tmp_path: Path) -> None:
    out = tmp_path / "rlvr.parquet"
    ok = runner.invoke(app, ["prepare", "rlvr", "-i", str(RLVR_SAMPLE), "-o", str(out),
                             "--val-fraction", "0.25", "--remap-verifier", "numbers=gsm8k"])  # fmt: skip
    assert ok.exit_code == 0, ok.output
    assert pq.read_table(out).num_rows + pq.read_table(tmp_path / "rlvr.val.parquet").num_rows == 12
    assert "rows read 12" in ok.output
    report = json.loads((tmp_path / "rlvr.report.json").read_text())
    assert report["parameters"]["remap_verifier"] == {"numbers": "gsm8k"}

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "2+2?"}],
                               "ground_truth": "4", "dataset": "numbers"}) + "\n")  # fmt: skip
    refused = runner.invoke(
        app, ["prepare", "rlvr", "-i", str(bad), "-o", str(tmp_path / "b.parquet")]
    )
    assert refused.exit_code == 2
    assert "bad.jsonl: row 0, field 'dataset'" in refused.output
    assert "--skip-invalid" in refused.output  # the way out, as a flag of this command
    remapped = runner.invoke(app, ["prepare", "rlvr", "-i", str(bad), "-o", str(tmp_path / "b.parquet"),
                                   "--remap-verifier", "numbers=gsm8k"])  # fmt: skip
    assert remapped.exit_code == 0, remapped.output
    typo = runner.invoke(app, ["prepare", "rlvr", "-i", str(bad), "-o", str(tmp_path / "c.parquet"),
                               "--remap-verifier", "numbers"])  # fmt: skip
    assert typo.exit_code == 2 and "OLD=NEW" in typo.output
