"""A model's lineage file, the refusal to score it on prompts it trained on, and what every
evaluation says about the check: checked, overlap-allowed or unchecked (both kept apart; an
unchecked count is never 0)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from judgeflow.cli.typer_app import app
from judgeflow.config import RunConfig, load_config
from judgeflow.data import prepare_judge
from judgeflow.data.prompt_hashes import judge_prompt_hash
from judgeflow.data.templates import render_pairwise, render_pointwise
from judgeflow.evaluation.decontamination import (
    CHECKED,
    LINEAGE_FILE,
    OVERLAP_ALLOWED,
    STATUSES,
    UNCHECKED,
    ContaminationError,
    check_overlap,
    eval_set_for,
    file_prompt_hashes,
    overlap_set,
    read_lineage,
    unchecked_set,
    write_lineage,
)
from judgeflow.registry.models import ModelRegistry
from judgeflow.samples import sample_path
from judgeflow.stages import PreparedData, evaluate_stage
from judgeflow.stages.evaluate import evaluation_set

#: Two rows, four new tokens: the tiny model answers in well under a second.
QUICK = ["evaluation.limit=2", "evaluation.max_new_tokens=4"]


def _row(query: str, response: str, *, stored: bool = True) -> dict:
    extra = {"source_file": "data.jsonl", "source_row": 3}
    if stored:
        extra["prompt_hash"] = judge_prompt_hash(query, [response])
    return {
        "prompt": [{"role": "user", "content": render_pointwise(query, response)}],
        "reward_model": {"ground_truth": {"helpfulness": 4}},
        "extra_info": extra,
    }


def _write(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_lineage_joins_the_start_models_and_travels_in_the_model_dir(tmp_path: Path) -> None:
    sft_data = _write(
        tmp_path / "sft.parquet",
        [{"messages": [{"role": "user", "content": render_pairwise("Q1", "a", "b")},
                       {"role": "assistant", "content": "<better>A</better>"}]}],
    )  # fmt: skip
    rl_data = _write(tmp_path / "rl.parquet", [_row("Q2", "r"), _row("Q3", "r", stored=False)])
    sft_model, final = tmp_path / "sft-model", tmp_path / "final"
    sft_model.mkdir(), final.mkdir()

    write_lineage(
        sft_model, stage="sft", mode="pairwise", data_file=sft_data, data_uri="s3://b/sft"
    )
    lineage = write_lineage(
        final, stage="grpo", mode="pointwise", data_file=rl_data, start_model=sft_model
    )
    assert [s["stage"] for s in lineage.stages] == ["sft", "grpo"]
    assert lineage.stages[0]["data"] == "s3://b/sft"
    assert lineage.prompt_hashes == {
        judge_prompt_hash("Q1", ["b", "a"]),
        judge_prompt_hash("q2", ["R"]),
        judge_prompt_hash("Q3", ["r"]),  # computed from the text when a row has no hash
    }
    assert read_lineage(final) == lineage
    assert json.loads((final / LINEAGE_FILE).read_text())["schema_version"] == 1
    assert read_lineage(tmp_path) is None


def test_evaluation_on_training_prompts_is_refused_unless_allowed(tmp_path: Path) -> None:
    data = _write(tmp_path / "train.parquet", [_row("What is 2+2?", "Four.")])
    model = tmp_path / "model"
    model.mkdir()
    write_lineage(model, stage="grpo", mode="pointwise", data_file=data)
    held_out = [_row("What is 3+3?", "Six.")]
    seen = [_row("what is  2+2?", "four."), *held_out]  # same prompt up to case and spacing

    clean = check_overlap(model, held_out, "pointwise")
    assert clean.checked and clean.overlapping == []
    with pytest.raises(ContaminationError) as refused:
        check_overlap(model, seen, "pointwise", what="val.parquet")
    text = str(refused.value)
    assert "1 of 2 rows of val.parquet" in text and "--allow-overlap" in text
    assert "data.jsonl row 3" in text and "what is 2+2?" in text
    allowed = check_overlap(model, seen, "pointwise", allow_overlap=True)
    assert allowed.overlapping == [0] and allowed.to_dict()["overlapping_rows"] == 1


def test_a_model_without_lineage_is_not_checked(tmp_path: Path) -> None:
    overlap = check_overlap(tmp_path, [_row("q", "r")], "pointwise")
    assert not overlap.checked and overlap.rows == 1


def test_a_file_of_neither_kind_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "odd.parquet", [{"text": "hello"}])
    with pytest.raises(ValueError, match="odd.parquet: neither verl RL rows"):
        file_prompt_hashes(path, "pointwise")


def test_each_check_says_what_it_found(tmp_path: Path) -> None:
    """checked / overlap-allowed / unchecked; a model stripped of its lineage is unchecked, and
    its overlap count is unknown, never 0."""
    data = _write(tmp_path / "train.parquet", [_row("What is 2+2?", "Four.")])
    model = tmp_path / "model"
    model.mkdir()
    write_lineage(model, stage="grpo", mode="pointwise", data_file=data)
    seen, held_out = [_row("What is 2+2?", "Four.")], [_row("What is 3+3?", "Six.")]

    assert check_overlap(model, held_out, "pointwise").status == CHECKED
    assert check_overlap(model, held_out, "pointwise", allow_overlap=True).status == CHECKED
    allowed = check_overlap(model, seen, "pointwise", allow_overlap=True)
    assert allowed.status == OVERLAP_ALLOWED and allowed.to_dict()["status"] == OVERLAP_ALLOWED

    (model / LINEAGE_FILE).unlink()  # the same weights, their lineage lost on the way
    stripped = check_overlap(model, seen, "pointwise")  # no refusal: nothing is known
    assert stripped.status == UNCHECKED and not stripped.checked
    assert (
        stripped.to_dict()["overlapping_rows"] is None and stripped.to_dict()["status"] == UNCHECKED
    )


def test_overlap_and_unchecked_numbers_have_their_own_evaluation_sets() -> None:
    assert overlap_set("0123abcd") == "0123abcd-overlap"
    assert overlap_set(overlap_set("0123abcd")) == "0123abcd-overlap"  # marked once
    assert unchecked_set("0123abcd") == "0123abcd-unchecked"
    assert unchecked_set(unchecked_set("0123abcd")) == "0123abcd-unchecked"
    sets = {status: eval_set_for("0123abcd", status) for status in STATUSES}
    assert sets == {
        CHECKED: "0123abcd",  # only checked numbers keep the set's own key
        OVERLAP_ALLOWED: "0123abcd-overlap",
        UNCHECKED: "0123abcd-unchecked",
    }


@pytest.fixture
def trained(tmp_path: Path, judgeflow_home: Path, tiny_model: Path) -> tuple[Path, Path, Path]:
    """(model, train rows, held-out rows): a copy of the tiny model whose lineage says it trained
    on the sample's train split, and that split's prepared files."""
    prepared = prepare_judge(
        "pointwise", [sample_path("tinyjudge_pointwise.jsonl")], tmp_path / "data" / "p.parquet",
        val_fraction=0.25,
    )  # fmt: skip
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    write_lineage(model, stage="grpo", mode="pointwise", data_file=prepared.train_path)
    assert prepared.val_path is not None
    return model, Path(prepared.train_path), Path(prepared.val_path)


def _cfg(model: Path, *more: str) -> RunConfig:
    return load_config("grpo-pointwise", profile="tiny", overrides=[f"model.path={model}", *QUICK, *more])  # fmt: skip


def _data(rows: Path) -> PreparedData:
    return PreparedData(train_file=str(rows), val_file=str(rows), report_file="", report={})


def test_the_evaluation_stage_records_the_status_beside_the_count(
    trained: tuple[Path, Path, Path],
) -> None:
    model, train, val = trained
    cfg, allowing = _cfg(model), _cfg(model, "evaluation.allow_overlap=true")

    clean = evaluate_stage(cfg, str(model), _data(val))
    assert clean["details"]["decontamination"] == CHECKED
    assert clean["metrics"]["eval/overlap_rows"] == 0.0
    assert clean["details"]["eval_set"] == evaluation_set(cfg, val)

    with pytest.raises(ContaminationError):
        evaluate_stage(cfg, str(model), _data(train))
    allowed = evaluate_stage(allowing, str(model), _data(train))
    assert allowed["details"]["decontamination"] == OVERLAP_ALLOWED
    assert allowed["metrics"]["eval/overlap_rows"] == 2.0
    # Its own evaluation set: never the clean one, so no gate compares the two.
    assert allowed["details"]["eval_set"] == overlap_set(evaluation_set(cfg, train))

    (model / LINEAGE_FILE).unlink()  # the weights without their lineage
    stripped = evaluate_stage(cfg, str(model), _data(train))
    assert stripped["details"]["decontamination"] == UNCHECKED
    assert "eval/overlap_rows" not in stripped["metrics"]  # unknown, not 0
    # Its own evaluation set too: it may have trained on these rows (it did), so no gate
    # compares these numbers with checked ones.
    assert stripped["details"]["eval_set"] == unchecked_set(evaluation_set(cfg, train))


def test_judgeflow_evaluate_says_unchecked_and_keeps_overlap_and_unchecked_numbers_apart(
    trained: tuple[Path, Path, Path], mlflow_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`judgeflow evaluate` as a user runs it, against a real MLflow server."""
    model, train, _ = trained
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    client = MlflowClient(mlflow_server)
    quick = [arg for item in QUICK for arg in ("--set", item)]
    evaluate = ["evaluate", "--data", str(train), "--profile", "tiny", *quick]

    # A registered version evaluated with --allow-overlap on rows it trained on: its numbers
    # go onto the version under the overlap set, not the clean one.
    name = f"judge-decon-{uuid.uuid4().hex[:8]}"
    experiment = client.create_experiment(f"decon-{uuid.uuid4().hex[:8]}")
    registry = ModelRegistry(mlflow_server)
    registry.register(
        name=name, model_uri=str(model), run_id=client.create_run(experiment).info.run_id,
        mode="pointwise", metric="exact_match", evaluation=None, eval_set=None, tags={},
        description="",
    )  # fmt: skip
    allowed = CliRunner().invoke(
        app, [*evaluate[:1], f"models:/{name}/1", *evaluate[1:], "--allow-overlap",
              "--output", str(model.parent / "allowed")],
    )  # fmt: skip
    assert allowed.exit_code == 0, allowed.output
    assert "2 rows the model trained on were scored" in allowed.output
    clean_set = evaluation_set(_cfg(model), train)
    kept = client.get_model_version(name, "1").tags
    assert f"judgeflow.eval.{overlap_set(clean_set)}" in kept
    assert f"judgeflow.eval.{clean_set}" not in kept
    run = _latest_evaluation(client)
    assert run.data.tags["judgeflow.decontamination"] == OVERLAP_ALLOWED
    assert run.data.tags["judgeflow.eval_set"] == overlap_set(clean_set)

    # The same weights stripped of their lineage: unchecked, said, tagged, and no 0 logged.
    (model / LINEAGE_FILE).unlink()
    stripped = CliRunner().invoke(
        app, [*evaluate[:1], str(model), "--mode", "pointwise", *evaluate[1:],
              "--output", str(model.parent / "stripped")],
    )  # fmt: skip
    assert stripped.exit_code == 0, stripped.output
    assert "overlap   : unchecked" in stripped.output and "none with" not in stripped.output
    run = _latest_evaluation(client)
    assert run.data.tags["judgeflow.decontamination"] == UNCHECKED
    assert "eval/exact_match" in run.data.metrics and "eval/overlap_rows" not in run.data.metrics

    # The registered version whose weights lost their lineage, evaluated on its own training
    # rows: unchecked, so its numbers go onto the version under the unchecked set, never the
    # clean one a later gate compares with.
    version = CliRunner().invoke(
        app, [*evaluate[:1], f"models:/{name}/1", *evaluate[1:],
              "--output", str(model.parent / "version-stripped")],
    )  # fmt: skip
    assert version.exit_code == 0, version.output
    assert "overlap   : unchecked" in version.output
    run = _latest_evaluation(client)
    assert run.data.tags["judgeflow.eval_set"] == unchecked_set(clean_set)
    kept = client.get_model_version(name, "1").tags
    assert f"judgeflow.eval.{unchecked_set(clean_set)}" in kept
    assert f"judgeflow.eval.{clean_set}" not in kept
    # v1 is the champion (registered first, without numbers); a later version measured clean
    # on that set is not weighed against v1's unchecked numbers, and the reason says so.
    later = registry.register(
        name=name, model_uri=str(model.parent / "later"), mode="pointwise",
        run_id=client.create_run(experiment).info.run_id, metric="exact_match",
        evaluation={"exact_match": 0.0}, eval_set=clean_set, decontamination=CHECKED, tags={},
        description="",
    )  # fmt: skip
    assert not later.promoted and later.champion_value is None
    assert "champion v1 has no lineage file" in later.reason


