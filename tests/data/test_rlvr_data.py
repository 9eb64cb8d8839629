"""open-instruct's RLVR rows to verl RL parquet: checked row by row, split by prompt, and what
is written is what verl's dataset and the RLVR reward read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from judgeflow.data.errors import DataValidationError
from judgeflow.data.rlvr import prepare_rlvr, read_rlvr
from judgeflow.rewards.rlvr.score import compute_score

SAMPLE = (
    Path(__file__).resolve().parents[2] / "src/judgeflow/samples/rlvr/open_instruct_mixed.jsonl"
)


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _row(content: str = "What is 2+2?", truth: Any = "4", dataset: Any = "gsm8k") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}], "ground_truth": truth,
            "dataset": dataset}  # fmt: skip


def test_the_shipped_sample_is_read_whole() -> None:
    read = read_rlvr(SAMPLE)
    assert read.rows_read == 12 and len(read.examples) == 12 and read.dropped == []
    verifiers = sorted({v for ex in read.examples for v in ex.verifiers})
    assert verifiers == ["flan", "gsm8k", "ifeval_old", "math", "string_matcher"]
    # The row with a reference answer: the assistant turn is not part of the prompt.
    solved = next(ex for ex in read.examples if "2x + 3" in ex.messages[-1][1])
    assert [role for role, _ in solved.messages] == ["user"]
    several = next(ex for ex in read.examples if len(ex.verifiers) == 2)
    assert several.verifiers == ("gsm8k", "string_matcher") and several.labels == ("24", "24 legs")


def test_prepared_rows_pay_through_the_rlvr_reward(tmp_path: Path) -> None:
    result = prepare_rlvr(SAMPLE, tmp_path / "rlvr.parquet", val_fraction=0.25, seed=3)
    rows = pq.read_table(result.train_path).to_pylist() + pq.read_table(result.val_path).to_pylist()
    assert len(rows) == 12
    assert result.report["counts"]["rows_written"] == {"train": 9, "val": 3}
    # A right answer for four of the rows, by label: each is paid through its parquet row.
    right = {"36": "So the total is 36", "\\frac{3}{4}": r"\boxed{\frac{3}{4}}",
             "Mars": "<answer>Mars</answer>", "no": "The answer is: no"}  # fmt: skip
    paid = 0
    for row in rows:
        labels = row["reward_model"]["ground_truth"]
        if len(labels) == 1 and labels[0] in right:
            out = compute_score(row["data_source"], right[labels[0]], labels, row["extra_info"],
                                r1_style_format="off")  # fmt: skip
            assert out["score"] == 10.0, row
            wrong = compute_score(row["data_source"], "I am not sure", labels, row["extra_info"],
                                  r1_style_format="off")  # fmt: skip
            assert wrong["score"] == 0.0, row
            paid += 1
    assert paid == 4


def test_validation_never_shares_a_prompt_with_training(tmp_path: Path) -> None:
    system = {"role": "system", "content": "Be brief."}
    under_a_system_prompt = {
        **_row("SAME prompt?"),
        "messages": [system, *_row("SAME prompt?")["messages"]],
    }
    rows = [_row("Same prompt?"), _row("same   PROMPT?", "5"), under_a_system_prompt,
            *(_row(f"Q{i}") for i in range(6))]  # fmt: skip
    result = prepare_rlvr(_write(tmp_path / "d.jsonl", rows), tmp_path / "o.parquet",
                          val_fraction=0.5, seed=0)  # fmt: skip
    hashes = {
        split: {r["extra_info"]["prompt_hash"] for r in pq.read_table(path).to_pylist()}
        for split, path in (("train", result.train_path), ("val", result.val_path))
    }
    assert hashes["train"] and hashes["val"] and not hashes["train"] & hashes["val"]
    assert (
        result.report["splits"]["train"]["prompts"] + result.report["splits"]["val"]["prompts"] == 7
    )  # the two spellings of one prompt are one


BAD = [
    ({"ground_truth": "4", "dataset": "gsm8k"}, "messages", "missing messages"),
    (
        {**_row(), "messages": [{"role": "bot", "content": "x"}]},
        "messages[0].role",
        "expected one of",
    ),
    (
        {**_row(), "messages": [{"role": "user", "content": " "}]},
        "messages[0]",
        "non-empty user turn",
    ),
    (_row(dataset="rubric"), "dataset", "no verifier 'rubric'"),
    (_row(dataset="code", truth="[]"), "ground_truth", "code: expected a non-empty list of test"),
    (_row(dataset="code", truth="not tests"), "ground_truth", "code: the tests are neither JSON"),
    (
        _row(dataset="code_stdio", truth=["assert f()"]),
        "ground_truth",
        'code_stdio: expected a non-empty list of objects {"input"',
    ),
    (_row(dataset=["gsm8k", "math"], truth=["4"]), "ground_truth", "2 dataset(s) need as many"),
    (_row(dataset="math", truth=4), "ground_truth", "math: expected a non-empty string"),
    (_row(dataset="ifeval_old", truth='{"func_name": "nope"}'), "ground_truth", "ifeval_old"),
    (_row(dataset="ifeval_old", truth="{not json"), "ground_truth", "not JSON"),
    (_row(dataset=["gsm8k", 7], truth=["4", "5"]), "dataset[1]", "expected a verifier name"),
    (
        _row(dataset=["re_search"], truth=[[]]),
        "ground_truth",
        "re_search: expected non-empty strings",
    ),
    (_row(dataset="re_search_f1", truth="[]"), "ground_truth", "an empty list of answers"),
    (
        _row(dataset=["string_f1"], truth=[["a"]]),
        "ground_truth",
        "string_f1: expected a non-empty string",
    ),
    (_row(dataset="max_length", truth="long"), "ground_truth", "max_length: expected a length"),
    (_row(dataset="up_to_max_length", truth="nan"), "ground_truth", "expected a length in tokens"),
    (_row(dataset="max_length", truth=True), "ground_truth", "expected a length in tokens"),
    ([1, 2], None, "expected an object"),
]


def test_every_invalid_row_is_named_with_its_field_and_reported_together(tmp_path: Path) -> None:
    data = _write(tmp_path / "bad.jsonl", [_row(), *(r for r, _, _ in BAD)])
    (tmp_path / "out.parquet").write_bytes(b"kept")
    with pytest.raises(DataValidationError) as err:
        prepare_rlvr(data, tmp_path / "out.parquet")
    issues = err.value.issues
    assert [(i.row, i.field) for i in issues] == [(n + 1, f) for n, (_, f, _) in enumerate(BAD)]
    for issue, (_, _, said) in zip(issues, BAD, strict=True):
        assert said in issue.message and issue.file == str(data)
    assert (tmp_path / "out.parquet").read_bytes() == b"kept"  # nothing half-written


def test_skip_invalid_drops_and_lists_them(tmp_path: Path) -> None:
    data = _write(tmp_path / "bad.jsonl", [_row(), _row("Q2"), _row(dataset="rubric")])
    result = prepare_rlvr(data, tmp_path / "out.parquet", skip_invalid=True)
    assert result.report["counts"]["rows_read"] == 3
    assert result.report["counts"]["rows_dropped"] == {"invalid": 1, "prompt_too_long": 0}
    assert result.report["counts"]["rows_written"] == {"train": 2}
    [dropped] = result.report["dropped"]["listed"]
    assert (dropped["row"], dropped["field"], dropped["reason"]) == (2, "dataset", "invalid")


def test_labels_are_stored_as_the_verifier_reads_them(tmp_path: Path) -> None:
    rows = [_row(truth=12), _row("Q", dataset="ifeval_old", truth={"func_name": "validate_lowercase",
                                                                  "N": None})]  # fmt: skip
    read = read_rlvr(_write(tmp_path / "d.jsonl", rows), remap_verifier={"numbers": "gsm8k"})
    assert read.examples[0].labels == ("12",)  # open-instruct compares str(label)
    assert json.loads(read.examples[1].labels[0]) == {"func_name": "validate_lowercase", "N": None}
    lengths = read_rlvr(_write(tmp_path / "l.jsonl", [
        _row(dataset="max_length", truth=512), _row("Q2", dataset="up_to_max_length", truth=" 64 "),
    ]))  # fmt: skip
    assert [ex.labels for ex in lengths.examples] == [("512",), ("64",)]  # float() reads them
    search = read_rlvr(_write(tmp_path / "s.jsonl", [_row(dataset=["re_search_f1"],
                                                          truth=[["Paris", "Lyon"]])]))  # fmt: skip
    assert search.examples[0].labels == ('["Paris", "Lyon"]',)  # JSON, as the verifier parses it
    from judgeflow.rewards.rlvr import verify

    assert verify("re_search_f1", "<finish>Lyon</finish>", search.examples[0].labels[0]) == 1.0
    remapped = read_rlvr(_write(tmp_path / "r.jsonl", [_row(dataset="Numbers")]),
                         remap_verifier={"numbers": "gsm8k"})  # fmt: skip
    assert remapped.examples[0].verifiers == ("gsm8k",)


def test_code_rows_keep_their_tests_as_json_in_open_instructs_three_forms(tmp_path: Path) -> None:
    """open-instruct's code rows: one `dataset`, the ground truth the list of tests (a list,
    its JSON, or the compressed form); a string dataset wraps the whole list, as there."""
    import base64
    import pickle
    import zlib

    tests = ["assert f(1) == 2", "assert f(0) == 1"]
    stdio = [{"input": "1\n", "output": "2\n"}]
    packed = base64.b64encode(zlib.compress(pickle.dumps(tests))).decode()
    rows = [_row(dataset="code", truth=tests), _row("Q2", dataset="code", truth=json.dumps(tests)),
            _row("Q3", dataset="code", truth=packed), _row("Q4", dataset="code_stdio", truth=stdio)]  # fmt: skip
    read = read_rlvr(_write(tmp_path / "c.jsonl", rows))
    assert [ex.verifiers for ex in read.examples] == [("code",)] * 3 + [("code_stdio",)]
    assert [json.loads(ex.labels[0]) for ex in read.examples] == [tests] * 3 + [stdio]
    from judgeflow.rewards.rlvr import verify

    assert verify("code", "def f(x):\n    return x + 1", read.examples[2].labels[0]) == 1.0


def test_verl_rlhf_dataset_loads_the_prepared_file(tmp_path: Path, tiny_tokenizer: Any) -> None:
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    result = prepare_rlvr(SAMPLE, tmp_path / "rlvr.parquet")
    config = OmegaConf.create({"max_prompt_length": 512, "filter_overlong_prompts": True,
                               "truncation": "error", "return_raw_chat": True,
                               "cache_dir": str(tmp_path / "cache")})  # fmt: skip
    dataset = RLHFDataset(data_files=[result.train_path], tokenizer=tiny_tokenizer, config=config)
    assert len(dataset) == 12
    item = dataset[11]
    assert item["reward_model"]["ground_truth"] == ["24", "24 legs"]
    assert item["extra_info"]["dataset"] == ["gsm8k", "string_matcher"]


def test_prompts_over_the_limit_are_dropped_counted_and_listed(
    tmp_path: Path, tiny_tokenizer: Any
) -> None:
    """Counted as verl counts them: the chat-templated prompt's tokens."""
    from judgeflow.data.prompt_tokens import prompt_lengths

    long_question = "How many legs " + "does a very long-legged spider have " * 20 + "?"
    data = _write(tmp_path / "d.jsonl", [_row(), _row(long_question), _row("Q3")])
    limit = 40
    [short, long_] = prompt_lengths(tiny_tokenizer, [[{"role": "user", "content": c}]
                                                     for c in ("What is 2+2?", long_question)])  # fmt: skip
    assert short <= limit < long_
    result = prepare_rlvr(data, tmp_path / "out.parquet", tokenizer=tiny_tokenizer,
                          max_prompt_length=limit)  # fmt: skip
    counts = result.report["counts"]
    assert counts["rows_dropped"] == {"invalid": 0, "prompt_too_long": 1}
    assert counts["rows_written"] == counts["examples_written"] == {"train": 2}
    assert result.report["dropped"]["by_reason"] == {"prompt_too_long": 1}
    [dropped] = result.report["dropped"]["listed"]
    assert (dropped["row"], dropped["reason"]) == (1, "prompt_too_long")
    assert f"{long_} tokens" in dropped["detail"]
    assert len(pq.read_table(result.train_path)) == 2


