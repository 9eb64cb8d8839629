"""Bad input gets a clear error and loses nothing.

The corpus in `bad_inputs/` holds one malformed file per case, each listed with its reader and
expected error in `bad_inputs/expected.yaml` (the parquet cases are written by
`bad_inputs/generate.py` at test time). Every case fails naming the file, row and field, through
the Python API and the command line; with `skip_invalid` the bad rows are dropped and counted
and the good ones written. A JSONL case saved with a byte-order mark, CRLF line endings and
blank lines fails the same way, at its new line. Then huge fields, and outputs that cannot be
written.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from data_testrows import pointwise_row, resave
from typer.testing import CliRunner

import judgeflow.samples
from judgeflow.cli.typer_app import app
from judgeflow.config.hints import JUDGE_FLAGS, config_override
from judgeflow.data import (
    DataError,
    DataValidationError,
    OutputWriteError,
    prepare_grrm_rl,
    prepare_grrm_sft,
    prepare_judge,
)
from judgeflow.data.sft import prepare_sft_messages

CORPUS = Path(__file__).parent / "bad_inputs"
CASES: list[dict[str, Any]] = yaml.safe_load((CORPUS / "expected.yaml").read_text())["cases"]
SAMPLES = Path(judgeflow.samples.__file__).parent
runner = CliRunner()


def _case_id(case: dict[str, Any]) -> str:
    return f"{case['reader']}:{case['file']}"


def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("bad_inputs_generate", CORPUS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed cases and the generated ones, together in one folder."""
    folder = tmp_path_factory.mktemp("bad_inputs")
    for path in CORPUS.iterdir():
        if path.suffix in (".jsonl", ".json", ".parquet"):
            shutil.copy(path, folder / path.name)
    _load_generator().generate(folder)
    return folder


@dataclass(frozen=True)
class Outcome:
    """What a run with `skip_invalid` wrote and reported."""

    dropped: int
    written: int
    listed: list[tuple[int, str | None]]  # (row, field) of the dropped rows the report lists
    output: Path


def _run(
    reader: str, path: Path, out_dir: Path, *, skip_invalid: bool = False, fmt: str = "auto"
) -> Outcome:
    """Read `path` with `reader` (see expected.yaml) into `out_dir/out.parquet`."""
    out = out_dir / "out.parquet"
    if reader in ("judge-pointwise", "judge-pairwise"):
        mode = reader.removeprefix("judge-")
        judge = prepare_judge(mode, [path], out, skip_invalid=skip_invalid, input_format=fmt)
        counts, listed = judge.report["counts"], judge.report["dropped"]["listed"]
        dropped, written = counts["rows_dropped"]["invalid"], counts["rows_written"]["train"]
    elif reader == "judge-sft":
        report = prepare_sft_messages([path], out, skip_invalid=skip_invalid).report
        counts, listed = report["counts"], report["dropped"]
        dropped, written = counts["rows_dropped"], counts["rows_written"]
    else:
        prepare = prepare_grrm_sft if reader == "grrm-sft" else prepare_grrm_rl
        report = prepare(path, out, skip_invalid=skip_invalid).report
        counts, listed = report["counts"], report["dropped"]["listed"]
        dropped, written = counts["rows_dropped"], counts["rows_written"]
    return Outcome(dropped, written, [(d["row"], d["field"]) for d in listed], out)


def _cli_args(reader: str, path: Path, out: Path) -> list[str] | None:
    """The `judgeflow prepare …` command for `reader` (the judge SFT rows have none)."""
    if reader.startswith("judge-") and reader != "judge-sft":
        mode = reader.removeprefix("judge-")
        return ["prepare", "judge", "--mode", mode, "--input", str(path), "--output", str(out)]
    if reader.startswith("grrm-"):
        return ["prepare", reader, "--input", str(path), "--output", str(out)]
    return None


# --------------------------------------------------------------------------- the corpus


