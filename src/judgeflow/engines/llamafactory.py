"""Supervised fine-tuning with LLaMA-Factory: the GRRM cold start before RLVR.

We do not call LLaMA-Factory in-process: `llamafactory-cli train cfg.yaml` is what its docs,
its torchrun launcher and multi-node recipes expect, so a run here is the same command a Slurm
job runs. This module writes the three files that command needs (`dataset_info.json`, the train
YAML and, for ZeRO-3, a DeepSpeed JSON), runs it as a subprocess with its output streamed, and
turns LLaMA-Factory's `trainer_log.jsonl` (one JSON object per logging step, written by its
`LogCallback` on the main process) into `sft/*` metrics for an injected sink while it trains.
With `finetuning_type: lora` the adapter is trained into `<output_dir>/adapter` and merged into
the base model by `llamafactory-cli export` into `output_dir`, so what follows SFT (GRPO, the
registry, `judgeflow judge`) loads a whole model either way.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from judgeflow.cluster.procs import ProcessTree
from judgeflow.cluster.torchrun import torchrun_env

if TYPE_CHECKING:
    from judgeflow.config import RunConfig

__all__ = [
    "MetricsSink",
    "SftError",
    "SftParams",
    "SftResult",
    "map_trainer_log",
    "run_sft",
    "sft_line",
    "torchrun_env",
    "train_command",
    "write_dataset_info",
    "write_train_yaml",
    "zero3_config",
]

MetricsSink = Callable[[dict[str, float], int], None]
Progress = Callable[[int, int], None]
#: LLaMA-Factory's own output (its logs, the Trainer's bars and dicts) goes here, in output_dir.
ENGINE_LOG = "llamafactory.log"
_FAILURE_TAIL_LINES = 40
logger = logging.getLogger(__name__)

#: The file LLaMA-Factory's LogCallback appends to in `output_dir` (0.9.x).
TRAINER_LOG = "trainer_log.jsonl"
#: Summary LLaMA-Factory (the HF Trainer) writes when training ends.
TRAIN_RESULTS = "train_results.json"
#: The HF Trainer's state, whose log history also has the gradient norm per logged step.
TRAINER_STATE = "trainer_state.json"
#: trainer_log.jsonl keys -> judgeflow metric names (everything else is skipped).
_LOG_RENAMES = {
    "loss": "sft/loss",
    "lr": "sft/learning_rate",
    "epoch": "sft/epoch",
    "eval_loss": "sft/eval_loss",
    "throughput": "sft/throughput_tokens_per_s",
    "total_tokens": "sft/total_tokens",
    "percentage": "sft/progress_pct",
}
#: Where the LoRA adapter is trained, inside output_dir (the merged model is output_dir itself).
ADAPTER_DIRNAME = "adapter"
_POLL_S = 0.5
#: How long LLaMA-Factory (and its torchrun workers) get between SIGTERM and SIGKILL.
_STOP_GRACE_S = 30.0


class SftError(RuntimeError):
    """`llamafactory-cli train` failed; the message names the exit code and the command."""


@dataclass(frozen=True)
class SftParams:
    """LLaMA-Factory full SFT knobs; defaults are the GRRM preset except where noted.

    `deepspeed`: None (no DeepSpeed, e.g. CPU), a path to a DeepSpeed JSON, or `"zero3"` to
    write `zero3_config()` next to the train YAML. `bf16` None means on exactly when CUDA is
    available (fp16 is never used). `template` is `chatml` for Qwen2.5 base models; the tiny
    test model uses `qwen`.
    """

    model_path: str
    output_dir: str
    template: str = "chatml"
    cutoff_len: int = 12000
    per_device_train_batch_size: int = 4
    gradient_accumulation_steps: int = 1
    learning_rate: float = 6e-6
    num_train_epochs: float = 3.0
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.1
    bf16: bool | None = None
    deepspeed: str | None = None
    finetuning_type: str = "full"
    #: finetuning_type "lora": LLaMA-Factory's `lora_*` arguments (`lora_params`); else empty
    lora: Mapping[str, Any] = field(default_factory=dict)
    flash_attn: str = "fa2"  # the reference; "auto" leaves it to transformers (sdpa)
    max_steps: int | None = None  # None: run num_train_epochs
    save_steps: int = 500000  # the reference: effectively only the final save
    logging_steps: int = 1
    seed: int = 42
    preprocessing_num_workers: int | None = 16  # None: preprocess in the main process
    dataloader_num_workers: int = 4
    overwrite_output_dir: bool = True
    plot_loss: bool = True  # training_loss.png in output_dir, as the reference
    ddp_timeout: int = 180000000
    extra: Mapping[str, Any] = field(default_factory=dict)  # any other LLaMA-Factory key
    report_to: str = "none"  # "wandb" with tracking.wandb (the job's WANDB_* say where)
    #: `data.chat_template` (Jinja): the rows are rendered and tokenized by judgeflow with it
    #: (`templated_sft`) and LLaMA-Factory trains on them as they are (template `empty`)
    chat_template: str | None = None

    def __post_init__(self) -> None:
        if self.per_device_train_batch_size < 1 or self.gradient_accumulation_steps < 1:
            raise ValueError("batch size and gradient accumulation steps must be positive")
        if self.cutoff_len < 1:
            raise ValueError(f"cutoff_len must be positive, got {self.cutoff_len}")


def params_from(cfg: RunConfig, output_dir: str | Path) -> SftParams:
    """The run config's `sft` section as LLaMA-Factory's knobs (base model: model.path)."""
    s = cfg.sft
    return SftParams(
        model_path=cfg.model.path,
        output_dir=str(output_dir),
        template=s.template,
        cutoff_len=s.cutoff_len,
        per_device_train_batch_size=s.per_device_train_batch_size,
        gradient_accumulation_steps=s.gradient_accumulation_steps,
        learning_rate=s.learning_rate,
        num_train_epochs=s.num_train_epochs,
        lr_scheduler_type=s.lr_scheduler_type,
        warmup_ratio=s.warmup_ratio,
        bf16=s.bf16,
        deepspeed=s.deepspeed,
        finetuning_type=s.finetuning_type,
        lora=lora_params(cfg) if s.finetuning_type == "lora" else {},
        flash_attn=s.flash_attn,
        max_steps=s.max_steps,
        save_steps=s.save_steps,
        seed=cfg.data.seed,
        preprocessing_num_workers=s.preprocessing_num_workers,
        dataloader_num_workers=s.dataloader_num_workers,
        extra=dict(s.extra),
        report_to="wandb" if cfg.tracking.wandb.project else "none",
        chat_template=cfg.data.chat_template_jinja if cfg.mode == "rlvr" else None,
    )


def lora_params(cfg: RunConfig) -> dict[str, Any]:
    """`sft.lora` as LLaMA-Factory's arguments (its default alpha, 2 x rank, written out)."""
    lora = cfg.sft.lora
    return {
        "lora_rank": lora.rank,
        "lora_alpha": lora.alpha if lora.alpha is not None else 2 * lora.rank,
        "lora_dropout": lora.dropout,
        "lora_target": lora.target,
    }