def test_a_limit_that_leaves_nothing_says_so(tmp_path: Path, tiny_tokenizer: Any) -> None:
    from judgeflow.data.errors import DataError

    data = _write(tmp_path / "d.jsonl", [_row(), _row("Q2")])
    with pytest.raises(DataError, match="2 dropped .2 longer than max_prompt_length=3"):
        prepare_rlvr(data, tmp_path / "out.parquet", tokenizer=tiny_tokenizer, max_prompt_length=3)


def test_a_mix_with_verifiers_judgeflow_lacks_names_each_and_skipping_counts_them(
    tmp_path: Path,
) -> None:
    """An open-instruct mix (math, rubric, general-quality): preparation stops naming each
    verifier judgeflow does not have, how many rows name it, and the ones it has; with
    skip_invalid the rows go, counted by verifier in the report."""
    rows = [_row(), _row("Q1", dataset="rubric", truth="[]"), _row("Q2", dataset="general-quality"),
            _row("Q3", dataset="RUBRIC", truth="[]"), _row("Q4")]  # fmt: skip
    data = _write(tmp_path / "mix.jsonl", rows)
    with pytest.raises(DataValidationError) as err:
        prepare_rlvr(data, tmp_path / "out.parquet")
    said = str(err.value)
    assert said.startswith(
        f"2 verifier(s) judgeflow does not have: general-quality: 1 row(s), first {data} row 2; "
        f"rubric: 2 row(s), first {data} row 1. It has: code, code_stdio, flan, gsm8k,"
    ), said
    assert "3 invalid rows" in said and "skip_invalid" in said
    result = prepare_rlvr(data, tmp_path / "out.parquet", skip_invalid=True)
    assert result.report["dropped"]["unknown_verifiers"] == {"rubric": 2, "general-quality": 1}
    assert result.report["counts"]["rows_written"] == {"train": 2}