def test_every_corpus_file_is_a_listed_case(corpus: Path) -> None:
    listed = [case["file"] for case in CASES]
    assert len(listed) == len(set(listed)), "a file is listed twice"
    assert sorted(listed) == sorted(p.name for p in corpus.iterdir())
    committed = sum(p.stat().st_size for p in CORPUS.glob("*.jsonl"))
    assert committed < 20_000  # small enough to read in review


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_bad_input_fails_naming_file_row_and_field(
    case: dict[str, Any], corpus: Path, tmp_path: Path
) -> None:
    path = corpus / case["file"]
    with pytest.raises(DataError) as info:
        _run(case["reader"], path, tmp_path)
    error, text = info.value, str(info.value)
    assert str(path) in text
    if case["row"] is None:  # the file as a whole cannot be read
        assert not isinstance(error, DataValidationError)
        assert re.search(case["error"], text), text
    else:
        assert isinstance(error, DataValidationError), text
        assert (error.file, error.row, error.field) == (str(path), case["row"], case["field"])
        assert re.search(case["error"], error.message), error.message
        assert f"{path}: row {case['row']}" in text
        assert "hint: pass skip_invalid=True" in text
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary file left
    if "format" in case:  # auto-detection says exactly what the explicit format says
        with pytest.raises(DataError) as explicit:
            _run(case["reader"], path, tmp_path, fmt=case["format"])
        assert str(explicit.value) == text


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_skip_invalid_drops_and_counts_the_bad_rows(
    case: dict[str, Any], corpus: Path, tmp_path: Path
) -> None:
    path = corpus / case["file"]
    if case["skipped"] is None:  # nothing left to write, or an unreadable file: still an error
        with pytest.raises(DataError) as info:
            _run(case["reader"], path, tmp_path, skip_invalid=True)
        assert str(path) in str(info.value)
        if case["row"] is not None:
            assert re.search(case["error"], str(info.value)), str(info.value)
        assert list(tmp_path.iterdir()) == []
        return
    outcome = _run(case["reader"], path, tmp_path, skip_invalid=True)
    assert (outcome.dropped, outcome.written) == (
        case["skipped"]["dropped"],
        case["skipped"]["written"],
    )
    assert (case["row"], case["field"]) in outcome.listed
    assert pq.read_metadata(outcome.output).num_rows == outcome.written


@pytest.mark.parametrize(
    "case", [c for c in CASES if _cli_args(c["reader"], Path(), Path())], ids=_case_id
)
def test_the_command_line_names_file_row_and_its_own_flags(
    case: dict[str, Any], corpus: Path, tmp_path: Path
) -> None:
    path, out = corpus / case["file"], tmp_path / "out.parquet"
    args = _cli_args(case["reader"], path, out)
    assert args is not None
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"error: {path}" in result.output or f"  {path}" in result.output
    assert "skip_invalid=True" not in result.output and "input_format=" not in result.output
    if case["row"] is not None:
        assert f"{path}: row {case['row']}" in result.output
        assert "hint: pass --skip-invalid to drop invalid rows" in result.output
    if case["file"] == "oj_wrong_schema.parquet":
        assert "hint: pass --format openjudge or --format rewardbench2" in result.output
    if case["file"] == "grrm_wrong_schema.parquet":
        assert "hint: pass --mt-key … to name the column of the candidate translations" in (
            result.output
        )
    if case["skipped"] is not None:
        skipped = runner.invoke(app, [*args, "--skip-invalid"])
        assert skipped.exit_code == 0, skipped.output
        assert pq.read_metadata(out).num_rows == case["skipped"]["written"]
        assert "dropped {" in skipped.output


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c["file"].endswith(".jsonl") and c["row"] is not None],
    ids=_case_id,
)
def test_a_bom_crlf_and_blank_lines_keep_the_error_and_its_line(
    case: dict[str, Any], corpus: Path, tmp_path: Path
) -> None:
    """The case as a spreadsheet tool on Windows saves it: the byte-order mark and the `\\r`s
    are not errors, and the row an error names is still the line's (blank lines counted)."""
    path = tmp_path / "resaved" / case["file"]
    path.parent.mkdir()
    original = (corpus / case["file"]).read_bytes()
    path.write_bytes(resave(original, bom=True, crlf=True, blank_lines=True))
    with pytest.raises(DataValidationError) as info:
        _run(case["reader"], path, tmp_path)
    error = info.value
    assert (error.file, error.row, error.field) == (str(path), 2 * case["row"], case["field"])
    assert re.search(case["error"], error.message), error.message
    if case["skipped"] is not None:
        outcome = _run(case["reader"], path, tmp_path, skip_invalid=True)
        assert (outcome.dropped, outcome.written) == (
            case["skipped"]["dropped"],
            case["skipped"]["written"],
        )
        assert (2 * case["row"], case["field"]) in outcome.listed


