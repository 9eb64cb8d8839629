"""LLaMA-Factory SFT engine: generated files (golden YAML), the GPU YAML through LLaMA-Factory's
own argument checks, the ZeRO-3 JSON against LLaMA-Factory's own, and a real CPU SFT.

Regenerate the golden YAML after an intended change:
    JUDGEFLOW_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/engines/test_llamafactory_engine.py
The DeepSpeed golden (`ds_z3_config.json`) is never regenerated: it is LLaMA-Factory's file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from judgeflow.config import load_config
from judgeflow.data import prepare_grrm_sft
from judgeflow.engines.llamafactory import (
    SftParams,
    map_trainer_log,
    params_from,
    run_sft,
    torchrun_env,
    train_command,
    train_config,
    write_dataset_info,
    write_train_yaml,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "llamafactory" / "grrm-sft.yaml"
UPDATE_GOLDEN = os.environ.get("JUDGEFLOW_UPDATE_GOLDEN") == "1"
#: LLaMA-Factory's own ZeRO-3 config: examples/deepspeed/ds_z3_config.json at tag v0.9.5 (the
#: pinned version; commit 7af909522a951e3ad9f022ea6f88b6755257eaa5), copied byte for byte. The
#: installed 0.9.5 wheel has no examples/; its LlamaBoard writes the same settings (tested).
DS_GOLDEN = GOLDEN.parent / "ds_z3_config.json"
#: That file's git blob id in LLaMA-Factory's repository: the golden cannot drift towards ours.
DS_GOLDEN_BLOB = "46584a769c753b4f2fd41347f0a4266127481510"
#: Where judgeflow's ZeRO-3 JSON deliberately differs from LLaMA-Factory's: nowhere.
DS_DELIBERATE_DIFFERENCES: dict[str, Any] = {}


def canonical(value: object) -> str:
    """JSON with sorted keys: equal only when keys, values and types are (`true` is not `1`)."""
    return json.dumps(value, sort_keys=True)


def grrm_preset(**overrides: object) -> SftParams:
    """docs/design/presets.md, "grrm-full" (the SFT settings), with fixed paths."""
    values: dict[str, object] = {
        "model_path": "Qwen/Qwen2.5-7B",
        "output_dir": "/shared/judgeflow/runs/RUN_ID/sft",
        "bf16": True,
        "deepspeed": "/opt/judgeflow/ds_z3_config.json",
    }
    values.update(overrides)
    return SftParams(**values)  # type: ignore[arg-type]


def test_dataset_info_matches_the_reference(tmp_path: Path) -> None:
    path = write_dataset_info(tmp_path / "data", "grrm_sft", "sft.parquet")
    assert json.loads(path.read_text()) == {
        "grrm_sft": {
            "file_name": "sft.parquet",
            "formatting": "sharegpt",
            "columns": {"messages": "messages"},
            "tags": {
                "role_tag": "role",
                "content_tag": "content",
                "user_tag": "user",
                "assistant_tag": "assistant",
                # beyond the reference (whose rows have no system turn): LLaMA-Factory reads a
                # system turn only under a tag the entry names (tests/engines/test_system_prompt)
                "system_tag": "system",
            },
        }
    }


def test_train_yaml_matches_golden_file(tmp_path: Path) -> None:
    path = write_train_yaml(
        grrm_preset(), "/shared/judgeflow/data", "grrm_sft", tmp_path / "grrm-sft.yaml"
    )
    text = path.read_text()
    if UPDATE_GOLDEN:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert GOLDEN.is_file(), f"{GOLDEN} missing; run with JUDGEFLOW_UPDATE_GOLDEN=1"
    assert text == GOLDEN.read_text(), "LLaMA-Factory YAML changed; review, then regenerate"


def test_train_yaml_has_the_design_preset(tmp_path: Path) -> None:
    """Hand-written from docs/design/presets.md, "grrm-full" (SFT), and the reference YAML."""
    path = write_train_yaml(grrm_preset(), "/d", "grrm_sft", tmp_path / "x.yaml")
    assert path.read_text().startswith("# Run with: llamafactory-cli train x.yaml\n")
    cfg = yaml.safe_load(path.read_text())
    assert cfg == cfg | {
        "model_name_or_path": "Qwen/Qwen2.5-7B",
        "stage": "sft",
        "do_train": True,
        "finetuning_type": "full",
        "deepspeed": "/opt/judgeflow/ds_z3_config.json",
        "dataset_dir": "/d",
        "dataset": "grrm_sft",
        "template": "chatml",
        "cutoff_len": 12000,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1,
        "learning_rate": 6e-6,
        "num_train_epochs": 3.0,
        "lr_scheduler_type": "cosine",
        "warmup_ratio": 0.1,
        "bf16": True,
        "fp16": False,
        "report_to": "none",
        "logging_steps": 1,
    }
    assert "max_steps" not in cfg


def test_ds_golden_is_llamafactorys_file() -> None:
    data = DS_GOLDEN.read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob id
    assert blob == DS_GOLDEN_BLOB, f"{DS_GOLDEN} is no longer LLaMA-Factory v0.9.5's file"


def test_ds_golden_is_what_the_installed_llamafactory_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pinned LLaMA-Factory still uses these settings: its LlamaBoard's own
    `create_ds_config` writes the same ZeRO-3 file (an upgrade that changes them fails here)."""
    from llamafactory.webui import common

    monkeypatch.setattr(common, "DEFAULT_CACHE_DIR", str(tmp_path))
    common.create_ds_config()
    written = json.loads((tmp_path / "ds_z3_config.json").read_text())
    assert canonical(written) == canonical(json.loads(DS_GOLDEN.read_text()))


