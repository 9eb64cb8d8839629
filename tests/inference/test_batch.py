"""`judgeflow judge`'s reading, resuming and writing, with replies scripted through the
`Generator` interface; the CLI on the real tiny model, interrupted and resumed, is in
test_claim.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from judgeflow.data.errors import DataError, DataValidationError
from judgeflow.inference.batch import judge_file, read_judge_rows


class Replies:
    """Answers `<score>n</score>` with n the prompt's position modulo 5; stops (like a kill)
    after `stop_after` calls; counts the prompts it judged."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.calls, self.judged, self.stop_after = 0, 0, stop_after

    def generate(self, prompts: Any, *, max_new_tokens: int, **_: Any) -> list[str]:
        if self.stop_after is not None and self.calls == self.stop_after:
            raise KeyboardInterrupt
        self.calls += 1
        self.judged += len(prompts)
        return [f"<think>t</think><score>{i % 5}</score>" for i in range(len(prompts))]


def _jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_columns_openjudge_and_rewardbench2_rows(tmp_path: Path) -> None:
    plain = _jsonl(tmp_path / "plain.jsonl", [{"id": "a", "query": "q", "response": "r"}, {"query": "q", "response": "s"}])  # fmt: skip
    assert [r["id"] for r in read_judge_rows(plain, "pointwise")[0]] == ["a", "1"]
    openjudge = {"input": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
                 "output": [{"answer": {"role": "assistant", "content": "r1"}},
                            {"answer": {"role": "assistant", "content": "r2", "label": {"preference": "B"}}}]}  # fmt: skip
    oj = _jsonl(tmp_path / "oj.jsonl", [openjudge])
    assert read_judge_rows(oj, "pairwise")[0] == [{"id": "0", "query": "q", "response_a": "r1", "response_b": "r2"}]  # fmt: skip
    assert [r["id"] for r in read_judge_rows(oj, "pointwise")[0]] == ["0/0", "0/1"]
    rb2 = _jsonl(tmp_path / "rb2.jsonl", [{"id": "x", "prompt": "q", "chosen": ["c"], "rejected": ["r1", "r2"]}])  # fmt: skip
    pairs = read_judge_rows(rb2, "pairwise")[0]
    assert [(p["id"], p["response_a"], p["response_b"]) for p in pairs] == [("x/0", "c", "r1"), ("x/1", "c", "r2")]  # fmt: skip
    assert [r["id"] for r in read_judge_rows(rb2, "pointwise")[0]] == ["x/chosen/0", "x/rejected/0", "x/rejected/1"]  # fmt: skip


def test_bad_rows_are_named_by_file_row_and_field_and_dropped_only_when_asked(
    tmp_path: Path,
) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text(
        json.dumps({"query": "q", "response": "r"}) + "\n"
        + json.dumps({"query": "q", "response": 3}) + "\n"
        + "{not json\n"
        + json.dumps({"id": "0", "query": "q", "response": "again"}) + "\n"
    )  # fmt: skip
    with pytest.raises(DataValidationError) as caught:
        read_judge_rows(data, "pointwise")
    text = str(caught.value)
    assert f"{data}: row 1, field 'response'" in text and "got int '3'" in text
    assert "row 2" in text and "row 3" in text and "also row 0" in text
    rows, dropped = read_judge_rows(data, "pointwise", skip_invalid=True)
    assert [r["id"] for r in rows] == ["0"] and [d.row for d in dropped] == [1, 2, 3]
    with pytest.raises(DataError, match="no row to judge"):
        read_judge_rows(_jsonl(tmp_path / "empty.jsonl", []), "pointwise")


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_every_row_gets_a_verdict_in_order(tmp_path: Path, suffix: str) -> None:
    data = _jsonl(tmp_path / "rows.jsonl", [{"query": "q", "response": f"r{i}"} for i in range(7)])
    out = str(tmp_path / f"verdicts{suffix}")
    summary = judge_file(Replies(), "pointwise", data, out, model="m", max_new_tokens=8, batch_size=3)  # fmt: skip
    verdicts = pq.read_table(out).to_pylist() if suffix == ".parquet" else [json.loads(line) for line in Path(out).read_text().splitlines()]  # fmt: skip
    assert [v["id"] for v in verdicts] == [str(i) for i in range(7)]
    assert [v["score"] for v in verdicts] == [0, 1, 2, 0, 1, 2, 0]  # batches of 3
    assert summary.total == 7 and summary.resumed == 0 and summary.format_failures == 0
    assert summary.verdicts == {"0": 3, "1": 2, "2": 2}
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["rows.jsonl", f"verdicts{suffix}"]
    )  # no progress file left


class PairReplies:
    """Pairwise replies, in order: pair 0 picks the same response in both orders, pair 1 names
    the same letter (the order changed the verdict), pair 2 fails the format in its swap."""

    def generate(self, prompts: Any, *, max_new_tokens: int, **_: Any) -> list[str]:
        replies = ["<better>A</better>", "<better>B</better>", "<better>A</better>",
                   "<better>A</better>", "<better>B</better>", "no verdict"]  # fmt: skip
        return [f"<think>t</think>{r}" for r in replies[: len(prompts)]]