def _latest_evaluation(client: MlflowClient):  # type: ignore[no-untyped-def]
    experiment = client.get_experiment_by_name("judgeflow-evaluate")
    assert experiment is not None
    return client.search_runs([experiment.experiment_id], order_by=["start_time DESC"])[0]


def test_a_judges_lineage_keeps_its_questions_and_a_policy_it_pays_is_checked_against_them(
    tmp_path: Path,
) -> None:
    """A judge's lineage records the questions behind its prompts (SFT and GRPO, joined); the
    held-out rows of a policy it pays are flagged where they ask one of them, not refused."""
    from judgeflow.data.rlvr import prepare_rlvr
    from judgeflow.evaluation.decontamination import judge_overlap, question_hash

    sft_data = _write(
        tmp_path / "sft.parquet",
        [{"messages": [{"role": "user", "content": render_pairwise("Q1?", "a", "b")},
                       {"role": "assistant", "content": "<better>A</better>"}]}],
    )  # fmt: skip
    rl_data = _write(tmp_path / "rl.parquet", [_row("What  is the capital of Peru?", "Lima.")])
    sft_model, judge = tmp_path / "sft-model", tmp_path / "judge"
    sft_model.mkdir(), judge.mkdir()
    write_lineage(sft_model, stage="sft", mode="pairwise", data_file=sft_data)
    lineage = write_lineage(
        judge, stage="grpo", mode="pointwise", data_file=rl_data, start_model=sft_model
    )
    assert lineage.question_hashes == {
        question_hash("Q1?"),
        question_hash("what is the capital of peru?"),  # normalised
    }
    rows_file = tmp_path / "policy.jsonl"
    rows_file.write_text(
        "".join(
            json.dumps({"messages": [{"role": "user", "content": q}], "dataset": "judge",
                        "ground_truth": "ref"}) + "\n"
            for q in ("What is the capital of Peru?", "What is the capital of Chile?")
        )
    )  # fmt: skip
    prepared = prepare_rlvr([rows_file], tmp_path / "policy.parquet", judge_datasets=["judge"])
    rows = pq.read_table(prepared.train_path).to_pylist()
    found = judge_overlap(judge, rows)
    assert found["status"] == "overlap" and found["overlapping_rows"] == 1
    assert found["examples"] == [{"row": 0, "question": "What is the capital of Peru?"}]
    assert judge_overlap(judge, rows[1:])["status"] == "checked"
    # a policy's own lineage records no questions: a judge from before them is unchecked
    policy = tmp_path / "policy"
    policy.mkdir()
    write_lineage(policy, stage="grpo", mode="rlvr", data_file=prepared.train_path)
    assert judge_overlap(policy, rows)["status"] == "unchecked"