# --------------------------------------------------------------------------- hints


def test_hints_name_each_front_ends_options(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(DataValidationError) as info:
        _run("judge-pointwise", corpus / "oj_label_out_of_range.jsonl", tmp_path)
    error = info.value
    assert error.render().endswith("hint: pass skip_invalid=True to drop invalid rows and count them in the data report")  # fmt: skip
    assert "hint: pass --skip-invalid to drop" in error.render(JUDGE_FLAGS)
    assert "hint: pass --set data.skip_invalid=true to drop" in error.render(config_override)
    with pytest.raises(DataError) as detect:
        _run("judge-pointwise", corpus / "oj_wrong_schema.parquet", tmp_path)
    assert "input_format='openjudge' or input_format='rewardbench2'" in str(detect.value)
    assert "--set data.format=openjudge or --set data.format=rewardbench2" in (
        detect.value.render(config_override)
    )


def test_errors_keep_their_hints_through_pickling(corpus: Path, tmp_path: Path) -> None:
    """A flow's or a Ray worker's error reaches the command line whole."""
    import pickle

    with pytest.raises(DataValidationError) as info:
        _run("grrm-rl", corpus / "grrm_invalid_utf8_line.jsonl", tmp_path)
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is DataValidationError
    assert str(again) == str(info.value) and again.issues == info.value.issues
    assert again.render(config_override) == info.value.render(config_override)


# --------------------------------------------------------------------------- huge fields

TEN_MB = 10 * 1024 * 1024


def test_a_10_mb_response_is_written_whole_or_filtered_and_counted(
    tmp_path: Path, tiny_tokenizer: Any
) -> None:
    huge = "word " * (TEN_MB // 5)
    source = tmp_path / "huge.jsonl"
    rows = [pointwise_row("q0"), pointwise_row("q1", response=huge), pointwise_row("q2")]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))

    whole = prepare_judge("pointwise", [source], tmp_path / "whole.parquet")
    prompts = [r["prompt"][0]["content"] for r in pq.read_table(whole.train_path).to_pylist()]
    assert huge in prompts[1]  # not truncated

    # The length filter drops it and counts it. Measured on a tenth of it (a megabyte, 250
    # times the limit): tokenizing all 10 MB takes a minute and tells nothing more.
    rows[1] = pointwise_row("q1", response=huge[: TEN_MB // 10])
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    filtered = prepare_judge(
        "pointwise", [source], tmp_path / "filtered.parquet",
        tokenizer=tiny_tokenizer, max_prompt_length=4096,
    )  # fmt: skip
    report = filtered.report
    assert report["dropped"]["by_reason"]["prompt_too_long"] == 1
    assert report["dropped"]["listed"][0]["row"] == 1
    assert report["counts"]["rows_written"]["train"] == 2


def test_huge_grrm_and_sft_texts_are_kept_whole(tmp_path: Path) -> None:
    huge = "Wort " * (TEN_MB // 5)
    groups = [
        {"src_text": "A sentence.", "src_lang": "en", "trg_lang": "de",
         "mt_texts": ["Ein Satz.", huge], "scores": [9, 1], "analysis": "A is better."},
    ]  # fmt: skip
    source = tmp_path / "groups.jsonl"
    source.write_text("".join(json.dumps(g) + "\n" for g in groups))
    rl = prepare_grrm_rl(source, tmp_path / "rl.parquet")
    assert huge in pq.read_table(rl.output_path).column("prompt").to_pylist()[0][0]["content"]

    sft_source = tmp_path / "sft.jsonl"
    turns = [
        {"role": "user", "content": huge},
        {"role": "assistant", "content": "<score>1</score>"},
    ]
    sft_source.write_text(json.dumps({"messages": turns}) + "\n")
    sft = prepare_sft_messages([sft_source], tmp_path / "sft.parquet")
    assert pq.read_table(sft.output_path).column("messages").to_pylist()[0][0]["content"] == huge


# --------------------------------------------------------------------------- unwritable outputs


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_output_under_a_file_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be\n")
    out = blocker / "prepared" / "out.parquet"
    source = SAMPLES / "openjudge_pointwise.jsonl"
    with pytest.raises(OutputWriteError) as info:
        prepare_judge("pointwise", [source], out)
    assert info.value.errno in (errno.ENOTDIR, errno.EEXIST) and isinstance(info.value, OSError)
    assert str(info.value).startswith(f"{out}: cannot write the output")
    with pytest.raises(OutputWriteError, match="choose another output location"):
        prepare_grrm_rl(SAMPLES / "grrm" / "train.jsonl", out)
    assert _leftovers(tmp_path) == ["not-a-dir"]

    result = runner.invoke(
        app,
        ["prepare", "judge", "--mode", "pointwise", "--input", str(source), "--output", str(out)],
    )
    assert result.exit_code == 2 and "cannot write the output" in result.output


def test_a_directory_in_the_way_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "out.parquet").mkdir()
    with pytest.raises(OutputWriteError, match=r"out\.parquet: cannot write the output"):
        prepare_judge("pointwise", [SAMPLES / "openjudge_pointwise.jsonl"], tmp_path / "out.parquet")  # fmt: skip
    with pytest.raises(OutputWriteError):
        prepare_grrm_sft(SAMPLES / "grrm" / "train.jsonl", tmp_path / "out.parquet")
    assert _leftovers(tmp_path) == ["out.parquet"]
    assert list((tmp_path / "out.parquet").iterdir()) == []


def _limit_file_size() -> None:
    """In the child: no file may grow past 4 KiB (EFBIG: a full disk's twin, from the kernel)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


@pytest.mark.parametrize(
    ("command", "source"),
    [
        (["prepare", "judge", "--mode", "pointwise"], SAMPLES / "tinyjudge_pointwise.jsonl"),
        (["prepare", "grrm-rl", "--shuffle-augment", "2"], SAMPLES / "grrm" / "train.jsonl"),
    ],
    ids=["judge", "grrm-rl"],
)
def test_a_write_that_runs_out_of_space_publishes_nothing(
    command: list[str], source: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code = "import sys; from judgeflow.cli.typer_app import app; sys.argv[0] = 'judgeflow'; app()"
    args = [*command, "--input", str(source), "--output", str(out_dir / "data.parquet")]
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True, text=True, timeout=300, preexec_fn=_limit_file_size,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{out_dir / 'data.parquet'}: cannot write the output: File too large" in result.stderr
    assert _leftovers(out_dir) == []  # neither the file nor its temporary twin


def test_an_unknown_grrm_file_type_names_the_format_flag(tmp_path: Path) -> None:
    source = tmp_path / "groups.txt"
    shutil.copy(SAMPLES / "grrm" / "train.jsonl", source)
    out = tmp_path / "rl.parquet"
    result = runner.invoke(
        app, ["prepare", "grrm-rl", "--input", str(source), "--output", str(out)]
    )
    assert result.exit_code == 2
    assert f"{source}: cannot tell the format from the name" in result.output
    assert "hint: pass --format parquet or --format jsonl to say how to read it" in result.output
    fixed = runner.invoke(
        app,
        ["prepare", "grrm-rl", "--input", str(source), "--output", str(out), "--format", "jsonl"],
    )
    assert fixed.exit_code == 0, fixed.output


def test_a_sharded_run_cuts_a_file_with_undecodable_bytes_like_a_single_run(
    corpus: Path, tmp_path: Path
) -> None:
    from judgeflow.data import prepare_grrm_rl_sharded

    source = corpus / "grrm_invalid_utf8_line.jsonl"
    single = prepare_grrm_rl(source, tmp_path / "one.parquet", batch_size=1, skip_invalid=True)
    sharded = prepare_grrm_rl_sharded(
        source, tmp_path / "many.parquet", 3, batch_size=1, skip_invalid=True
    )
    assert sharded.report["output"]["sha256"] == single.report["output"]["sha256"]
    assert sharded.report["dropped"]["listed"] == single.report["dropped"]["listed"]