def test_pairwise_summary_counts_order_changes_and_format_failures_apart(tmp_path: Path) -> None:
    rows = [{"query": "q", "response_a": f"a{i}", "response_b": f"b{i}"} for i in range(3)]
    data = _jsonl(tmp_path / "pairs.jsonl", rows)
    out = str(tmp_path / "verdicts.jsonl")
    summary = judge_file(PairReplies(), "pairwise", data, out, model="m", max_new_tokens=8, batch_size=3)  # fmt: skip
    verdicts = [json.loads(line) for line in Path(out).read_text().splitlines()]
    assert [(v["valid"], v["consistent"]) for v in verdicts] == [(True, True), (True, False), (False, False)]  # fmt: skip
    assert summary.format_failures == 1
    assert summary.inconsistent == 1  # pair 1 only: pair 2's swap wrote no verdict at all


def test_a_stopped_run_resumes_without_judging_a_recorded_row_again(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "rows.jsonl", [{"query": "q", "response": f"r{i}"} for i in range(10)])
    out = str(tmp_path / "verdicts.jsonl")
    args = {"model": "m", "max_new_tokens": 8, "batch_size": 3}
    with pytest.raises(KeyboardInterrupt):
        judge_file(Replies(stop_after=2), "pointwise", data, out, **args)
    assert not Path(out).exists()  # no half output
    progress = tmp_path / "verdicts.jsonl.judging.jsonl"
    with progress.open("a") as fh:
        fh.write('{"id": "6", "sco')  # killed in the middle of a line
    again = Replies()
    summary = judge_file(again, "pointwise", data, out, **args)
    assert summary.resumed == 6 and again.judged == 4
    ids = [json.loads(line)["id"] for line in Path(out).read_text().splitlines()]
    assert ids == [str(i) for i in range(10)]
    # killed before it wrote a line: starts afresh
    progress.write_text("")
    assert judge_file(Replies(), "pointwise", data, out, **args).resumed == 0
    # a progress file of other data is not mixed in
    with pytest.raises(KeyboardInterrupt):
        judge_file(Replies(stop_after=1), "pointwise", data, out, **args)
    data.write_text(data.read_text() + json.dumps({"query": "q", "response": "new"}) + "\n")
    with pytest.raises(DataError, match="unfinished judging of other data"):
        judge_file(Replies(), "pointwise", data, out, **args)


class GroupReplies:
    """Ranks every group B first: `B > A` and scores B 8, A 3 (two translations)."""

    def generate(self, prompts: Any, *, max_new_tokens: int, **_: Any) -> list[str]:
        return ["why\n### Final Ranking:\nB > A\n### Scores:\nA: 3, B: 8"] * len(prompts)


def test_grrm_groups_as_columns_or_towerblocks_rows(tmp_path: Path) -> None:
    plain = {"source": "Hallo.", "translations": ["Hi.", "Hello."], "source_lang": "de",
             "target_lang": "en"}  # fmt: skip
    tower = {"id": "t1", "src_text": "Bonjour.", "mt_texts": ["Hello.", "Good day."],
             "src_lang": "fr", "trg_lang": "en", "scores": [9, 5]}  # fmt: skip
    data = _jsonl(tmp_path / "groups.jsonl", [plain, tower])
    rows, _ = read_judge_rows(data, "grrm")
    assert rows[1] == {
        "id": "t1",
        "source": "Bonjour.",
        "translations": ["Hello.", "Good day."],
        "source_lang": "fr",
        "target_lang": "en",
    }  # fmt: skip  (scores not read)
    out = tmp_path / "ranked.parquet"
    summary = judge_file(GroupReplies(), "grrm", data, str(out), model="m", max_new_tokens=8, batch_size=2)  # fmt: skip
    ranked = pq.read_table(out).to_pylist()
    assert [(r["id"], r["ranking"], r["scores"], r["valid"]) for r in ranked] == [
        ("0", "B > A", [3, 8], True), ("t1", "B > A", [3, 8], True)]  # fmt: skip
    assert summary.verdicts == {"B": 2} and summary.format_failures == 0


def test_bad_grrm_rows_are_named_by_file_row_and_field(tmp_path: Path) -> None:
    rows = [{"src_text": "x", "mt_texts": ["one"], "src_lang": "de", "trg_lang": "en"},
            {"source": "x", "translations": ["a", "b"], "source_lang": "zz", "target_lang": "en"}]  # fmt: skip
    data = _jsonl(tmp_path / "groups.jsonl", rows)
    with pytest.raises(DataValidationError) as caught:
        read_judge_rows(data, "grrm")
    text = str(caught.value)
    assert "groups.jsonl" in text and "mt_texts" in text and "2 to 8 translations" in text
    assert "source_lang" in text and "zz" in text


def test_a_policy_is_refused_as_a_judge_before_anything_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judgeflow.config import ConfigError, load_config
    from judgeflow.stages.judge import start_judging_run

    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path))
    cfg = load_config("rlvr", profile="tiny")
    with pytest.raises(ConfigError, match="is a policy .mode rlvr., not a judge.*--mode rlvr"):
        start_judging_run(cfg, "models:/rlvr-policy@champion", "1", "rows.jsonl")
    assert not (tmp_path / "mlflow.db").exists()
