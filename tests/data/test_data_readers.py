"""Readers: shipped samples, both formats, parquet/JSONL/JSON, and row-level validation."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_testrows import pairwise_row, pointwise_row, rb2_row

from judgeflow.data import (
    DataError,
    DataFileNotFoundError,
    DataValidationError,
    PairwiseExample,
    PointwiseExample,
    ReadResult,
    detect_format,
    read_examples,
)
from judgeflow.samples import sample_path


def _pointwise(result: ReadResult) -> list[PointwiseExample]:
    """The examples, checked to be pointwise (and typed so)."""
    out = [ex for ex in result.examples if isinstance(ex, PointwiseExample)]
    assert len(out) == len(result.examples)
    return out


def _pairwise(result: ReadResult) -> list[PairwiseExample]:
    """The examples, checked to be pairwise (and typed so)."""
    out = [ex for ex in result.examples if isinstance(ex, PairwiseExample)]
    assert len(out) == len(result.examples)
    return out


# --------------------------------------------------------------------------- shipped samples


def test_sample_pointwise_reads_with_all_labels_and_multi_turn_queries() -> None:
    result = read_examples("pointwise", sample_path("openjudge_pointwise.jsonl"))
    assert result.rows_read == len(result.examples) == 40
    assert all(isinstance(ex, PointwiseExample) for ex in result.examples)
    labels = Counter(ex.label for ex in result.examples if isinstance(ex, PointwiseExample))
    assert set(labels) == {0, 1, 2, 3, 4}
    # a multi-turn row: the query is the first user message, not the last
    lisbon = [ex for ex in result.examples if "Lisbon" in ex.query]
    assert lisbon[0].query == "I have one day in Lisbon. What should I see?"


def test_sample_pairwise_has_both_preferences() -> None:
    result = read_examples("pairwise", sample_path("openjudge_pairwise.jsonl"))
    assert result.rows_read == 40 and result.dropped == []
    prefs = Counter(ex.preference for ex in result.examples if isinstance(ex, PairwiseExample))
    assert prefs["A"] > 0 and prefs["B"] > 0


def test_sample_rewardbench2_filters_ties_and_expands_pairs() -> None:
    path = sample_path("rewardbench2.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    kept = [r for r in rows if r["subset"] != "Ties"]
    assert len(rows) - len(kept) >= 2
    expected_pairs = sum(len(r["chosen"]) * len(r["rejected"]) for r in kept)

    result = read_examples("pairwise", path)
    assert result.rows_read == len(rows)
    assert result.rows_used == len(kept)
    assert len(result.examples) == expected_pairs
    assert [d.reason for d in result.dropped] == ["tie"] * (len(rows) - len(kept))
    assert all(ex.preference == "A" for ex in result.examples if isinstance(ex, PairwiseExample))


def test_sample_path_rejects_unknown_names() -> None:
    with pytest.raises(FileNotFoundError, match="available"):
        sample_path("nope.jsonl")
    with pytest.raises(FileNotFoundError):
        sample_path("../__init__.py")


# --------------------------------------------------------------------------- formats and files


@pytest.mark.parametrize("writer", ["write_jsonl", "write_parquet"])
def test_openjudge_pointwise_jsonl_and_parquet_agree(writer: str, request: Any) -> None:
    write = request.getfixturevalue(writer)
    rows = [pointwise_row(f"q{i}", f"r{i}", i % 5) for i in range(7)]
    suffix = ".jsonl" if writer == "write_jsonl" else ".parquet"
    path = write(rows, name=f"pw{suffix}")
    result = read_examples("pointwise", path)
    assert [(ex.query, ex.response, ex.label) for ex in _pointwise(result)] == [
        (f"q{i}", f"r{i}", i % 5) for i in range(7)
    ]
    assert [ex.origin.row for ex in result.examples] == list(range(7))
    assert result.examples[0].origin.file == str(path)
    assert result.examples[0].source == "unit"


def test_parquet_pairwise_is_read_in_batches(write_parquet: Callable[..., Path]) -> None:
    rows = [pairwise_row(f"q{i}", "a", "b", "AB"[i % 2]) for i in range(10)]
    path = write_parquet(rows)
    result = read_examples("pairwise", path, batch_size=3)
    assert [ex.preference for ex in _pairwise(result)] == ["A", "B"] * 5
    assert [ex.origin.row for ex in result.examples] == list(range(10))


def test_json_list_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([pointwise_row("q0"), pointwise_row("q1")]))
    assert [ex.query for ex in read_examples("pointwise", path).examples] == ["q0", "q1"]


def test_detect_format_from_columns(
    write_jsonl: Callable[..., Path], write_parquet: Callable[..., Path]
) -> None:
    assert detect_format(write_jsonl([pointwise_row()], name="a.jsonl")) == "openjudge"
    assert detect_format(write_parquet([rb2_row(0)], name="b.parquet")) == "rewardbench2"
    unknown = write_jsonl([{"question": "x", "answer": "y"}], name="c.jsonl")
    with pytest.raises(DataError, match=r"(?s)cannot detect the data format.*input_format"):
        detect_format(unknown)


def test_input_format_override_skips_detection(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([{**rb2_row(0), "extra": 1}])
    with pytest.raises(DataValidationError, match="field 'input': missing input messages"):
        read_examples("pointwise", path, input_format="openjudge")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(DataFileNotFoundError, match=r"nope\.jsonl: input file not found"):
        read_examples("pointwise", missing)
    with pytest.raises(FileNotFoundError):
        read_examples("pointwise", [missing])


def test_unsupported_extension(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("a,b\n")
    with pytest.raises(DataError, match="unsupported file type"):
        read_examples("pointwise", path)


def test_multiple_inputs_with_mixed_formats(write_jsonl: Callable[..., Path]) -> None:
    oj = write_jsonl([pointwise_row("q0")], name="oj.jsonl")
    rb = write_jsonl([rb2_row(0, chosen=["c"], rejected=["r1", "r2"])], name="rb.jsonl")
    result = read_examples("pointwise", [oj, rb], chosen_label=3, rejected_label=1)
    assert [s.format for s in result.inputs] == ["openjudge", "rewardbench2"]
    assert [(ex.response, ex.label) for ex in _pointwise(result)] == [
        ("2 + 2 = 4.", 4),
        ("c", 3),
        ("r1", 1),
        ("r2", 1),
    ]
    rb_origins = [ex.origin for ex in result.examples[1:]]
    assert [(o.id, o.subset, o.chosen_index, o.rejected_index) for o in rb_origins] == [
        ("0", "Factuality", 0, None),
        ("0", "Factuality", None, 0),
        ("0", "Factuality", None, 1),
    ]
    assert {ex.source for ex in result.examples[1:]} == {"rewardbench2"}


def test_source_defaults_to_format_name(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([pointwise_row(source=None)])
    assert read_examples("pointwise", path).examples[0].source == "openjudge"


# --------------------------------------------------------------------------- RewardBench2


def test_rewardbench2_pairwise_expands_every_chosen_rejected_pair(
    write_jsonl: Callable[..., Path],
) -> None:
    path = write_jsonl(
        [
            rb2_row(7, chosen=["c0", "c1"], rejected=["r0", "r1", "r2"]),
            rb2_row(8, subset="Ties", chosen=["x", "y"], rejected=["z"]),
        ]
    )
    result = read_examples("pairwise", path)
    got = [
        (ex.response_a, ex.response_b, ex.origin.chosen_index, ex.origin.rejected_index)
        for ex in result.examples
        if isinstance(ex, PairwiseExample)
    ]
    assert got == [(f"c{i}", f"r{j}", i, j) for i in range(2) for j in range(3)]
    assert result.rows_read == 2 and result.rows_used == 1
    assert [(d.row, d.reason) for d in result.dropped] == [(1, "tie")]


def test_rewardbench2_pointwise_default_labels(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([rb2_row(0, chosen=["good"], rejected=["b1", "b2", "b3"])])
    labels = [ex.label for ex in _pointwise(read_examples("pointwise", path))]
    assert labels == [4, 0, 0, 0]


def test_label_parameters_are_validated(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([rb2_row(0)])
    with pytest.raises(DataError, match="chosen_label must be an integer 0-4"):
        read_examples("pointwise", path, chosen_label=5)
    with pytest.raises(DataError, match="rejected_label"):
        read_examples("pointwise", path, rejected_label=True)


# --------------------------------------------------------------------------- validation


def _bad_label_row(value: Any) -> dict[str, Any]:
    return pointwise_row(label=value)


INVALID_POINTWISE: list[tuple[dict[str, Any], str]] = [
    (
        _bad_label_row(7),
        "field 'output[0].answer.label.helpfulness': expected an integer 0-4, got 7",
    ),
    (
        _bad_label_row(-1),
        "field 'output[0].answer.label.helpfulness': expected an integer 0-4, got -1",
    ),
    (_bad_label_row(True), "expected an integer 0-4, got True (a bool)"),
    (_bad_label_row(3.0), "expected an integer 0-4, got 3.0"),
    (_bad_label_row("3"), "expected an integer 0-4, got '3'"),
    (_bad_label_row(None), "field 'output[0].answer.label.helpfulness': missing helpfulness label"),
    (pointwise_row(query=""), "field 'input[0].content': query (first user message) is empty"),
    (pointwise_row(query="   "), "field 'input[0].content': query (first user message) is empty"),
    (pointwise_row(response=""), "field 'output[0].answer.content': response is empty"),
    (
        {**pointwise_row(), "input": [{"role": "system", "content": "be nice"}]},
        "field 'input': no user message",
    ),
    (
        {**pointwise_row(), "input": "hello"},
        "field 'input': expected input messages to be a list, got 'hello'",
    ),
    (
        {**pointwise_row(), "input": [{"role": "user", "content": 5}]},
        "field 'input[0].content': expected query (first user message) to be a string, got 5",
    ),
    (
        {**pointwise_row(), "output": []},
        "field 'output': pointwise rows need exactly 1 answer(s), got 0",
    ),
    ({**pointwise_row(), "output": [{"answer": None}]}, "field 'output[0].answer': missing answer"),
    (
        {
            **pointwise_row(),
            "output": [{"answer": {"role": "assistant", "label": {"helpfulness": 1}}}],
        },
        "field 'output[0].answer.content': missing response",
    ),
    (
        {**pointwise_row(), "output": [{"answer": {"content": "x", "label": 4}}]},
        "field 'output[0].answer.label': expected label to be an object, got 4",
    ),
    ({**pointwise_row(), "source": 12}, "field 'source': expected a non-empty string, got 12"),
    (
        {k: v for k, v in pointwise_row().items() if k != "output"},
        "field 'output': missing output answers",
    ),
]


@pytest.mark.parametrize(("row", "message"), INVALID_POINTWISE)
def test_pointwise_validation_names_file_row_and_field(
    write_jsonl: Callable[..., Path], row: dict[str, Any], message: str
) -> None:
    path = write_jsonl([pointwise_row("fine"), row])
    with pytest.raises(DataValidationError) as info:
        read_examples("pointwise", path)
    err = info.value
    assert str(err).startswith(f"{path}: row 1, ")
    assert message in str(err)
    assert (err.file, err.row, err.total) == (str(path), 1, 1)


def test_the_documented_message_shape(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([pointwise_row()] * 12 + [pointwise_row(label=7)])
    with pytest.raises(DataValidationError) as info:
        read_examples("pointwise", path)
    assert str(info.value).splitlines() == [
        f"{path}: row 12, field 'output[0].answer.label.helpfulness': "
        "expected an integer 0-4, got 7",
        "hint: pass skip_invalid=True to drop invalid rows and count them in the data report",
    ]
    assert info.value.field == "output[0].answer.label.helpfulness"


INVALID_PAIRWISE: list[tuple[dict[str, Any], str]] = [
    (
        pairwise_row(preference="C"),
        "field 'output[0].answer.label.preference': expected 'A' or 'B', got 'C'",
    ),
    (pairwise_row(preference="tie"), "expected 'A' or 'B', got 'tie'"),
    (
        pairwise_row(preference=None),
        "field 'output[0].answer.label.preference': missing preference",
    ),
    (
        {**pairwise_row(), "output": pairwise_row()["output"][:1]},
        "field 'output': pairwise rows need exactly 2 answer(s), got 1",
    ),
    (pairwise_row(b=""), "field 'output[1].answer.content': response is empty"),
]


@pytest.mark.parametrize(("row", "message"), INVALID_PAIRWISE)
def test_pairwise_validation_names_file_row_and_field(
    write_jsonl: Callable[..., Path], row: dict[str, Any], message: str
) -> None:
    path = write_jsonl([row])
    with pytest.raises(DataValidationError) as info:
        read_examples("pairwise", path)
    assert str(info.value).startswith(f"{path}: row 0, ")
    assert message in str(info.value)


def test_pairwise_preferences_must_agree(write_jsonl: Callable[..., Path]) -> None:
    row = pairwise_row()
    row["output"][1]["answer"]["label"]["preference"] = "B"
    path = write_jsonl([row])
    with pytest.raises(
        DataValidationError,
        match=r"field 'output\[1\]\.answer\.label\.preference': preference 'B' disagrees",
    ):
        read_examples("pairwise", path)


def test_pairwise_preference_on_one_answer_is_enough(write_jsonl: Callable[..., Path]) -> None:
    row = pairwise_row(preference="B")
    row["output"][0]["answer"]["label"] = None
    result = read_examples("pairwise", write_jsonl([row]))
    assert _pairwise(result)[0].preference == "B"


INVALID_RB2: list[tuple[dict[str, Any], str]] = [
    (rb2_row(0, prompt=""), "field 'prompt': query (prompt) is empty"),
    (rb2_row(0, chosen=[]), "field 'chosen': 'chosen' has no responses"),
    (
        rb2_row(0, rejected=["ok", 3]),  # type: ignore[list-item]
        "field 'rejected[1]': expected a string response, got 3",
    ),
    (
        {**rb2_row(0), "chosen": "just one"},
        "field 'chosen': expected 'chosen' responses to be a list",
    ),
    ({**rb2_row(0), "subset": 5}, "field 'subset': expected a string, got 5"),
]


@pytest.mark.parametrize(("row", "message"), INVALID_RB2)
def test_rewardbench2_validation(
    write_jsonl: Callable[..., Path], row: dict[str, Any], message: str
) -> None:
    path = write_jsonl([row])
    with pytest.raises(DataValidationError, match="row 0") as info:
        read_examples("pairwise", path)
    assert message in str(info.value)


def test_malformed_json_line_names_the_row(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl(
        [json.dumps(pointwise_row()), "", '{"input": [', json.dumps(pointwise_row())]
    )
    with pytest.raises(DataValidationError) as info:
        read_examples("pointwise", path)
    # blank lines are skipped but counted, so row == line number - 1
    assert str(info.value).startswith(f"{path}: row 2: line is not valid JSON")
    assert info.value.field is None


def test_non_object_row(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([json.dumps(pointwise_row()), "[1, 2]"])
    with pytest.raises(DataValidationError, match="row 1: expected an object, got a list"):
        read_examples("pointwise", path)


def test_all_invalid_rows_are_collected_into_one_error(write_jsonl: Callable[..., Path]) -> None:
    rows = [pointwise_row(label=9 if i % 2 else 1) for i in range(60)]
    path = write_jsonl(rows)
    with pytest.raises(DataValidationError) as info:
        read_examples("pointwise", path)
    err = info.value
    assert err.total == 30
    assert len(err.issues) == 20
    assert [issue.row for issue in err.issues] == list(range(1, 40, 2))
    text = str(err)
    assert text.startswith("30 invalid rows (rows are 0-based")
    assert f"  {path}: row 39, field 'output[0].answer.label.helpfulness'" in text
    assert err.detail.endswith("... and 10 more")
    assert text.endswith("hint: pass skip_invalid=True to drop invalid rows and count them in the data report")  # fmt: skip


def test_invalid_rows_are_collected_across_files(write_jsonl: Callable[..., Path]) -> None:
    first = write_jsonl([pointwise_row(label=8)], name="one.jsonl")
    second = write_jsonl([pointwise_row(), pointwise_row(query="")], name="two.jsonl")
    with pytest.raises(DataValidationError) as info:
        read_examples("pointwise", [first, second])
    assert [(i.file, i.row) for i in info.value.issues] == [(str(first), 0), (str(second), 1)]


def test_skip_invalid_drops_and_counts(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([pointwise_row(), pointwise_row(label=5), "not json", pointwise_row()])
    result = read_examples("pointwise", path, skip_invalid=True)
    assert len(result.examples) == 2
    assert result.rows_read == 4 and result.rows_used == 2
    assert [(d.row, d.reason, d.field) for d in result.dropped] == [
        (1, "invalid", "output[0].answer.label.helpfulness"),
        (2, "invalid", None),
    ]
    assert "expected an integer 0-4, got 5" in result.dropped[0].detail
    assert result.rows_read == result.rows_used + len(result.dropped)


def test_parquet_validation_reports_rows(write_parquet: Callable[..., Path]) -> None:
    rows = [pointwise_row(f"q{i}", label=i) for i in range(7)]  # labels 5 and 6 are bad
    path = write_parquet(rows)
    with pytest.raises(DataValidationError) as info:
        read_examples("pointwise", path)
    assert [(i.row, i.field) for i in info.value.issues] == [
        (5, "output[0].answer.label.helpfulness"),
        (6, "output[0].answer.label.helpfulness"),
    ]


def test_wrong_mode_for_file_is_an_answer_count_error(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([pairwise_row()])
    with pytest.raises(DataValidationError, match="pointwise rows need exactly 1 answer"):
        read_examples("pointwise", path)


def test_importing_data_pulls_in_no_heavy_systems() -> None:
    """House rule: data/ imports none of mlflow, ray, prefect (and transformers only lazily)."""
    import subprocess
    import sys

    code = (
        "import sys, judgeflow.data, judgeflow.samples; "
        "print(sorted(m for m in ('mlflow', 'ray', 'prefect', 'transformers', 'torch') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