@dataclass(frozen=True)
class SftResult:
    """The saved model (LLaMA-Factory saves the final model into `output_dir`) and metrics."""

    model_dir: Path
    metrics: dict[str, float]  # the last value of each sft/* metric + sft/summary/*
    steps: int


# --------------------------------------------------------------------------- files


def write_dataset_info(dataset_dir: str | Path, name: str, file_name: str | Path) -> Path:
    """`dataset_info.json` registering a sharegpt `messages` parquet (as the GRRM reference).

    `file_name` is relative to `dataset_dir`, or absolute (LLaMA-Factory joins the two paths).
    """
    info = {
        name: {
            "file_name": os.fspath(file_name),
            "formatting": "sharegpt",
            "columns": {"messages": "messages"},
            "tags": {
                "role_tag": "role",
                "content_tag": "content",
                "user_tag": "user",
                "assistant_tag": "assistant",
                # LLaMA-Factory's parser leaves a tag the entry does not name unset: without
                # this, a row's system turn was not read as one and the row was dropped
                "system_tag": "system",
            },
        }
    }
    path = Path(dataset_dir) / "dataset_info.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return path


def zero3_config() -> dict[str, Any]:
    """DeepSpeed ZeRO-3 for the HF Trainer: sizes left to the trainer (`auto`), 16-bit weights
    gathered on save so `output_dir` holds a loadable model."""
    return {
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "zero_allow_untested_optimizer": True,
        "fp16": {
            "enabled": "auto",
            "loss_scale": 0,
            "loss_scale_window": 1000,
            "initial_scale_power": 16,
            "hysteresis": 2,
            "min_loss_scale": 1,
        },
        "bf16": {"enabled": "auto"},
        "zero_optimization": {
            "stage": 3,
            "overlap_comm": False,
            "contiguous_gradients": True,
            "sub_group_size": 1e9,
            "reduce_bucket_size": "auto",
            "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto",
            "stage3_max_live_parameters": 1e9,
            "stage3_max_reuse_distance": 1e9,
            "stage3_gather_16bit_weights_on_model_save": True,
        },
    }


