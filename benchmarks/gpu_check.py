"""GPU check: judgeflow's TRL GRPO engine and HF judge evaluation on one CUDA device.

    .venv/bin/python benchmarks/gpu_check.py --data DIR             # on a GPU: the full check
    .venv/bin/python benchmarks/gpu_check.py --data DIR --steps 2   # CPU smoke (~30 s, 2 cores)
    .venv/bin/python benchmarks/gpu_check.py --data DIR --parts tiny --seeds 0,1,2,3 --precision fp32

DIR holds `sft/` (the tiny demo's SFT model) and `data/pointwise.parquet`,
`data/pointwise.val.parquet` (its prepared data); `judgeflow run grpo-pointwise --profile tiny`
leaves them under `$JUDGEFLOW_HOME/artifacts/runs/*/sft` and `artifacts/prepared/*/`.

Part `tiny`: the tiny profile's GRPO (40 steps) from the SFT model, through the real entry
points (`load_config` → `engines.trl.params_from` → `train_grpo`, validation file included as
the flow passes it), with `evaluate_judge` (HFGenerator) on the validation split before and
after. Part `big`: the same GRPO for a few steps on a random-init Qwen2 of about 100M parameters
built offline with the tiny tokenizer and 256-token completions, to load a real GPU (without
CUDA a small stand-in shape is used unless --big-preset gpu). Per part it measures the median
seconds per optimizer step, peak GPU memory (torch.cuda.max_memory_allocated) in training and
in evaluation, the mean training reward of the first vs last third of the steps, and the eval
reward_mean / exact_match / format_failure_rate before → after. After the tiny part, the trained
judge judges the shipped validation file with `judge_file` (what `judgeflow judge` and the
`judge` job run, HF generation): rows per second, valid verdicts, and agreement with the file's
labels, which should match the evaluation's exact_match. --json writes the figures, --table the
printed table (stamped with date, commit and versions); --seeds repeats the tiny part per
data.seed (the big part, a load test, runs once); --precision fp32 turns bf16 autocast off.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import itertools
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: The big model's shape per preset: ~100M parameters on a GPU, a quick stand-in on CPU.
BIG_SHAPES: dict[str, dict[str, int]] = {
    "gpu": {"hidden": 768, "layers": 12, "intermediate": 3072, "heads": 12, "kv_heads": 4},
    "cpu": {"hidden": 128, "layers": 2, "intermediate": 256, "heads": 2, "kv_heads": 1},
}


def build_big_model(tokenizer_dir: Path, out_dir: Path, shape: dict[str, int]) -> int:
    """A random-init Qwen2 with the tiny model's tokenizer, saved like a checkpoint; its size."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=shape["hidden"],
        intermediate_size=shape["intermediate"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        head_dim=shape["hidden"] // shape["heads"],
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return sum(p.numel() for p in model.parameters())


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _reset_peak() -> None:
    import torch

    gc.collect()
    if _cuda():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _peak_gib() -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**30 if _cuda() else None


def _evaluate(cfg: Any, model_dir: Path, val_file: Path) -> tuple[dict[str, float], float | None]:
    from judgeflow.evaluation import evaluate_judge, params_from

    _reset_peak()
    start = time.perf_counter()
    result = evaluate_judge(model_dir, val_file, **params_from(cfg))
    metrics = dict(result.metrics)
    metrics["seconds"] = time.perf_counter() - start
    peak = _peak_gib()
    gc.collect()
    return metrics, peak


#: Labelled pointwise rows shipped with the package; `judge_file` reads them as unlabeled input.
JUDGE_ROWS = Path(__file__).parents[1] / "src/judgeflow/samples/tinyjudge_pointwise_val.jsonl"


def _judge(cfg: Any, model_dir: Path, rows_file: Path, out_file: Path) -> dict[str, Any]:
    """Batch judging as `stages.judge.judge_stage` runs it, timed, with agreement to the labels."""
    from judgeflow.engines.generate import HFGenerator
    from judgeflow.inference.batch import judge_file

    _reset_peak()
    start = time.perf_counter()
    summary = judge_file(
        HFGenerator(model_dir, batch_size=cfg.evaluation.batch_size),
        "pointwise",
        rows_file,
        str(out_file),
        model=str(model_dir),
        max_new_tokens=cfg.evaluation.max_new_tokens,
        batch_size=cfg.evaluation.batch_size,
    )
    seconds = time.perf_counter() - start
    rows = [json.loads(line) for line in rows_file.read_text().splitlines() if line.strip()]
    labels = [r["output"][0]["answer"]["label"]["helpfulness"] for r in rows]
    verdicts = [json.loads(line) for line in out_file.read_text().splitlines()]
    agree = sum(v["score"] == label for v, label in zip(verdicts, labels, strict=True))
    return {
        "rows": summary.total,
        "valid": summary.total - summary.format_failures,
        "agreement": agree / len(rows),
        "verdicts": summary.verdicts,
        "seconds": seconds,
        "rows_per_second": summary.total / seconds,
        "peak_gib": _peak_gib(),
    }


def run_part(
    name: str,
    model_dir: Path,
    data_dir: Path,
    out_dir: Path,
    overrides: list[str],
    *,
    precision: str = "auto",
    judge_rows: Path | None = None,
) -> dict[str, Any]:
    """GRPO through judgeflow's entry points, evaluated before and after; the figures."""
    import torch

    from judgeflow.config import load_config
    from judgeflow.engines import trl

    train_file = data_dir / "pointwise.parquet"
    val_file = data_dir / "pointwise.val.parquet"
    cfg = load_config(
        "grpo-pointwise",
        profile="tiny",
        overrides=[f"model.path={model_dir}", *overrides],
        report=lambda line: print(f"[{name}] config: {line}", flush=True),
    )
    params = trl.params_from(cfg, out_dir / name)
    if precision == "fp32":  # the engine's default is bf16 autocast on a bf16 GPU
        params = dataclasses.replace(params, bf16=False)
    print(f"[{name}] {params}", flush=True)

    before, before_peak = _evaluate(cfg, model_dir, val_file)
    print(f"[{name}] eval before: {before}", flush=True)

    rewards: dict[int, float] = {}
    lengths: dict[int, float] = {}
    stamps: list[float] = []

    def sink(metrics: dict[str, float], step: int) -> None:
        if "train/reward_mean" in metrics:
            rewards[step] = metrics["train/reward_mean"]
        if "train/completion_length" in metrics:
            lengths[step] = metrics["train/completion_length"]

    _reset_peak()
    start = time.perf_counter()
    result = trl.train_grpo(
        params,
        train_file,
        eval_file=val_file,  # as the flow's train stage passes it
        metrics_sink=sink,
        progress=lambda step, total: stamps.append(time.perf_counter()),
        resume=False,
    )
    train_seconds = time.perf_counter() - start
    train_peak = _peak_gib()

    args = torch.load(result.final_model_dir / "training_args.bin", weights_only=False)
    saved = json.loads((result.final_model_dir / "config.json").read_text())
    weights = saved.get("dtype") or saved.get("torch_dtype")
    after, after_peak = _evaluate(cfg, result.final_model_dir, val_file)
    print(f"[{name}] eval after: {after}", flush=True)
    judging = None
    if judge_rows is not None:
        judging = _judge(
            cfg, result.final_model_dir, judge_rows, out_dir / f"{name}.verdicts.jsonl"
        )
        print(f"[{name}] judge_file: {judging}", flush=True)

    steps = [rewards[s] for s in sorted(rewards)]
    third = max(1, len(steps) // 3)
    step_times = [b - a for a, b in zip([start, *stamps], stamps, strict=False)]
    return {
        "part": name,
        "seed": cfg.data.seed,
        "device": torch.cuda.get_device_name() if _cuda() else "cpu",
        "dtype": f"{weights} weights" + (", bf16 autocast" if args.bf16 else ""),
        "steps": result.global_step,
        "completion_tokens_max": params.max_completion_length,
        "completion_length_mean": statistics.fmean(lengths.values()) if lengths else None,
        "seconds_per_step_median": statistics.median(step_times) if step_times else None,
        "train_seconds": train_seconds,
        "peak_gib_train": train_peak,
        "peak_gib_eval": max((p for p in (before_peak, after_peak) if p is not None), default=None),
        "reward_first_third": statistics.fmean(steps[:third]) if steps else None,
        "reward_last_third": statistics.fmean(steps[-third:]) if steps else None,
        "eval_before": before,
        "eval_after": after,
        "train_rewards": steps,
        "judging": judging,
    }


def _fmt(value: Any, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)


def table(rows: list[dict[str, Any]]) -> str:
    """The figures as a text table, one column per part and seed."""

    def change(row: dict[str, Any], key: str) -> str:
        before, after = row["eval_before"].get(key), row["eval_after"].get(key)
        return f"{_fmt(before)} → {_fmt(after)}"

    lines = [
        ("device", lambda r: r["device"]),
        ("dtype", lambda r: r["dtype"]),
        ("seed (data.seed)", lambda r: str(r["seed"])),
        ("parameters", lambda r: f"{r['parameters'] / 1e6:.1f}M"),
        ("steps", lambda r: str(r["steps"])),
        (
            "completion len mean (cap)",
            lambda r: f"{_fmt(r['completion_length_mean'], '.1f')} ({r['completion_tokens_max']})",
        ),
        ("s/step (median)", lambda r: _fmt(r["seconds_per_step_median"])),
        ("train seconds (all)", lambda r: _fmt(r["train_seconds"], ".1f")),
        ("peak GiB train", lambda r: _fmt(r["peak_gib_train"], ".2f")),
        ("peak GiB eval", lambda r: _fmt(r["peak_gib_eval"], ".2f")),
        (
            "train reward 1st→last third",
            lambda r: f"{_fmt(r['reward_first_third'])} → {_fmt(r['reward_last_third'])}",
        ),
        ("eval reward_mean", lambda r: change(r, "eval/reward_mean")),
        ("eval exact_match", lambda r: change(r, "eval/exact_match")),
        ("eval format_failure_rate", lambda r: change(r, "eval/format_failure_rate")),
        (
            "eval seconds (before/after)",
            lambda r: (
                f"{_fmt(r['eval_before']['seconds'], '.1f')}"
                f"/{_fmt(r['eval_after']['seconds'], '.1f')}"
            ),
        ),
        ("judge_file rows/s", lambda r: _fmt((r["judging"] or {}).get("rows_per_second"), ".1f")),
        (
            "judge_file valid, agreement",
            lambda r: (
                f"{r['judging']['valid']}/{r['judging']['rows']}, {r['judging']['agreement']:.3f}"
                if r["judging"]
                else "–"
            ),
        ),
    ]
    cells = [[label, *(fn(r) for r in rows)] for label, fn in lines]
    header = ["", *(r["part"] for r in rows)]
    widths = [max(len(str(c[i])) for c in [header, *cells]) for i in range(len(header))]
    return "\n".join(
        " | ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, *cells]
    )


def run_stamp(argv: list[str]) -> dict[str, Any]:
    """The run's stamp (benchmarks/stamp.py), with the GPU it ran on."""
    import torch
    from stamp import stamp

    out = stamp(" ".join(["benchmarks/gpu_check.py", *argv]))
    if torch.cuda.is_available():
        out["machine"] |= {"gpu": torch.cuda.get_device_name(0), "gpus": torch.cuda.device_count()}
    out["packages"]["cuda"] = torch.version.cuda or "none"
    return out


def render(results: dict[str, Any]) -> str:
    """The printed table (gpu-check.txt) from the results file: a stamp line, then the table.
    tests/benchmarks/test_results_stamps.py holds the committed .txt to this."""
    git, versions = results["git"], results["packages"]
    modified = git["modified"]
    tree = (" (modified files not recorded)" if modified is None
            else f" with {len(modified)} modified files" if modified else "")  # fmt: skip
    head = (
        f"benchmarks/gpu_check.py, {results['date'][:10]}, commit {git['commit'][:7]}{tree}: "
        f"torch {versions['torch']}, transformers {versions['transformers']}, trl {versions['trl']}"
    )
    return f"{head}\n\n{table(results['runs'])}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="folder with sft/ and data/")
    parser.add_argument("--steps", type=int, help="cap both parts at N GRPO steps (CPU smoke)")
    parser.add_argument("--big-steps", type=int, default=10)
    parser.add_argument("--big-completion", type=int, default=256, help="big part's tokens")
    parser.add_argument("--big-preset", choices=sorted(BIG_SHAPES), help="default: gpu on CUDA")
    parser.add_argument("--parts", default="tiny,big")
    parser.add_argument(
        "--precision", choices=["auto", "fp32"], default="auto", help="fp32: no bf16 autocast"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="config override, all parts"
    )
    parser.add_argument(
        "--seeds", help="comma-separated data.seed values: a tiny run each (big runs once)"
    )
    parser.add_argument("--out", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--table", type=Path, help="write the printed table here")
    parser.add_argument(
        "--render", type=Path, metavar="JSON", help="only print (or --table) JSON's table again"
    )
    args = parser.parse_args(argv)
    if args.render:
        text = render(json.loads(args.render.read_text()))
        print(text)
        if args.table:
            args.table.write_text(text)
        return 0
    if args.data is None:
        parser.error("--data is required")
    results = run_stamp(sys.argv[1:] if argv is None else argv)

    import torch

    from judgeflow.log_setup import JOB_FORMAT, show_logs

    show_logs(stream="stdout", fmt=JOB_FORMAT)  # the engine's step lines, as a job shows them

    out = args.out or Path(tempfile.mkdtemp(prefix="gpu_check-"))
    out.mkdir(parents=True, exist_ok=True)
    sft_dir, data_dir = args.data / "sft", args.data / "data"
    print(f"torch {torch.__version__}, cuda {_cuda()}, work folder {out}", flush=True)

    seeds: list[str | None] = list(args.seeds.split(",")) if args.seeds else [None]
    rows = []
    for part, seed in itertools.product(args.parts.split(","), seeds):
        if part == "big" and seed != seeds[0]:
            continue  # a load test: once is enough
        extra = [*args.set, *([f"data.seed={seed}"] if seed is not None else [])]
        suffix = f"-s{seed}" if seed is not None else ""
        if part == "tiny":
            overrides = [f"grpo.max_steps={args.steps}"] if args.steps else []
            row = run_part(
                f"tiny{suffix}",
                sft_dir,
                data_dir,
                out,
                [*overrides, *extra],
                precision=args.precision,
                judge_rows=JUDGE_ROWS,
            )
            row["parameters"] = _parameters(sft_dir)
        elif part == "big":
            preset = args.big_preset or ("gpu" if _cuda() else "cpu")
            big_dir = out / "big-model"
            size = build_big_model(sft_dir, big_dir, BIG_SHAPES[preset])
            steps = min(args.big_steps, args.steps or args.big_steps)
            overrides = [
                f"grpo.max_steps={steps}",
                "grpo.learning_rate=1e-5",  # the tiny profile's rate suits a 0.56M-parameter model only
                f"data.max_response_length={args.big_completion}",
                f"evaluation.max_new_tokens={args.big_completion}",
            ]
            row = run_part(
                f"big-{preset}{suffix}",
                big_dir,
                data_dir,
                out,
                [*overrides, *extra],
                precision=args.precision,
            )
            row["parameters"] = size
        else:
            parser.error(f"unknown part {part!r} (tiny, big)")
        rows.append(row)
        results["runs"] = rows
        if args.json:  # after every part, so a run cut short still leaves its figures
            args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
        gc.collect()

    print()
    text = render(results)
    print(text)
    if args.table:
        args.table.write_text(text)
    return 0


def _parameters(model_dir: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as f:
        return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())  # noqa: SIM118


if __name__ == "__main__":
    sys.exit(main())
