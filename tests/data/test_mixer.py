"""`data.mixer` / `data.eval_mixer`: open-instruct's `--dataset_mixer_list`, each source an
amount of one split, downloaded into one manifest and prepared together, every source's rows
counted in the data report. The stages the flows call, on files written here (no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from judgeflow import stages
from judgeflow.config import ConfigError, IgnoredKeyWarning, RunConfig, load_config
from judgeflow.data.rlvr import mixer_rows
from judgeflow.storage import SourceError, split_files


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))


def _row(question: str, answer: str, dataset: str = "gsm8k") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": question}], "ground_truth": answer,
            "dataset": dataset}  # fmt: skip


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _config(*overrides: str) -> RunConfig:
    return load_config(
        "rlvr",
        overrides=["engine=trl", "data.filter_overlong_prompts=false", "data.source=null",
                   *overrides],
    )  # fmt: skip


def _mixer(*parts: dict[str, Any], key: str = "data.mixer") -> str:
    return f"{key}={json.dumps(list(parts))}"


def test_mixer_rows_are_open_instructs_selection() -> None:
    """open-instruct's `DatasetConfig.select_samples` (e6c3044): a float is a share of the rows
    (`int(share * n)`), an integer a count; each whole copy in order, the rest drawn without
    replacement by `np.random.RandomState(seed).choice`. The draws below are numpy's for seed 42
    (`choice(10, 5)` is 8 1 5 0 7, `choice(10, 3)` is 8 1 5)."""
    assert mixer_rows(10, 1.0, 42) == list(range(10))
    assert mixer_rows(10, 2.5, 42) == [*range(10), *range(10), 8, 1, 5, 0, 7]
    assert mixer_rows(10, 3, 42) == [8, 1, 5]  # "3" is three rows, not three copies
    assert mixer_rows(10, 0.5, 42) == [8, 1, 5, 0, 7]
    assert mixer_rows(10, 13, 42) == [*range(10), 8, 1, 5]
    assert mixer_rows(7, 0.5, 42) == mixer_rows(7, 3, 42)  # int(3.5): three rows
    assert mixer_rows(10, 3, 7) != mixer_rows(10, 3, 42)  # data.mixer_seed picks others
    assert mixer_rows(10, 0.01, 42) == []  # int(0.1): none, counted as none taken


def test_a_split_is_the_files_that_name_it() -> None:
    hub = ["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet",
           "data/test-00000-of-00001.parquet", "README.json"]  # fmt: skip
    assert split_files("hf://datasets/a/b", hub, "train") == hub[:2]
    assert split_files("hf://datasets/a/b", hub, "test") == hub[2:3]
    assert split_files("d", ["train/x.jsonl", "validation/y.jsonl"], "validation") == [
        "validation/y.jsonl"
    ]
    assert split_files("d", ["training_data.jsonl", "train.jsonl"], "train") == ["train.jsonl"]
    with pytest.raises(SourceError, match=r"no file of split 'dev' \(its files name: test, train"):
        split_files("hf://datasets/a/b", hub, "dev")
    # a source whose files name no split is one train split, as open-instruct reads a file
    assert split_files("rows.jsonl", ["rows.jsonl"], "train") == ["rows.jsonl"]
    with pytest.raises(SourceError, match="no file names a split, so it is all `train`"):
        split_files("rows.jsonl", ["rows.jsonl"], "test")


def test_a_mixture_trains_on_each_sources_amount_counted_by_source(tmp_path: Path) -> None:
    numbers = _write(tmp_path / "numbers.jsonl",
                     [_row(f"What is {i} + {i}?", str(2 * i)) for i in range(10)])  # fmt: skip
    words = tmp_path / "words"  # a folder with a train and a test split, its own verifier name
    _write(words / "train.jsonl",
           [_row(f"Spell word {i}.", f"w{i}", "spelling") for i in range(6)]
           + [_row("What is 1 + 1?", "2")])  # a prompt numbers.jsonl also has  # fmt: skip
    _write(words / "test.jsonl", [_row(f"Spell held-out word {i}.", f"h{i}", "spelling")
                                  for i in range(3)])  # fmt: skip
    cfg = _config(
        _mixer(
            {"source": str(numbers), "amount": 4},
            {"source": str(words), "amount": 2.0, "remap_verifier": {"spelling": "string_matcher"}},
        ),
        "data.val_fraction=0.25",
    )
    manifest = stages.download_stage(cfg)
    assert manifest.source == f"{numbers} 4 + {words} 2.0"
    assert sorted(f.path for f in manifest.files) == ["00/numbers.jsonl", "01/train.jsonl"]

    data = stages.prepare_stage(cfg, manifest)
    mixer = data.report["mixer"]
    assert [
        (s["source"], s["rows_available"], s["rows_taken"], s["upsampled"], s["rows_kept"])
        for s in mixer["sources"]
    ] == [(f"{numbers} 4", 10, 4, False, 4), (f"{words} 2.0", 7, 14, True, 14)]
    assert data.report["counts"]["rows_read"] == 18
    # each split counts its rows by source; the verifier remap was the second source's alone
    train, val = data.report["splits"]["train"], data.report["splits"]["val"]
    assert sum(train["sources"].values()) + sum(val["sources"].values()) == 18
    assert set(train["verifiers"]) | set(val["verifiers"]) == {"gsm8k", "string_matcher"}
    # the taken number rows are those open-instruct takes (seed 42), upsampled rows repeat
    table = pq.read_table(data.train_file).to_pylist()
    if data.val_file:
        table += pq.read_table(data.val_file).to_pylist()
    number_rows = sorted(r["extra_info"]["source_row"] for r in table
                         if r["extra_info"]["source_file"].endswith("numbers.jsonl"))  # fmt: skip
    assert number_rows == [0, 1, 5, 8]  # numpy's choice(10, 4) for seed 42: 8 1 5 0
    # no prompt is in both splits, though the mixture repeats them; shared prompts are counted
    train_prompts = {r["extra_info"]["prompt_hash"] for r in pq.read_table(data.train_file).to_pylist()}  # fmt: skip
    val_prompts = {r["extra_info"]["prompt_hash"] for r in pq.read_table(str(data.val_file)).to_pylist()}  # fmt: skip
    assert not train_prompts & val_prompts
    shared = mixer["shared_prompts"]
    assert shared["total"] == 1  # "What is 1 + 1?": number row 1 was taken, words has it too

    # another seed takes other rows, in another prepared file
    other = stages.prepare_stage(cfg.model_copy(update={"data": cfg.data.model_copy(update={"mixer_seed": 7})}), manifest)  # fmt: skip
    assert other.train_file != data.train_file


def test_an_eval_mixer_is_the_validation_rows(tmp_path: Path) -> None:
    numbers = _write(tmp_path / "numbers.jsonl",
                     [_row(f"What is {i} + {i}?", str(2 * i)) for i in range(6)])  # fmt: skip
    held_out = tmp_path / "held-out"
    _write(held_out / "test.jsonl", [_row(f"What is {i} * 3?", str(3 * i)) for i in range(5)])
    _write(held_out / "train.jsonl", [_row("never read", "0")])
    cfg = _config(
        f"data.source={numbers}",
        _mixer({"source": str(held_out), "amount": 0.6, "split": "test"}, key="data.eval_mixer"),
    )
    assert cfg.data.has_val_data
    sft = stages.sft_source_config(cfg.model_copy(update={"sft": cfg.sft.model_copy(update={"source": "sft.jsonl"})}))  # fmt: skip
    assert (sft.data.source, sft.data.mixer) == ("sft.jsonl", None)  # the SFT rows: one source
    manifest = stages.download_stage(cfg)
    val_manifest = stages.download_stage(stages.val_source_config(cfg))
    assert [f.path for f in val_manifest.files] == ["00/test.jsonl"]
    data = stages.prepare_stage(cfg, manifest, val_manifest)
    assert pq.read_metadata(data.train_file).num_rows == 6  # the whole source is trained on
    assert data.val_file is not None and pq.read_metadata(data.val_file).num_rows == 3
    [source] = data.report["val_source"]["mixer"]["sources"]
    assert (source["rows_available"], source["rows_taken"]) == (5, 3)


def test_a_mixer_split_that_is_not_there_is_named(tmp_path: Path) -> None:
    numbers = _write(tmp_path / "numbers.jsonl", [_row("What is 1 + 1?", "2")])
    cfg = _config(_mixer({"source": str(numbers), "amount": 1.0, "split": "test"}))
    with pytest.raises(SourceError, match=r"numbers.jsonl: no file names a split.*'test'"):
        stages.download_stage(cfg)


def test_mixer_settings_are_checked_where_they_are_set(tmp_path: Path) -> None:
    part = {"source": "rows.jsonl", "amount": 1.0}
    # a layer that sets one of source and mixer replaces the other: here the preset's source
    assert load_config("rlvr", overrides=[_mixer(part)]).data.source is None
    assert load_config("rlvr-zero", overrides=["data.source=x.jsonl"]).data.mixer is None
    both = tmp_path / "both.yaml"  # one layer that sets both says two things
    both.write_text(f"base: rlvr\ndata:\n  source: x.jsonl\n  mixer: {json.dumps([part])}\n")
    with pytest.raises(ConfigError, match="set data.source: null with a mixer"):
        load_config(str(both))
    with pytest.raises(ConfigError, match="mix policy \\(rlvr\\) data"):
        load_config("grpo-pointwise", overrides=["data.source=null", _mixer(part)])
    with pytest.raises(ConfigError, match=r"data.mixer\[0\].source holds credentials"):
        _config(_mixer({"source": "https://user:token@host/rows.jsonl"}))
    with pytest.raises(ConfigError, match="amount"):
        _config(_mixer({"source": "rows.jsonl", "amount": 0}))
    with pytest.warns(IgnoredKeyWarning, match="data.mixer_seed applies only with data.mixer"):
        load_config("rlvr", overrides=["data.mixer_seed=3"])