def test_zero3_sentinel_writes_llamafactorys_zero3_json(tmp_path: Path) -> None:
    """The "zero3" sentinel writes LLaMA-Factory's own ZeRO-3 config beside the YAML: the
    golden, changed only by the deliberate differences above (none)."""
    path = write_train_yaml(grrm_preset(deepspeed="zero3"), "/d", "n", tmp_path / "cfg.yaml")
    ds = tmp_path / "ds_z3_config.json"
    assert yaml.safe_load(path.read_text())["deepspeed"] == str(ds)
    expected = json.loads(DS_GOLDEN.read_text()) | DS_DELIBERATE_DIFFERENCES
    assert canonical(json.loads(ds.read_text())) == canonical(expected)


def test_cpu_defaults_switch_bf16_off(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("bf16=None turns bf16 on where CUDA is available")
    path = write_train_yaml(grrm_preset(bf16=None, deepspeed=None), "/d", "n", tmp_path / "c.yaml")
    cfg = yaml.safe_load(path.read_text())
    assert (cfg["bf16"], cfg["fp16"], "deepspeed" in cfg) == (False, False, False)


def test_command_and_multi_node_environment() -> None:
    command = train_command("/x/cfg.yaml")
    assert Path(command[0]).name == "llamafactory-cli" and command[1:] == ["train", "/x/cfg.yaml"]
    assert torchrun_env(2, 1, "10.0.0.1", 29500) == {
        "FORCE_TORCHRUN": "1",
        "NNODES": "2",
        "NODE_RANK": "1",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
    }
    assert torchrun_env(1, 0, "h", 1, nproc_per_node=8)["NPROC_PER_NODE"] == "8"
    # torchrun's --log-dir, read from PET_LOG_DIR by torchrun's own argument parser.
    assert torchrun_env(1, 0, "h", 1, log_dir="/runs/r/sft/torchrun")["PET_LOG_DIR"] == (
        "/runs/r/sft/torchrun"
    )
    with pytest.raises(ValueError):
        torchrun_env(2, 2, "h", 1)


def test_trainer_log_mapping() -> None:
    entry = {"current_steps": 3, "total_steps": 9, "loss": 1.5, "lr": 2e-5, "epoch": 0.5,
             "percentage": 33.3, "elapsed_time": "0:00:01", "throughput": 10.0}  # fmt: skip
    assert map_trainer_log(entry) == {
        "sft/loss": 1.5,
        "sft/learning_rate": 2e-5,
        "sft/epoch": 0.5,
        "sft/progress_pct": 33.3,
        "sft/throughput_tokens_per_s": 10.0,
    }
    # LLaMA-Factory's end-of-training entry has no loss: no metrics from it.
    assert map_trainer_log({"current_steps": 9, "epoch": 1.0, "percentage": 100.0}) == {}


@pytest.mark.slow
def test_real_sft_of_the_tiny_model_on_cpu(tmp_path: Path, tiny_model: Path) -> None:
    """Our GRRM SFT parquet + dataset_info + YAML through `llamafactory-cli train`, for real."""
    rows = [
        {
            "src_text": f"Quelle {i}",
            "src_lang": "de",
            "trg_lang": "en",
            "mt_texts": [f"source {i}", f"the source {i}", "x"],
            "scores": [7, 9, i % 3],
            "analysis": f"B is the most fluent.\nScores: A 7, B 9, C {i % 3}",
        }
        for i in range(4)
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    sft = prepare_grrm_sft(tmp_path / "in.parquet", tmp_path / "data" / "sft.parquet")
    params = SftParams(
        model_path=str(tiny_model),
        output_dir=str(tmp_path / "out"),
        template="qwen",
        cutoff_len=256,
        per_device_train_batch_size=2,
        learning_rate=1e-4,
        warmup_ratio=0.0,
        max_steps=3,
        bf16=False,
        preprocessing_num_workers=None,
        dataloader_num_workers=0,
        plot_loss=False,
    )
    got: list[tuple[int, dict[str, float]]] = []
    result = run_sft(params, sft.output_path, metrics_sink=lambda m, step: got.append((step, m)))

    losses = {step: m["sft/loss"] for step, m in got if "sft/loss" in m}
    assert sorted(losses) == [1, 2, 3]
    assert all(math.isfinite(v) and v > 0 for v in losses.values())
    assert any("sft/learning_rate" in m for _, m in got)
    assert any("sft/grad_norm" in m for _, m in got)
    assert "sft/summary/loss" in result.metrics and result.steps == 3
    assert result.model_dir == tmp_path / "out"
    used = yaml.safe_load((tmp_path / "out" / "judgeflow" / "sft.yaml").read_text())
    assert used["report_to"] == "none" and used["bf16"] is False and "deepspeed" not in used

    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(result.model_dir)
    tokenizer = AutoTokenizer.from_pretrained(result.model_dir)
    ids = tokenizer("Translation A:", return_tensors="pt").input_ids
    assert model(ids).logits.shape[-1] >= len(tokenizer)


def test_real_sft_with_a_chat_template_trains_on_the_rows_judgeflow_rendered(
    tmp_path: Path, tiny_model: Path
) -> None:
    """`data.chat_template`: judgeflow renders and tokenizes the rows (`templated_sft`) and
    LLaMA-Factory trains on those ids (template `empty`); the model keeps the template."""
    from transformers import AutoTokenizer

    from judgeflow.config.chat_templates import CHAT_TEMPLATES

    template = CHAT_TEMPLATES["r1_simple_chat_postpend_think"]
    rows = [{"messages": [{"role": "user", "content": f"Which is larger: {i} or {i + 1}?"},
                          {"role": "assistant", "content": f"</think> <answer>{i + 1}</answer>"}]}
            for i in range(4)]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "sft.parquet")
    params = SftParams(
        model_path=str(tiny_model), output_dir=str(tmp_path / "out"), cutoff_len=256,
        per_device_train_batch_size=2, learning_rate=1e-4, warmup_ratio=0.0, max_steps=2,
        bf16=False, preprocessing_num_workers=None, dataloader_num_workers=0, plot_loss=False,
        chat_template=template,
    )  # fmt: skip
    lines: list[str] = []
    result = run_sft(params, tmp_path / "sft.parquet", on_line=lines.append)

    assert result.steps == 2 and math.isfinite(result.metrics["sft/summary/loss"])
    used = yaml.safe_load((tmp_path / "out" / "judgeflow" / "sft.yaml").read_text())
    assert used["template"] == "empty"
    assert used["tokenized_path"] == str(tmp_path / "out" / "judgeflow" / "tokenized-node0")
    assert "Loaded tokenized dataset from" in (tmp_path / "out" / "llamafactory.log").read_text()
    assert any("4 rows rendered with data.chat_template (0 replies cut" in line for line in lines)
    assert AutoTokenizer.from_pretrained(result.model_dir).chat_template == template


def test_real_lora_sft_of_the_tiny_model_is_merged_before_anything_loads_it(
    tmp_path: Path, tiny_model: Path
) -> None:
    """finetuning_type lora for real: LLaMA-Factory trains the adapter into `adapter/`, and its
    export merges it into `output_dir`, a plain model that answers exactly as the base model
    with the adapter on (and unlike the base model alone)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    rows = [{"messages": [{"role": "user", "content": f"Is {i} even?"},
                          {"role": "assistant", "content": "yes" if i % 2 == 0 else "no"}]}
            for i in range(8)]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "sft.parquet")
    params = SftParams(
        model_path=str(tiny_model), output_dir=str(tmp_path / "out"), template="qwen",
        cutoff_len=128, per_device_train_batch_size=4, learning_rate=1e-2, warmup_ratio=0.0,
        max_steps=3, bf16=False, preprocessing_num_workers=None, dataloader_num_workers=0,
        plot_loss=False, finetuning_type="lora",
        lora={"lora_rank": 4, "lora_alpha": 8, "lora_dropout": 0.0, "lora_target": "all"},
    )  # fmt: skip
    result = run_sft(params, tmp_path / "sft.parquet")

    assert result.model_dir == tmp_path / "out" and result.steps == 3
    assert result.metrics["sft/summary/peak_rss_mib"] > 0
    adapter = tmp_path / "out" / "adapter"
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"]) == (4, 8)
    merged = AutoModelForCausalLM.from_pretrained(result.model_dir)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    assert next(merged.parameters()).dtype == torch.float32  # the precision it trained in
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), adapter)
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        with adapted.disable_adapter():
            base = adapted(ids).logits
        on, got = adapted(ids).logits, merged(ids).logits
    assert not torch.allclose(on, base, atol=1e-6)
    torch.testing.assert_close(got, on, rtol=1e-4, atol=1e-5)


def test_the_grrm_recipe_maps_onto_the_golden_file(tmp_path: Path) -> None:
    """`params_from` is the only road from a RunConfig to LLaMA-Factory: the recipe's SFT
    section, with the same fixed paths, renders exactly the reviewed YAML."""
    from judgeflow.engines.llamafactory import params_from

    cfg = load_config(
        "grrm-full",
        overrides=[
            "model.path=Qwen/Qwen2.5-7B",
            "sft.bf16=true",
            "sft.deepspeed=/opt/judgeflow/ds_z3_config.json",
            "data.seed=42",
        ],
    )
    params = params_from(cfg, "/shared/judgeflow/runs/RUN_ID/sft")
    path = write_train_yaml(
        params, "/shared/judgeflow/data", "grrm_sft", tmp_path / "grrm-sft.yaml"
    )
    assert path.read_text() == GOLDEN.read_text()


# --------------------------------------------------------------------------- LLaMA-Factory's checks


@dataclasses.dataclass
class LfArgs:
    """What LLaMA-Factory made of a YAML, and the `deepspeed` value it was not given."""

    model: Any
    data: Any
    training: Any
    finetuning: Any
    datasets: list[Any]
    deepspeed: str | None


@pytest.fixture
def llamafactory_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """LLaMA-Factory's parsing as `llamafactory-cli train` runs it, on this CPU machine, without
    leaving its process-wide traces (ACCELERATE_* variables, accelerate's state, a DeepSpeed
    config that would turn ZeRO-3 on in `from_pretrained`) to the tests after it."""
    from accelerate.state import PartialState
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    environ = dict(os.environ)
    partial_state = dict(PartialState._shared_state)
    monkeypatch.delenv("ALLOW_EXTRA_ARGS", raising=False)  # unknown keys must fail, as in a job
    monkeypatch.setenv("LLAMAFACTORY_VERBOSITY", "WARN")  # keep transformers' logging as it is
    # The one GPU-only check: "is there an Ampere+ GPU for bf16". bf16's type, the bf16/fp16
    # exclusion and the compute dtype LLaMA-Factory derives from it are still checked.
    monkeypatch.setattr("transformers.training_args.is_torch_bf16_gpu_available", lambda: True)
    yield
    unset_hf_deepspeed_config()
    PartialState._shared_state.clear()
    PartialState._shared_state.update(partial_state)
    os.environ.clear()
    os.environ.update(environ)


def llamafactory_train_args(yaml_path: Path, monkeypatch: pytest.MonkeyPatch) -> LfArgs:
    """`yaml_path` through LLaMA-Factory 0.9.5's own code, as `llamafactory-cli train` (and its
    torchrun workers) run it: `read_args` loads the YAML named on the command line (OmegaConf);
    `get_train_args` parses it with HfArgumentParser into LLaMA-Factory's ModelArguments,
    DataArguments, TrainingArguments (transformers' Seq2SeqTrainingArguments), FinetuningArguments
    and GeneratingArguments, refusing unknown keys, runs their `__post_init__` checks, then its
    own (`_verify_model_args`, `_check_extra_dependencies`, the stage/precision/output checks).
    Then what it does with `dataset` and `template` before loading data: `get_dataset_list`
    reads `dataset_info.json`, and the template must be one it registers.

    Not checked here (needs `llamafactory_env`):
    - the bf16 hardware probe (see `llamafactory_env`);
    - `deepspeed`: taken out of the arguments and returned. With it, TrainingArguments builds
      transformers' HfTrainerDeepSpeedConfig, and `get_train_args` wants the deepspeed package
      and a torchrun process (FORCE_TORCHRUN) - none of them here. Callers check that the value
      names our ZeRO-3 JSON; `test_deepspeed_accepts_the_zero3_json` parses with it where
      deepspeed is installed. ZeRO-3-only refusals (predict_with_generate, pure_bf16, pissa_init,
      unsloth, KTransformers with ZeRO-3) thus see ZeRO-3 off; our YAML sets none of those;
    - get_train_args' launch checks, which need a distributed (torchrun) process;
    - whatever needs the model, the tokenizer or the data (FlashAttention 2, the parquet).
    """
    from llamafactory.data.parser import get_dataset_list
    from llamafactory.data.template import TEMPLATES
    from llamafactory.hparams.parser import get_train_args, read_args

    monkeypatch.setattr(sys, "argv", ["llamafactory-cli", str(yaml_path)])
    args = read_args()
    assert isinstance(args, dict)
    deepspeed = args.pop("deepspeed", None)
    model, data, training, finetuning, _ = get_train_args(args)
    datasets = get_dataset_list(data.dataset, data.dataset_dir)
    if data.template not in TEMPLATES:  # get_template_and_fix_tokenizer's check
        raise ValueError(f"Template {data.template} does not exist.")
    return LfArgs(model, data, training, finetuning, datasets, deepspeed)


def grrm_gpu_yaml(tmp_path: Path) -> Path:
    """The files `run_sft` writes on a GPU node for the grrm-full recipe: `sft.bf16` resolves to
    true there, `sft.deepspeed` is the default "zero3" (the JSON is written beside the YAML)."""

    cfg = load_config("grrm-full", overrides=["model.path=Qwen/Qwen2.5-7B", "sft.bf16=true"])
    assert cfg.sft.deepspeed == "zero3"
    params = params_from(cfg, tmp_path / "sft")
    work = tmp_path / "sft" / "judgeflow"
    write_dataset_info(work, "judgeflow_sft", tmp_path / "sft.parquet")
    return write_train_yaml(params, work, "judgeflow_sft", work / "sft.yaml")


@pytest.mark.usefixtures("llamafactory_env")
def test_gpu_yaml_passes_llamafactorys_own_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from llamafactory.hparams import TrainingArguments

    yaml_path = grrm_gpu_yaml(tmp_path)
    lf = llamafactory_train_args(yaml_path, monkeypatch)

    # LLaMA-Factory read the values as judgeflow meant them (types included).
    assert (lf.finetuning.stage, lf.finetuning.finetuning_type) == ("sft", "full")
    assert lf.training.do_train and lf.training.bf16 and not lf.training.fp16
    assert lf.model.compute_dtype == torch.bfloat16 and lf.model.flash_attn == "fa2"
    assert lf.training.learning_rate == 6e-6 and lf.training.num_train_epochs == 3.0
    assert lf.training.per_device_train_batch_size == 4 and lf.training.report_to == []
    assert (lf.data.cutoff_len, lf.data.template, lf.data.dataset) == (
        12000, "chatml", ["judgeflow_sft"],
    )  # fmt: skip
    [dataset] = lf.datasets
    assert (dataset.load_from, dataset.formatting, dataset.messages) == (
        "file", "sharegpt", "messages",
    )  # fmt: skip
    assert dataset.dataset_name == str(tmp_path / "sft.parquet")
    # The key kept from LLaMA-Factory: TrainingArguments' own, naming the JSON written beside.
    assert "deepspeed" in {f.name for f in dataclasses.fields(TrainingArguments)}
    assert lf.deepspeed == str(yaml_path.parent / "ds_z3_config.json")
    written = json.loads(Path(lf.deepspeed).read_text())
    assert canonical(written) == canonical(json.loads(DS_GOLDEN.read_text()))


@pytest.mark.usefixtures("llamafactory_env")
@pytest.mark.parametrize(
    ("good", "bad", "error"),
    [
        ("learning_rate:", "learnig_rate:", "not used by the HfArgumentParser"),  # transformers'
        ("cutoff_len:", "cuttoff_len:", "not used by the HfArgumentParser"),  # LLaMA-Factory's
        ("deepspeed:", "deep_speed:", "not used by the HfArgumentParser"),  # the one left out
        ("finetuning_type: full", "finetuning_type: ful", "Invalid fine-tuning method"),
        ("template: chatml", "template: chat_ml", "Template chat_ml does not exist"),
    ],
)
def test_llamafactorys_checks_refuse_a_misspelt_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, good: str, bad: str, error: str
) -> None:
    """The check above can fail: one misspelling in the generated YAML and LLaMA-Factory refuses
    it, as `llamafactory-cli train` would at the start of a GPU job."""
    yaml_path = grrm_gpu_yaml(tmp_path)
    text = yaml_path.read_text()
    assert text.count(f"\n{good}") == 1
    yaml_path.write_text(text.replace(f"\n{good}", f"\n{bad}"))
    with pytest.raises((ValueError, AssertionError), match=error):
        llamafactory_train_args(yaml_path, monkeypatch)


@pytest.mark.usefixtures("llamafactory_env")
def test_sft_extra_reaches_llamafactory_through_its_own_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sft.extra` passes arguments judgeflow does not name: written into the YAML, read by
    LLaMA-Factory's own classes as the user meant them."""

    extra = "sft.extra={weight_decay: 0.05, max_grad_norm: 0.5, mask_history: true}"
    cfg = load_config("grrm-full", overrides=["model.path=Qwen/Qwen2.5-7B", extra])
    work = tmp_path / "sft" / "judgeflow"
    write_dataset_info(work, "judgeflow_sft", tmp_path / "sft.parquet")
    yaml_path = write_train_yaml(params_from(cfg, tmp_path / "sft"), work, "judgeflow_sft",
                                 work / "sft.yaml")  # fmt: skip
    lf = llamafactory_train_args(yaml_path, monkeypatch)
    assert (lf.training.weight_decay, lf.training.max_grad_norm) == (0.05, 0.5)
    assert lf.data.mask_history is True  # DataArguments', LLaMA-Factory's own


def test_the_config_knows_every_argument_judgeflow_writes_for_llamafactory() -> None:
    """`config.passthrough.LLAMAFACTORY_WRITTEN` (what sft.extra may not set) is what the
    engine writes: its train arguments, with and without the optional ones."""
    from judgeflow.config.passthrough import LLAMAFACTORY_WRITTEN

    cfg = load_config("grrm-full", overrides=["sft.finetuning_type=lora", "sft.max_steps=5"])
    written = set(train_config(params_from(cfg, "o"), "d", "n", "ds.json"))
    assert written == LLAMAFACTORY_WRITTEN


@pytest.mark.usefixtures("llamafactory_env")
def test_sft_lora_reaches_llamafactory_through_its_own_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sft.lora.*` are LLaMA-Factory's `lora_*` arguments, read by its own classes as meant;
    without finetuning_type lora none is written (and setting one warns)."""
    from judgeflow.config import IgnoredKeyWarning

    lora = ["sft.lora.rank=16", "sft.lora.alpha=8", "sft.lora.dropout=0.05",
            "sft.lora.target=q_proj,v_proj"]  # fmt: skip
    cfg = load_config("grrm-full", overrides=["sft.finetuning_type=lora", *lora])
    work = tmp_path / "sft" / "judgeflow"
    write_dataset_info(work, "judgeflow_sft", tmp_path / "sft.parquet")
    yaml_path = write_train_yaml(params_from(cfg, tmp_path / "sft"), work, "judgeflow_sft",
                                 work / "sft.yaml")  # fmt: skip
    lf = llamafactory_train_args(yaml_path, monkeypatch)
    f = lf.finetuning
    assert (f.finetuning_type, f.lora_rank, f.lora_alpha, f.lora_dropout) == ("lora", 16, 8, 0.05)
    assert f.lora_target == ["q_proj", "v_proj"]  # LLaMA-Factory splits the names itself

    with pytest.warns(IgnoredKeyWarning, match="sft.lora.rank applies only with sft.finetuning"):
        full = load_config("grrm-full", overrides=["sft.lora.rank=16"])
    assert not {k for k in train_config(params_from(full, "o"), "d", "n", None)
                if k.startswith("lora")}  # fmt: skip


@pytest.mark.usefixtures("llamafactory_env")
def test_tracking_wandb_makes_llamafactory_report_to_wandb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With tracking.wandb the SFT YAML reports to W&B (LLaMA-Factory's own parse reads it);
    the W&B run is named by the job's variables, as TRL's."""

    cfg = load_config("grrm-full", overrides=["model.path=Qwen/Qwen2.5-7B",
                                              "tracking.wandb.project=grrm"])  # fmt: skip
    work = tmp_path / "sft" / "judgeflow"
    write_dataset_info(work, "judgeflow_sft", tmp_path / "sft.parquet")
    yaml_path = write_train_yaml(params_from(cfg, tmp_path / "sft"), work, "judgeflow_sft",
                                 work / "sft.yaml")  # fmt: skip
    assert llamafactory_train_args(yaml_path, monkeypatch).training.report_to == ["wandb"]
    plain = load_config("grrm-full", overrides=["model.path=Qwen/Qwen2.5-7B"])
    assert params_from(plain, tmp_path).report_to == "none"


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("{weight_decy: 0.1}", "weight_decy is not an argument of LLaMA-Factory's train command (did you mean weight_decay?)"),
        ("{learning_rate: 0.1}", "learning_rate is written by judgeflow (its sft.* key, or fixed)"),
        ("{report_to: wandb}", "report_to is written by judgeflow"),
        ("{dataset: other}", "dataset is written by judgeflow"),
    ],
)  # fmt: skip
def test_sft_extra_refuses_what_llamafactory_lacks_and_what_judgeflow_writes(
    extra: str, said: str
) -> None:
    import re

    from judgeflow.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=re.escape(said)):
        load_config("grrm-full", overrides=[f"sft.extra={extra}"])


@pytest.mark.usefixtures("llamafactory_env")
def test_deepspeed_accepts_the_zero3_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where deepspeed is installed (it is not in the pins): the GPU YAML with its `deepspeed`
    key through LLaMA-Factory's `_parse_train_args` (TrainingArguments builds transformers'
    HfTrainerDeepSpeedConfig and fills the "auto" values from the arguments, recording any
    mismatch), the model-size values filled as the Trainer does for Qwen2.5-7B (hidden size
    3584), then DeepSpeed's own `DeepSpeedConfig` on the result."""
    pytest.importorskip("deepspeed", reason="deepspeed is not installed (not in the pins)")
    import types

    from deepspeed.runtime.config import DeepSpeedConfig
    from llamafactory.hparams.parser import _parse_train_args, read_args

    monkeypatch.setattr(sys, "argv", ["llamafactory-cli", str(grrm_gpu_yaml(tmp_path))])
    args = read_args()
    assert isinstance(args, dict)
    _, _, training, _, _ = _parse_train_args(args)
    hf_ds = training.hf_deepspeed_config
    assert hf_ds.mismatches == [] and hf_ds.is_zero3()
    qwen = types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=3584))
    hf_ds.trainer_config_finalize(training, qwen, num_training_steps=100)
    ds = DeepSpeedConfig(hf_ds.config)
    assert ds.zero_optimization_stage == 3 and ds.bfloat16_config.enabled
    assert ds.zero_config.gather_16bit_weights_on_model_save and ds.train_batch_size == 4
