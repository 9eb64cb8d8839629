"""LLaMA-Factory SFT engine: generated files (golden YAML) and a real CPU SFT of the tiny model.

Regenerate the golden file after an intended change:
    JUDGEFLOW_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/engines/test_llamafactory_engine.py
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from judgeflow.data import prepare_grrm_sft
from judgeflow.engines.llamafactory import (
    SftParams,
    map_trainer_log,
    run_sft,
    torchrun_env,
    train_command,
    write_dataset_info,
    write_train_yaml,
    zero3_config,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "llamafactory" / "grrm-sft.yaml"
UPDATE_GOLDEN = os.environ.get("JUDGEFLOW_UPDATE_GOLDEN") == "1"


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


def test_zero3_sentinel_writes_the_deepspeed_json(tmp_path: Path) -> None:
    path = write_train_yaml(grrm_preset(deepspeed="zero3"), "/d", "n", tmp_path / "cfg.yaml")
    ds = tmp_path / "ds_z3_config.json"
    assert yaml.safe_load(path.read_text())["deepspeed"] == str(ds)
    config = json.loads(ds.read_text())
    assert config == zero3_config()
    assert config["zero_optimization"]["stage"] == 3
    assert config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True


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


def test_the_grrm_recipe_maps_onto_the_golden_file(tmp_path: Path) -> None:
    """`params_from` is the only road from a RunConfig to LLaMA-Factory: the recipe's SFT
    section, with the same fixed paths, renders exactly the reviewed YAML."""
    from judgeflow.config import load_config
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
