"""prepare_judge: verl rows, splits, position balancing, length filter, report, atomic writes.

Both A/B orders of pairwise validation data, prompt hashes and the duplicates report are in
`test_data_prepare_decontamination.py`."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data_testrows import pairwise_row, pointwise_row, rb2_row

import judgeflow.data.io as data_io
from judgeflow.data import (
    DataError,
    DataValidationError,
    PrepareResult,
    atomic_write_text,
    prepare_judge,
    render_pairwise,
    render_pointwise,
)
from judgeflow.data.prompt_hashes import judge_prompt_hash
from judgeflow.samples import sample_path


def _rows(path: str | Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


def _check_invariants(result: PrepareResult) -> None:
    counts = result.report["counts"]
    rows_dropped = sum(counts["rows_dropped"].values())
    assert counts["rows_read"] == counts["rows_used"] + rows_dropped
    written = sum(counts["examples_written"].values())
    assert counts["examples_built"] == written + sum(counts["examples_dropped"].values())
    assert result.report["dropped"]["total"] == rows_dropped + sum(
        counts["examples_dropped"].values()
    )


# --------------------------------------------------------------------------- verl rows


def test_pointwise_rows_have_verl_shape(write_jsonl: Callable[..., Path], tmp_path: Path) -> None:
    src = write_jsonl(
        [pointwise_row("What is 2 + 2?", "4", 3), pointwise_row("Why?", "Because.", 0)]
    )
    result = prepare_judge("pointwise", src, tmp_path / "out" / "judge.parquet")
    assert result.train_path == str(tmp_path / "out" / "judge.parquet")
    assert result.val_path is None
    assert result.report_path == str(tmp_path / "out" / "judge.report.json")
    rows = _rows(result.train_path)
    assert rows[0] == {
        "data_source": "unit",
        "prompt": [{"role": "user", "content": render_pointwise("What is 2 + 2?", "4")}],
        "ability": "judge/pointwise",
        "reward_model": {"style": "rule", "ground_truth": {"helpfulness": 3}},
        "extra_info": {
            "split": "train",
            "index": 0,
            "pair": None,  # pointwise: no A/B pair
            "source_file": str(src),
            "source_row": 0,
            "source_id": None,
            "subset": None,
            "chosen_index": None,
            "rejected_index": None,
            "swapped": False,
            "label": 3,
            "prompt_hash": judge_prompt_hash("What is 2 + 2?", ["4"]),
        },
    }
    assert rows[1]["extra_info"]["index"] == 1
    schema = pq.read_schema(result.train_path)
    assert schema.field("prompt").type == pa.list_(
        pa.struct([("role", pa.string()), ("content", pa.string())])
    )
    assert pa.types.is_struct(schema.field("reward_model").type)
    assert pa.types.is_struct(schema.field("extra_info").type)


def test_pairwise_rows_from_rewardbench2_sample(tmp_path: Path) -> None:
    result = prepare_judge("pairwise", sample_path("rewardbench2.jsonl"), tmp_path / "rb.parquet")
    rows = _rows(result.train_path)
    first = rows[0]
    assert first["ability"] == "judge/pairwise"
    assert first["data_source"] == "rewardbench2"
    assert first["reward_model"] == {"style": "rule", "ground_truth": {"preference": "A"}}
    info = first["extra_info"]
    assert (info["source_id"], info["subset"], info["chosen_index"], info["rejected_index"]) == (
        "0",
        "Factuality",
        0,
        0,
    )
    src = [json.loads(line) for line in sample_path("rewardbench2.jsonl").read_text().splitlines()]
    assert first["prompt"][0]["content"] == render_pairwise(
        src[0]["prompt"], src[0]["chosen"][0], src[0]["rejected"][0]
    )
    report = result.report
    assert report["counts"]["rows_dropped"]["tie"] == sum(r["subset"] == "Ties" for r in src)
    assert report["formats"] == ["rewardbench2"]
    _check_invariants(result)


def test_rewardbench2_pointwise_labels_follow_parameters(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    src = write_jsonl([rb2_row(0, chosen=["c"], rejected=["r0", "r1"])])
    result = prepare_judge(
        "pointwise", src, tmp_path / "p.parquet", chosen_label=3, rejected_label=1
    )
    rows = _rows(result.train_path)
    assert [r["reward_model"]["ground_truth"]["helpfulness"] for r in rows] == [3, 1, 1]
    assert result.report["splits"]["train"]["labels"] == {"0": 0, "1": 2, "2": 0, "3": 1, "4": 0}


# --------------------------------------------------------------------------- split


def _pointwise_file(write_jsonl: Callable[..., Path], n: int) -> Path:
    return write_jsonl([pointwise_row(f"question {i}", f"answer {i}", i % 5) for i in range(n)])


@pytest.mark.parametrize(
    ("n", "fraction", "n_val"), [(20, 0.25, 5), (10, 0.01, 1), (7, 0.5, 4), (2, 0.9, 1)]
)
def test_val_split_sizes(
    write_jsonl: Callable[..., Path], tmp_path: Path, n: int, fraction: float, n_val: int
) -> None:
    result = prepare_judge(
        "pointwise", _pointwise_file(write_jsonl, n), tmp_path / "j.parquet", val_fraction=fraction
    )
    assert result.val_path == str(tmp_path / "j.val.parquet")
    train, val = _rows(result.train_path), _rows(result.val_path)
    assert (len(train), len(val)) == (n - n_val, n_val)
    assert {r["extra_info"]["split"] for r in train} == {"train"}
    assert {r["extra_info"]["split"] for r in val} == {"val"}
    assert [r["extra_info"]["index"] for r in val] == list(range(n_val))
    # no row lost or duplicated, and both splits keep input order
    rows_seen = sorted(r["extra_info"]["source_row"] for r in train + val)
    assert rows_seen == list(range(n))
    assert [r["extra_info"]["source_row"] for r in train] == sorted(
        r["extra_info"]["source_row"] for r in train
    )
    _check_invariants(result)


def test_val_split_is_deterministic_under_seed(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    src = _pointwise_file(write_jsonl, 30)

    def val_rows(seed: int, name: str) -> list[int]:
        res = prepare_judge("pointwise", src, tmp_path / name, val_fraction=0.3, seed=seed)
        assert res.val_path is not None
        return [r["extra_info"]["source_row"] for r in _rows(res.val_path)]

    assert val_rows(1, "a.parquet") == val_rows(1, "b.parquet")
    assert val_rows(1, "a.parquet") != val_rows(2, "c.parquet")
    a = prepare_judge("pointwise", src, tmp_path / "a.parquet", val_fraction=0.3, seed=1)
    b = prepare_judge("pointwise", src, tmp_path / "b.parquet", val_fraction=0.3, seed=1)
    assert a.report["splits"]["train"]["sha256"] == b.report["splits"]["train"]["sha256"]


def test_split_keeps_a_prompts_pairs_together(tmp_path: Path) -> None:
    result = prepare_judge(
        "pairwise", sample_path("rewardbench2.jsonl"), tmp_path / "rb.parquet", val_fraction=0.3
    )
    assert result.val_path is not None
    train_q = {r["extra_info"]["source_row"] for r in _rows(result.train_path)}
    val_q = {r["extra_info"]["source_row"] for r in _rows(result.val_path)}
    assert train_q and val_q and not train_q & val_q
    assert len(val_q) == round(0.3 * (len(train_q) + len(val_q)))


def test_val_split_needs_two_queries(write_jsonl: Callable[..., Path], tmp_path: Path) -> None:
    with pytest.raises(DataError, match="at least 2 distinct queries"):
        prepare_judge(
            "pointwise", _pointwise_file(write_jsonl, 1), tmp_path / "x.parquet", val_fraction=0.5
        )


def test_stale_val_file_is_removed(write_jsonl: Callable[..., Path], tmp_path: Path) -> None:
    src = _pointwise_file(write_jsonl, 10)
    out = tmp_path / "j.parquet"
    first = prepare_judge("pointwise", src, out, val_fraction=0.2)
    assert first.val_path is not None and Path(first.val_path).exists()
    second = prepare_judge("pointwise", src, out)
    assert second.val_path is None
    assert not (tmp_path / "j.val.parquet").exists()
    assert second.report["removed_stale_files"] == [str(tmp_path / "j.val.parquet")]


# --------------------------------------------------------------------------- position balancing


def _pairwise_file(write_jsonl: Callable[..., Path], n: int) -> Path:
    return write_jsonl([pairwise_row(f"q{i}", f"good {i}", f"bad {i}", "A") for i in range(n)])


@pytest.mark.parametrize("n", [10, 11])
def test_balance_positions_swaps_exactly_half(
    write_jsonl: Callable[..., Path], tmp_path: Path, n: int
) -> None:
    result = prepare_judge(
        "pairwise", _pairwise_file(write_jsonl, n), tmp_path / "p.parquet", balance_positions=True
    )
    rows = _rows(result.train_path)
    swapped = [r for r in rows if r["extra_info"]["swapped"]]
    assert len(swapped) == n // 2  # floor
    assert result.report["splits"]["train"]["swapped"] == n // 2
    for row in rows:
        i = row["extra_info"]["source_row"]
        pref = row["reward_model"]["ground_truth"]["preference"]
        assert row["extra_info"]["label"] == pref
        if row["extra_info"]["swapped"]:
            assert pref == "B"
            expected = render_pairwise(f"q{i}", f"bad {i}", f"good {i}")
        else:
            assert pref == "A"
            expected = render_pairwise(f"q{i}", f"good {i}", f"bad {i}")
        assert row["prompt"][0]["content"] == expected
    assert Counter(r["reward_model"]["ground_truth"]["preference"] for r in rows) == {
        "A": n - n // 2,
        "B": n // 2,
    }


def test_balance_positions_is_deterministic_and_per_split(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    src = _pairwise_file(write_jsonl, 40)

    def swapped(seed: int, name: str) -> tuple[list[int], int]:
        res = prepare_judge(
            "pairwise", src, tmp_path / name, balance_positions=True, val_fraction=0.25, seed=seed
        )
        assert res.val_path is not None
        val = _rows(res.val_path)  # both orders: balanced by construction, not by sampling
        assert [r["extra_info"]["swapped"] for r in val] == [False, True] * (len(val) // 2)
        assert res.report["splits"]["val"]["swapped"] == len(val) // 2 == 10
        train = _rows(res.train_path)
        return [r["extra_info"]["source_row"] for r in train if r["extra_info"]["swapped"]], len(
            train
        )

    rows_a, n_train = swapped(5, "a.parquet")
    assert len(rows_a) == n_train // 2
    assert swapped(5, "b.parquet")[0] == rows_a
    assert swapped(6, "c.parquet")[0] != rows_a


def test_balance_positions_rejected_for_pointwise(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    with pytest.raises(DataError, match="only applies to pairwise"):
        prepare_judge(
            "pointwise",
            _pointwise_file(write_jsonl, 3),
            tmp_path / "x.parquet",
            balance_positions=True,
        )


# --------------------------------------------------------------------------- length filter


def _chat_len(tok: Any, content: str) -> int:
    ids = tok.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=True
    )
    return len(ids)


def test_length_filter_keeps_exactly_the_limit_and_drops_one_over(
    write_jsonl: Callable[..., Path], tmp_path: Path, tiny_tokenizer: Any
) -> None:
    # Find two responses whose full chat-templated prompts differ in length, then set the
    # limit to the shorter one: it must be kept and the longer one (>= 1 token over) dropped.
    short, long = "Paris.", "Paris is the capital."
    len_short = _chat_len(tiny_tokenizer, render_pointwise("Capital?", short))
    len_long = _chat_len(tiny_tokenizer, render_pointwise("Capital?", long))
    assert len_long > len_short
    # make "long" exactly one token over the limit by choosing a suffix of one more token
    one_more = short + "!"
    len_one_more = _chat_len(tiny_tokenizer, render_pointwise("Capital?", one_more))
    assert len_one_more == len_short + 1
    src = write_jsonl([pointwise_row("Capital?", short, 4), pointwise_row("Capital?", one_more, 3)])
    result = prepare_judge(
        "pointwise",
        src,
        tmp_path / "l.parquet",
        tokenizer=tiny_tokenizer,
        max_prompt_length=len_short,
    )
    rows = _rows(result.train_path)
    assert [r["extra_info"]["source_row"] for r in rows] == [0]
    dropped = result.report["dropped"]["listed"]
    assert [(d["file"], d["row"], d["reason"]) for d in dropped] == [
        (str(src), 1, "prompt_too_long")
    ]
    assert f"{len_short + 1} tokens > max_prompt_length {len_short}" in dropped[0]["detail"]
    assert result.report["counts"]["examples_dropped"] == {"prompt_too_long": 1}
    assert result.report["prompt_tokens"]["max"] == len_short
    _check_invariants(result)


def test_length_filter_measures_the_chat_template_not_just_the_text(
    write_jsonl: Callable[..., Path], tmp_path: Path, tiny_tokenizer: Any
) -> None:
    content = render_pointwise("q", "r")
    plain = len(tiny_tokenizer(content, add_special_tokens=False)["input_ids"])
    templated = _chat_len(tiny_tokenizer, content)
    assert templated > plain
    src = write_jsonl([pointwise_row("q", "r")])
    with pytest.raises(DataError, match="no examples left"):
        prepare_judge(
            "pointwise",
            src,
            tmp_path / "x.parquet",
            tokenizer=tiny_tokenizer,
            max_prompt_length=plain,
        )


def test_length_filter_with_balancing_uses_the_longer_order(
    write_jsonl: Callable[..., Path], tmp_path: Path, tiny_tokenizer: Any
) -> None:
    a, b = "Paris.", "Paris is the capital of France."
    ab = _chat_len(tiny_tokenizer, render_pairwise("q", a, b))
    ba = _chat_len(tiny_tokenizer, render_pairwise("q", b, a))
    longest = max(ab, ba)
    src = write_jsonl([pairwise_row("q", a, b), pairwise_row("q2", a, a)])
    kept = prepare_judge(
        "pairwise",
        src,
        tmp_path / "k.parquet",
        tokenizer=tiny_tokenizer,
        max_prompt_length=longest,
        balance_positions=True,
    )
    assert kept.report["counts"]["examples_written"]["train"] == 2


def test_length_filter_batches_match_single_calls(tiny_tokenizer: Any) -> None:
    from judgeflow.data import prompt_lengths

    convs = [[{"role": "user", "content": render_pointwise(f"q{i}", "x" * i)}] for i in range(7)]
    batched = prompt_lengths(tiny_tokenizer, convs, batch_size=3)
    assert batched == [_chat_len(tiny_tokenizer, c[0]["content"]) for c in convs]


def test_tokenizer_from_path(
    write_jsonl: Callable[..., Path], tmp_path: Path, tiny_tokenizer: Any
) -> None:
    tiny_tokenizer.save_pretrained(tmp_path / "tok")
    src = write_jsonl([pointwise_row()])
    result = prepare_judge(
        "pointwise",
        src,
        tmp_path / "x.parquet",
        tokenizer=tmp_path / "tok",
        max_prompt_length=10_000,
    )
    assert result.report["parameters"]["tokenizer"] == str(tmp_path / "tok")
    assert result.report["prompt_tokens"]["min"] == _chat_len(
        tiny_tokenizer, render_pointwise("What is 2 + 2?", "2 + 2 = 4.")
    )


def test_max_prompt_length_needs_a_tokenizer(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    with pytest.raises(DataError, match="needs a tokenizer"):
        prepare_judge(
            "pointwise",
            _pointwise_file(write_jsonl, 2),
            tmp_path / "x.parquet",
            max_prompt_length=10,
        )


# --------------------------------------------------------------------------- report


def test_report_schema_and_invariant(write_jsonl: Callable[..., Path], tmp_path: Path) -> None:
    rows: list[Any] = [pointwise_row(f"q{i}", f"r{i}", i % 5) for i in range(12)]
    rows[3] = pointwise_row(label=99)
    rows[7] = "{broken"
    src = write_jsonl(rows)
    result = prepare_judge(
        "pointwise", src, tmp_path / "j.parquet", val_fraction=0.2, skip_invalid=True, seed=3
    )
    on_disk = json.loads(Path(result.report_path).read_text())
    assert on_disk == result.report
    report = result.report
    assert report["mode"] == "pointwise"
    assert report["inputs"] == [
        {"path": str(src), "format": "openjudge", "rows_read": 12, "rows_used": 10, "examples": 10}
    ]
    assert report["counts"] == {
        "rows_read": 12,
        "rows_dropped": {"tie": 0, "invalid": 2},
        "rows_used": 10,
        "examples_built": 10,
        "examples_dropped": {"prompt_too_long": 0},
        "examples_written": {"train": 8, "val": 2},
        "rows_written": {"train": 8, "val": 2},
    }
    assert report["dropped"]["by_reason"] == {"tie": 0, "invalid": 2, "prompt_too_long": 0}
    listed = report["dropped"]["listed"]
    assert [(d["file"], d["row"], d["reason"]) for d in listed] == [
        (str(src), 3, "invalid"),
        (str(src), 7, "invalid"),
    ]
    assert listed[0]["field"] == "output[0].answer.label.helpfulness"
    assert "line is not valid JSON" in listed[1]["detail"]
    for split in ("train", "val"):
        info = report["splits"][split]
        assert info["sha256"] == hashlib.sha256(Path(info["path"]).read_bytes()).hexdigest()
        assert sum(info["labels"].values()) == info["rows"]
    assert report["parameters"]["seed"] == 3 and report["parameters"]["skip_invalid"] is True
    _check_invariants(result)


def test_invalid_rows_raise_by_default_and_write_nothing(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    src = write_jsonl([pointwise_row(), pointwise_row(label=6)])
    with pytest.raises(DataValidationError, match="row 1, field 'output"):
        prepare_judge("pointwise", src, tmp_path / "j.parquet")
    assert sorted(os.listdir(tmp_path)) == ["rows.jsonl"]


def test_dropped_listing_is_capped_but_counts_are_complete(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    src = write_jsonl([rb2_row(i, subset="Ties") for i in range(60)] + [rb2_row(60)])
    result = prepare_judge("pairwise", src, tmp_path / "t.parquet")
    assert result.report["dropped"]["total"] == 60
    assert len(result.report["dropped"]["listed"]) == 50
    assert result.report["counts"]["examples_written"] == {"train": 3}
    _check_invariants(result)


def test_bad_parameters(write_jsonl: Callable[..., Path], tmp_path: Path) -> None:
    src = _pointwise_file(write_jsonl, 3)
    with pytest.raises(DataError, match="val_fraction"):
        prepare_judge("pointwise", src, tmp_path / "x.parquet", val_fraction=1.0)
    with pytest.raises(DataError, match="mode"):
        prepare_judge("listwise", src, tmp_path / "x.parquet")  # type: ignore[arg-type]
    with pytest.raises(DataError, match=r"\.parquet"):
        prepare_judge("pointwise", src, tmp_path / "x.jsonl")


# --------------------------------------------------------------------------- atomic writes


def test_failed_write_leaves_previous_outputs_untouched(
    write_jsonl: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "j.parquet"
    first = prepare_judge("pointwise", _pointwise_file(write_jsonl, 10), out, val_fraction=0.2)
    assert first.val_path is not None
    paths = [out, Path(first.val_path), Path(first.report_path)]
    before = [p.read_bytes() for p in paths]

    real_fsync = os.fsync
    calls = []

    def failing_fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:  # the val file: train is already staged on disk
            raise OSError("disk full")
        real_fsync(fd)

    monkeypatch.setattr(data_io.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        prepare_judge("pointwise", _pointwise_file(write_jsonl, 30), out, val_fraction=0.5)
    assert [p.read_bytes() for p in paths] == before
    assert sorted(os.listdir(tmp_path)) == [
        "j.parquet",
        "j.report.json",
        "j.val.parquet",
        "rows.jsonl",
    ]


def test_atomic_write_text_replaces_and_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.txt"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    with pytest.raises(RuntimeError), data_io.atomic_writer(target) as handle:
        handle.write(b"three")
        raise RuntimeError("boom")
    assert target.read_text() == "two"
    assert os.listdir(target.parent) == ["f.txt"]


def test_memory_url_output(write_jsonl: Callable[..., Path]) -> None:
    import fsspec

    result = prepare_judge(
        "pointwise", _pointwise_file(write_jsonl, 4), "memory://jf-test/j.parquet", val_fraction=0.5
    )
    fs = fsspec.filesystem("memory")
    assert fs.exists("/jf-test/j.parquet") and fs.exists("/jf-test/j.val.parquet")
    with fsspec.open(result.train_path, "rb") as handle:
        assert pq.read_table(handle).num_rows == 2
    report = json.loads(fs.cat("/jf-test/j.report.json"))
    assert report["counts"]["examples_written"] == {"train": 2, "val": 2}
    fs.rm("/jf-test", recursive=True)


# --------------------------------------------------------------------------- verl compatibility


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "sample"),
    [("pointwise", "openjudge_pointwise.jsonl"), ("pairwise", "rewardbench2.jsonl")],
)
def test_verl_rlhf_dataset_loads_prepared_files(
    tmp_path: Path, tiny_tokenizer: Any, mode: Any, sample: str
) -> None:
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    measured = prepare_judge(
        mode, sample_path(sample), tmp_path / "measure.parquet", tokenizer=tiny_tokenizer
    )
    limit = int(measured.report["prompt_tokens"]["mean"])  # drops some rows, keeps others
    result = prepare_judge(
        mode,
        sample_path(sample),
        tmp_path / f"{mode}.parquet",
        val_fraction=0.2,
        balance_positions=mode == "pairwise",
        tokenizer=tiny_tokenizer,
        max_prompt_length=limit,
    )
    assert result.val_path is not None
    assert result.report["counts"]["examples_dropped"]["prompt_too_long"] > 0
    config = OmegaConf.create(
        {
            "max_prompt_length": limit,
            "filter_overlong_prompts": True,
            "truncation": "error",
            "return_raw_chat": True,
            "cache_dir": str(tmp_path / "cache"),
        }
    )
    dataset = RLHFDataset(
        data_files=[result.train_path, result.val_path], tokenizer=tiny_tokenizer, config=config
    )
    written = result.report["counts"]["rows_written"]  # pairwise val: both orders, 2 per example
    assert len(dataset) == written["train"] + written["val"]  # verl's own length filter agrees
    item = dataset[0]
    first = _rows(result.train_path)[0]
    assert item["reward_model"] == first["reward_model"]
    assert item["data_source"] == first["data_source"]
    assert item["extra_info"]["label"] == first["extra_info"]["label"]