def test_a_row_an_llm_judge_pays_carries_the_conversation_as_open_instruct_shows_it(
    tmp_path: Path,
) -> None:
    """An LM-judge row (general-quality_ref) prepared for an LLM judge: its label is the
    reference, and `extra_info.raw_query` is open-instruct's raw prompt (each turn
    `role: content`, one a line), what its LM judge is shown as the conversation."""
    from judgeflow.rewards.rlvr.llm_judge import LLM_VERIFIERS

    row = {"messages": [{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "Name a red fruit."}],
           "ground_truth": "A strawberry.", "dataset": "general-quality_ref"}  # fmt: skip
    data = _write(tmp_path / "judged.jsonl", [row, _row()])
    result = prepare_rlvr(data, tmp_path / "out.parquet", judge_datasets=LLM_VERIFIERS)
    rows = pq.read_table(result.train_path).to_pylist()
    judged = next(r for r in rows if r["data_source"] == "general-quality_ref")
    assert judged["reward_model"]["ground_truth"] == ["A strawberry."]
    assert judged["extra_info"]["raw_query"] == "system: Be brief.\nuser: Name a red fruit."
    assert judged["extra_info"]["query"] == "Name a red fruit."


def test_an_lm_judge_row_with_no_judge_says_what_pays_it_or_why_nothing_does(
    tmp_path: Path,
) -> None:
    rows = [_row(dataset="general-quality"), _row(dataset="general-refusal")]
    with pytest.raises(DataValidationError) as err:
        prepare_rlvr(_write(tmp_path / "lm.jsonl", rows), tmp_path / "out.parquet")
    said = [i.message for i in err.value.issues]
    assert "an LLM pays it with reward.judge_mode=llm and reward.judge_url" in said[0]
    assert "judgeflow does not pay general-refusal: " in said[1] and "literal text" in said[1]