def _resolve_bf16(bf16: bool | None) -> bool:
    if bf16 is not None:
        return bf16
    import torch

    return bool(torch.cuda.is_available())


def train_config(
    params: SftParams,
    dataset_dir: str | Path,
    dataset_name: str,
    deepspeed: str | None,
    tokenized_path: str | Path | None = None,
) -> dict[str, Any]:
    """The LLaMA-Factory train arguments, in the reference YAML's order; with `tokenized_path`
    (rows judgeflow rendered with `chat_template`) LLaMA-Factory trains on those ids as they are,
    its own template `empty`."""
    config: dict[str, Any] = {
        "model_name_or_path": params.model_path,
        "flash_attn": params.flash_attn,
        "stage": "sft",
        "do_train": True,
        "finetuning_type": params.finetuning_type,
        **params.lora,
    }
    if deepspeed is not None:
        config["deepspeed"] = deepspeed
    config |= {
        "dataset_dir": os.fspath(dataset_dir),
        "dataset": dataset_name,
        "template": params.template if tokenized_path is None else "empty",
        "cutoff_len": params.cutoff_len,
        "overwrite_cache": True,
    }
    if tokenized_path is not None:
        config["tokenized_path"] = os.fspath(tokenized_path)
    if params.preprocessing_num_workers is not None:
        config["preprocessing_num_workers"] = params.preprocessing_num_workers
    config |= {
        "dataloader_num_workers": params.dataloader_num_workers,
        "output_dir": params.output_dir,
        "logging_steps": params.logging_steps,
        "save_steps": params.save_steps,
        "plot_loss": params.plot_loss,
        "overwrite_output_dir": params.overwrite_output_dir,
        "report_to": params.report_to,  # metrics reach MLflow through judgeflow's sink only
        "per_device_train_batch_size": params.per_device_train_batch_size,
        "gradient_accumulation_steps": params.gradient_accumulation_steps,
        "learning_rate": params.learning_rate,
        "num_train_epochs": params.num_train_epochs,
        "lr_scheduler_type": params.lr_scheduler_type,
        "warmup_ratio": params.warmup_ratio,
        "bf16": _resolve_bf16(params.bf16),
        "fp16": False,
        "ddp_timeout": params.ddp_timeout,
        "seed": params.seed,
    }
    if params.max_steps is not None:
        config["max_steps"] = params.max_steps
    config |= dict(params.extra)
    return config


def write_train_yaml(
    params: SftParams,
    dataset_dir: str | Path,
    dataset_name: str,
    path: str | Path,
    tokenized_path: str | Path | None = None,
) -> Path:
    """Write the `llamafactory-cli train` YAML (and `ds_z3_config.json` beside it for "zero3")."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    deepspeed = params.deepspeed
    if deepspeed == "zero3":
        ds_path = out.parent / "ds_z3_config.json"
        ds_path.write_text(json.dumps(zero3_config(), indent=2) + "\n", encoding="utf-8")
        deepspeed = str(ds_path)
    config = train_config(params, dataset_dir, dataset_name, deepspeed, tokenized_path)
    header = f"# Run with: llamafactory-cli train {out.name}\n"
    out.write_text(header + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return out


# --------------------------------------------------------------------------- launching


def train_command(yaml_path: str | Path) -> list[str]:
    """`llamafactory-cli train cfg.yaml`, using the CLI beside this interpreter when present
    (a Slurm job's PATH may not include the virtual environment)."""
    beside = Path(sys.executable).parent / "llamafactory-cli"
    cli = str(beside) if beside.exists() else "llamafactory-cli"
    return [cli, "train", os.fspath(yaml_path)]


def map_trainer_log(entry: Mapping[str, Any]) -> dict[str, float]:
    """One `trainer_log.jsonl` entry -> `sft/*` metrics (numbers only, renamed).

    The entry LLaMA-Factory writes for the end-of-training summary has no loss; it maps to
    nothing (the summary is read from `train_results.json` instead).
    """
    out: dict[str, float] = {}
    if entry.get("loss") is None and entry.get("eval_loss") is None:
        return out
    for key, name in _LOG_RENAMES.items():
        value = entry.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = float(value)
    return out


class _LogTailer:
    """Reads complete new lines of a growing JSONL file (LLaMA-Factory appends one per log)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0
        self.partial = b""

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()  # an incomplete last line waits for the next read
        entries = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries.append(entry)
        return entries


def run_sft(
    params: SftParams,
    sft_parquet: str | Path,
    *,
    metrics_sink: MetricsSink | None = None,
    env: Mapping[str, str] | None = None,
    work_dir: str | Path | None = None,
    dataset_name: str = "judgeflow_sft",
    progress: Progress | None = None,
    on_line: Callable[[str], None] | None = None,
) -> SftResult:
    """Run `llamafactory-cli train` on a sharegpt `messages` parquet and return the model dir.

    The dataset registration and YAML go to `work_dir` (default `<output_dir>/judgeflow/`, so
    the model directory records how it was trained). LLaMA-Factory's own output goes to
    `<output_dir>/llamafactory.log`; this process gives one readable line per logging step
    instead (to `on_line`, default an INFO record, which a job shows on its output). Metrics
    are sent to `metrics_sink(metrics, step)` as LLaMA-Factory logs them, and the end-of-run
    summary (`train_results.json`) as `sft/summary/*`; `progress(step, total)` follows the
    steps. `env` is added to the environment (e.g. `torchrun_env(...)`). Raises `SftError`,
    with the end of the log, when the command fails. With LoRA the adapter is trained in
    `<output_dir>/adapter` and merged into `output_dir` (`merge_lora`).
    """
    say = on_line or logger.info
    parquet = Path(sft_parquet).resolve()
    if not parquet.is_file():
        raise FileNotFoundError(f"{parquet}: SFT parquet not found")
    output_dir = Path(params.output_dir)
    lora = params.finetuning_type == "lora"
    train_params = replace(params, output_dir=str(output_dir / ADAPTER_DIRNAME)) if lora else params
    train_dir = Path(train_params.output_dir)
    work = Path(work_dir) if work_dir is not None else output_dir / "judgeflow"
    write_dataset_info(work, dataset_name, parquet)
    tokenized = None
    if params.chat_template is not None:
        import shutil

        from judgeflow.engines.templated_sft import tokenize_rows

        # each node its own folder (the nodes share the output folder); a stale one would be
        # reused by LLaMA-Factory as it is
        node = {**os.environ, **(env or {})}.get("NODE_RANK", "0")
        folder = work / f"tokenized-node{node}"
        shutil.rmtree(folder, ignore_errors=True)
        done = tokenize_rows(
            parquet, params.model_path, params.chat_template, params.cutoff_len, folder
        )
        tokenized = done.path
        say(
            f"sft: {done.rows} rows rendered with data.chat_template ({done.truncated} replies cut "
            f"at sft.cutoff_len={params.cutoff_len}, {done.dropped} rows dropped: their prompt "
            "alone is that long)"
        )
    yaml_path = write_train_yaml(
        train_params, work, dataset_name, work / "sft.yaml", tokenized_path=tokenized
    )

    log_path = train_dir / TRAINER_LOG
    if params.overwrite_output_dir and log_path.exists():
        log_path.unlink()  # LLaMA-Factory deletes it too, but only after we started tailing
    tailer = _LogTailer(log_path)
    latest: dict[str, float] = {}
    step = 0

    def publish() -> None:
        nonlocal step
        for entry in tailer.read():
            metrics = map_trainer_log(entry)
            step = int(entry.get("current_steps", step))
            total = int(entry.get("total_steps") or 0)
            latest.update(metrics)
            if metrics_sink is not None and metrics:
                metrics_sink(metrics, step)
            if progress is not None:
                progress(step, total)
            if metrics:
                say(sft_line(step, total, metrics))

    command = train_command(yaml_path)
    output_dir.mkdir(parents=True, exist_ok=True)
    engine_log = output_dir / ENGINE_LOG
    say(f"sft: {' '.join(command)} (LLaMA-Factory's output: {engine_log})")
    _run_logged(command, engine_log, env, say, while_running=publish)
    publish()
    # the largest child so far: the trainer (on one node; torchrun's workers are its children)
    peak_rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if lora and {**os.environ, **(env or {})}.get("NODE_RANK", "0") == "0":
        # one node merges (the one that saves); the others would write the same files at once
        merge_lora(params, train_dir, work / "export.yaml", engine_log, env=env, on_line=say)

    if (
        params.chat_template is not None
        and {**os.environ, **(env or {})}.get("NODE_RANK", "0") == "0"
    ):
        _keep_chat_template(output_dir, params.chat_template)
    grad_norms = _grad_norms(train_dir / TRAINER_STATE)
    if metrics_sink is not None:
        for logged_step, value in grad_norms:
            metrics_sink({"sft/grad_norm": value}, logged_step)
    if grad_norms:
        latest["sft/grad_norm"] = grad_norms[-1][1]
    summary = _summary(train_dir / TRAIN_RESULTS) | {"sft/summary/peak_rss_mib": peak_rss_mib}
    if summary:
        latest.update(summary)
        if metrics_sink is not None:
            metrics_sink(summary, step)
    return SftResult(model_dir=output_dir, metrics=latest, steps=step)


def _keep_chat_template(model_dir: Path, chat_template: str) -> None:
    """The SFT model's tokenizer renders with the template it was trained with, wherever it is
    loaded next (GRPO, the evaluation, a server)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(str(model_dir))


def _run_logged(
    command: list[str],
    engine_log: Path,
    env: Mapping[str, str] | None,
    say: Callable[[str], None],
    while_running: Callable[[], None] = lambda: None,
) -> None:
    """Run a `llamafactory-cli` command with its output appended to `engine_log`; `SftError`
    with the log's end when it fails."""
    with engine_log.open("ab") as log:
        # A tree of its own: torchrun puts its workers in new sessions, so stopping only the
        # leader (llamafactory-cli) would leave them training after a cancel.
        tree = ProcessTree.start(
            "llamafactory-cli", command, {**os.environ, **(env or {})}, stdout=log
        )
        proc = tree.proc
        try:
            while proc.poll() is None:
                time.sleep(_POLL_S)
                while_running()
        finally:
            if proc.poll() is None or tree.pids():
                tree.stop(_STOP_GRACE_S, say)
    if proc.returncode != 0:
        raise SftError(
            f"{' '.join(command)} exited with code {proc.returncode}; the end of {engine_log}:\n"
            + _tail(engine_log, _FAILURE_TAIL_LINES)
        )


def export_config(params: SftParams, adapter_dir: str | Path) -> dict[str, Any]:
    """`llamafactory-cli export`'s arguments that merge the adapter into the base model, in the
    precision it was trained in, into `params.output_dir`."""
    return {
        "model_name_or_path": params.model_path,
        "adapter_name_or_path": os.fspath(adapter_dir),
        "template": params.template if params.chat_template is None else "empty",
        "finetuning_type": "lora",
        "trust_remote_code": False,
        "infer_dtype": "bfloat16" if _resolve_bf16(params.bf16) else "float32",
        "export_dir": params.output_dir,
        "export_size": 5,  # GB per safetensors shard
        "export_device": "cpu",
        "export_legacy_format": False,
    }


def merge_lora(
    params: SftParams,
    adapter_dir: str | Path,
    yaml_path: str | Path,
    engine_log: Path,
    *,
    env: Mapping[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> Path:
    """Merge the trained adapter into the base model with `llamafactory-cli export` (its
    output to `engine_log`); the merged model, with its tokenizer, is `params.output_dir`."""
    say = on_line or logger.info
    path = Path(yaml_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"# Run with: llamafactory-cli export {path.name}\n"
        + yaml.safe_dump(export_config(params, adapter_dir), sort_keys=False),
        encoding="utf-8",
    )
    command = [*train_command(path)[:1], "export", os.fspath(path)]
    say(f"sft: merging the LoRA adapter: {' '.join(command)}")
    _run_logged(command, engine_log, env, say)
    return Path(params.output_dir)


def sft_line(step: int, total: int, metrics: Mapping[str, float]) -> str:
    """One readable line for a logging step: `sft step 5/60 | loss 1.2345 | lr 9.1e-04`."""
    parts = [f"sft step {step}/{total}" if total else f"sft step {step}"]
    if "sft/loss" in metrics:
        parts.append(f"loss {metrics['sft/loss']:.4f}")
    if "sft/eval_loss" in metrics:
        parts.append(f"eval_loss {metrics['sft/eval_loss']:.4f}")
    if "sft/learning_rate" in metrics:
        parts.append(f"lr {metrics['sft/learning_rate']:.1e}")
    return " | ".join(parts)


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _grad_norms(path: Path) -> list[tuple[int, float]]:
    """(step, grad_norm) from the HF Trainer's `trainer_state.json` (not in trainer_log.jsonl;
    the state is written at the end, so these arrive after training)."""
    if not path.exists():
        return []
    history = json.loads(path.read_text(encoding="utf-8")).get("log_history", [])
    return [
        (int(item["step"]), float(item["grad_norm"]))
        for item in history
        if isinstance(item.get("grad_norm"), int | float) and "step" in item
    ]


def _summary(path: Path) -> dict[str, float]:
    """`train_results.json` (train_loss, train_runtime, …) as `sft/summary/*`."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {
        f"sft/summary/{key.removeprefix('train_')}": float(value)
        for key, value in data.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }
