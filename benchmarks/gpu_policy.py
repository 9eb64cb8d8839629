"""GPU check of the policy side: the tiny RLVR policy trained by judgeflow's TRL engine on one
CUDA device, paid by the verifiers (zero-variance skipping off and on) and by the tiny judge
loaded in the training process; then the judge reward's throughput.

    .venv/bin/python benchmarks/gpu_policy.py --data DIR --json F --table T   # on a GPU
    .venv/bin/python benchmarks/gpu_policy.py --data DIR --steps 2            # CPU smoke

DIR holds `sft/` (the RLVR demo's SFT model: `judgeflow run rlvr --profile tiny` leaves it under
`$JUDGEFLOW_HOME/artifacts/runs/*/sft`), `judge/` (the judge `rlvr-judged --profile tiny` trained
first: its champion's weights), `rlvr/` and `judged/` (each recipe's prepared `train.parquet`
and held-out `val.parquet`).

Per seed (`data.seed`) three runs, as `judgeflow run` trains them but through the entry points
(`load_config` -> `engines.trl.params_from` -> `train_grpo`, the held-out file passed as the
flow passes it): `rlvr` with `grpo.filter_zero_std_samples` false and true, and `judged` (the
rlvr-judged profile, `reward.judge` the judge's folder). Each is evaluated on the held-out
prompts before and after (`evaluate_judge` with the HF generator, the verifiers scoring), and
records seconds per optimizer step (median and mean, generation and reward included), the
share of completions in groups with reward variance, the training reward's first and last
third, peak GPU memory, and a few held-out answers before and after. The runs are separate
processes; `--parallel N` runs N at once on the one GPU (each then shares it: the table says
how many ran together). Last, `throughput`: the judge reward (`inference.judge_reward`,
what pays a policy) scoring the same rollouts at several `reward.judge_batch_size`s, alone on
the device: rollouts per second.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: (name, recipe, overrides beyond the seed): the runs made per seed.
RUNS: dict[str, tuple[str, list[str]]] = {
    "rlvr-zv-off": ("rlvr", ["grpo.filter_zero_std_samples=false"]),
    "rlvr-zv-on": ("rlvr", ["grpo.filter_zero_std_samples=true"]),
    "judged": ("rlvr-judged", ["grpo.filter_zero_std_samples=true"]),
}
#: The judge by its weights (no registry here): its mode, and its replies' length as its run
#: evaluated it (what `registry.paying_judge` reads off a registered version).
JUDGE_SETS = ["reward.judge_mode=pointwise", "reward.judge_max_new_tokens=32",
              "reward.judge_recipe=null", "reward.judge_profile=null"]  # fmt: skip
#: Held-out answers shown per run, before and after.
EXAMPLES = 6


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _evaluate(cfg: Any, model_dir: Path, val_file: Path) -> dict[str, Any]:
    from judgeflow.evaluation import evaluate_judge, params_from, read_rows

    start = time.perf_counter()
    result = evaluate_judge(model_dir, val_file, **params_from(cfg))
    questions = [row["prompt"][-1]["content"] for row in read_rows(val_file)]
    every = max(1, len(result.predictions) // EXAMPLES)  # spread over the file's subsets
    answers = [
        {"question": questions[i], **{k: p.get(k) for k in ("label", "completion", "reward")}}
        for i, p in list(enumerate(result.predictions))[::every][:EXAMPLES]
    ]
    return {**result.metrics, "seconds": time.perf_counter() - start, "examples": answers}


def run_one(name: str, seed: int, data: Path, work: Path, steps: int | None) -> dict[str, Any]:
    """One GRPO run through judgeflow's entry points, evaluated before and after."""
    import torch

    from judgeflow.config import load_config
    from judgeflow.engines import trl

    kind, _, _ = name.rpartition("-s")
    recipe, overrides = RUNS[kind]
    folder = data / ("judged" if recipe == "rlvr-judged" else "rlvr")
    train_file, val_file = folder / "train.parquet", folder / "val.parquet"
    sets = [f"model.path={data / 'sft'}", f"data.seed={seed}", *overrides]
    if recipe == "rlvr-judged":  # the judge by its weights: no registry here
        sets += [f"reward.judge={data / 'judge'}", *JUDGE_SETS]
    if steps:
        sets += [f"grpo.max_steps={steps}"]
    cfg = load_config(recipe, profile="tiny", overrides=sets, report=lambda line: None)
    params = trl.params_from(cfg, work / name)
    before = _evaluate(cfg, data / "sft", val_file)
    print(f"[{name}] before: {before}", flush=True)

    history: dict[str, list[float]] = {}
    stamps: list[float] = []

    def sink(metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            history.setdefault(key, []).append(value)

    def progress(step: int, total: int) -> None:
        stamps.append(time.perf_counter())
        if step % 25 == 0:  # what a run cut short still tells: its steps' times so far
            times = [b - a for a, b in zip([start, *stamps], stamps, strict=False)]
            partial = {"run": name, "steps": step, "step_seconds": times, "history": history}
            (work / f"{name}.partial.json").write_text(json.dumps(partial))

    if _cuda():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    result = trl.train_grpo(
        params, train_file, eval_file=val_file, metrics_sink=sink, progress=progress, resume=False
    )
    train_seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**30 if _cuda() else None
    final = Path(result.final_model_dir)
    after = _evaluate(cfg, final, val_file)
    print(f"[{name}] after: {after}", flush=True)

    step_times = [b - a for a, b in zip([start, *stamps], stamps, strict=False)]
    rewards = history.get("train/reward_mean", [])
    third = max(1, len(rewards) // 3)
    ratios = history.get("train/real_batch_size_ratio", [])
    return {
        "run": name,
        "kind": kind,
        "recipe": recipe,
        "seed": seed,
        "filter_zero_std_samples": params.filter_zero_std_samples,
        "device": torch.cuda.get_device_name() if _cuda() else "cpu",
        "bf16": bool(torch.load(final / "training_args.bin", weights_only=False).bf16),
        "steps": result.global_step,
        "seconds_per_step_median": statistics.median(step_times) if step_times else None,
        "seconds_per_step_mean": statistics.fmean(step_times) if step_times else None,
        "train_seconds": train_seconds,
        "peak_gib_train": peak,
        "mean_real_batch_size_ratio": statistics.fmean(ratios) if ratios else None,
        "reward_first_third": statistics.fmean(rewards[:third]) if rewards else None,
        "reward_last_third": statistics.fmean(rewards[-third:]) if rewards else None,
        "judge_format_failure_rate_mean": (
            statistics.fmean(v) if (v := history.get("train/judge_format_failure_rate")) else None
        ),
        "before": before,
        "after": after,
    }


def throughput(
    data: Path, work: Path, sizes: list[int], rollouts: int, out: list[dict[str, Any]]
) -> None:
    """The judge reward scoring `rollouts` rollouts of the judged training rows (each row's
    options and other words as answers, in the R1 format) at each judge batch size: rollouts per
    second, for the tiny judge and for a random-init Qwen2 of about 100M parameters in its place
    (a load test: it writes no verdict, so every reply is counted unparsed; on CPU a small
    stand-in)."""
    import pyarrow.parquet as pq
    import torch
    from gpu_check import BIG_SHAPES, build_big_model

    from judgeflow.config import load_config
    from judgeflow.inference.judge_reward import LocalJudge, compute_score

    cfg = load_config(
        "rlvr-judged",
        profile="tiny",
        overrides=[f"reward.judge={data / 'judge'}", *JUDGE_SETS],
        report=lambda line: None,
    )
    settings = cfg.policy_reward_kwargs()
    rows = pq.read_table(data / "judged" / "train.parquet").to_pylist()
    sources, answers, truths, extras = [], [], [], []
    words = ("cat", "dog", "7", "fox", "sheep", "12", "ear", "")
    for i in range(rollouts):
        row = rows[i % len(rows)]
        sources.append(row["data_source"])
        truths.append(row["reward_model"]["ground_truth"])
        extras.append(row["extra_info"])
        answers.append(f"<think>x</think><answer>{words[i % len(words)]}</answer>")
    big = work / "big-judge"
    parameters = build_big_model(data / "judge", big, BIG_SHAPES["gpu" if _cuda() else "cpu"])
    # the random judge never parses: 1 lets it go on (a paying judge would be stopped)
    judges = [("tiny judge", data / "judge", settings),
              (f"random {parameters / 1e6:.0f}M", big, {**settings, "judge_max_failure_rate": 1.0})]  # fmt: skip
    for judge_name, weights, asked in judges:
        for size in sizes if weights != big else [s for s in sizes if s >= 64] or sizes:
            judge = LocalJudge(str(weights), "pointwise", asked["judge_max_new_tokens"], size)
            compute_score(sources[:size], answers[:size], truths[:size], extras[:size],
                          client=judge, **asked)  # fmt: skip  # load and warm up
            if _cuda():
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            scored = compute_score(sources, answers, truths, extras, client=judge, **asked)
            if _cuda():
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            out.append({
                "judge": judge_name,
                "judge_batch_size": size,
                "rollouts": rollouts,
                "seconds": seconds,
                "rollouts_per_second": rollouts / seconds,
                "judged": sum(r["judged"] for r in scored),
                "judge_format_failures": sum(r["judge_format_failure"] for r in scored),
                "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if _cuda() else None,
            })  # fmt: skip
            print(f"[throughput] {out[-1]}", flush=True)
            del judge
            gc.collect()


def _stamp(argv: list[str], commit: str | None) -> dict[str, Any]:
    import torch
    from stamp import stamp

    out = stamp(" ".join(["benchmarks/gpu_policy.py", *argv]))
    if out["git"]["commit"] is None and commit:  # the device machine's copy has no .git
        out["git"] = {"commit": commit, "modified": None}
        out["reconstructed"] = {"git": "the commit the copy was taken from, passed as --commit"}
    if torch.cuda.is_available():
        out["machine"] |= {"gpu": torch.cuda.get_device_name(0), "gpus": torch.cuda.device_count()}
    out["packages"]["cuda"] = torch.version.cuda or "none"
    return out


def _fmt(value: Any, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)


def table(results: dict[str, Any]) -> str:
    """The runs as a text table, one column per run, and the throughput lines."""
    runs = [r for r in results["runs"] if "error" not in r]

    def change(key: str) -> Any:
        return lambda r: f"{_fmt(r['before'].get(key))} → {_fmt(r['after'].get(key))}"

    lines = [
        ("device", lambda r: r["device"]),
        ("seed (data.seed)", lambda r: str(r["seed"])),
        ("zero-variance skipping", lambda r: "on" if r["filter_zero_std_samples"] else "off"),
        ("runs sharing the GPU", lambda r: str(r.get("ran_together", results.get("parallel")))),
        ("steps", lambda r: str(r["steps"])),
        ("s/step median (mean)", lambda r: f"{_fmt(r['seconds_per_step_median'])} "
                                           f"({_fmt(r['seconds_per_step_mean'])})"),
        ("train seconds", lambda r: _fmt(r["train_seconds"], ".1f")),
        ("completions kept (mean)", lambda r: _fmt(r["mean_real_batch_size_ratio"], ".2f")),
        ("peak GiB train", lambda r: _fmt(r["peak_gib_train"], ".2f")),
        ("train reward 1st→last third", lambda r: f"{_fmt(r['reward_first_third'])} → "
                                                  f"{_fmt(r['reward_last_third'])}"),
        ("held-out verifiable_correct", change("eval/verifiable_correct_rate")),
        ("  numbers (gsm8k)", change("eval/subset/gsm8k/verifiable_correct_rate")),
        ("  animals (string_matcher)", change("eval/subset/string_matcher/verifiable_correct_rate")),
        ("held-out format_failure", change("eval/format_failure_rate")),
    ]  # fmt: skip
    cells = [[label, *(fn(r) for r in runs)] for label, fn in lines]
    header = ["", *(r["run"] for r in runs)]
    widths = [max(len(str(c[i])) for c in [header, *cells]) for i in range(len(header))]
    text = [
        " | ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, *cells]
    ]
    for r in results["runs"]:
        if "error" in r:
            cut = r.get("partial") or {}
            times = cut.get("step_seconds") or []
            made = (f"cut short after {cut.get('steps')} steps, "
                    f"{statistics.median(times):.3f} s/step median; " if times else "")  # fmt: skip
            text.append(f"{r['run']}: {made}{r['error'].splitlines()[0]}")
    for c in results.get("cut_short") or []:
        text.append(
            f"{c['run']} with {c['ran_together']} sharing the GPU: cut short at the time budget "
            f"after {c['steps']} steps, {c['seconds_per_step_median']:.3f} s/step median "
            "(made again, above)"
        )
    for t in results.get("throughput") or []:
        text.append(
            f"judge reward, {t['judge']}, batch {t['judge_batch_size']}: "
            f"{t['rollouts_per_second']:.0f} "
            f"rollouts/s ({t['rollouts']} in {t['seconds']:.1f} s, "
            f"{t['judge_format_failures']:.0f} unparsed)"
        )
    return "\n".join(text)


def render(results: dict[str, Any]) -> str:
    """The printed table (gpu-policy.txt) from the results file: a stamp line, then the table."""
    versions, git = results["packages"], results["git"]
    head = (
        f"benchmarks/gpu_policy.py, {results['date'][:10]}, commit {str(git['commit'])[:7]}: "
        f"torch {versions.get('torch')}, transformers {versions.get('transformers')}, "
        f"trl {versions.get('trl')}"
    )
    return f"{head}\n\n{table(results)}\n"


def merge(files: list[Path], commit: str) -> dict[str, Any]:
    """Several calls' results as one: a later file's run replaces an earlier one's of the same
    name (a run cut short at the budget, made again); each run says how many shared the GPU.
    The first file's stamp, every file's command; the throughput of the last file that measured
    it at more than one batch size. `commit`: the commit whose tree the calls ran (the device
    machine's copy can carry an older .git, with the newer files as modified)."""
    loaded = [json.loads(f.read_text()) for f in files]
    merged = {**loaded[0], "command": " ; then ".join(r["command"] for r in loaded)}
    runs: dict[str, dict[str, Any]] = {}
    cut: list[dict[str, Any]] = []
    for results in loaded:
        for run in results["runs"]:
            if "error" in run and run["run"] in runs:
                continue
            if "error" in runs.get(run["run"], {}):  # cut short before, made again: kept apart
                cut.append(runs[run["run"]])
            runs[run["run"]] = {**run, "ran_together": results["parallel"]}
    merged["runs"] = list(runs.values())
    merged["cut_short"] = [
        {"run": r["run"], "ran_together": r["ran_together"], "steps": r["partial"]["steps"],
         "seconds_per_step_median": statistics.median(r["partial"]["step_seconds"])}
        for r in cut if r.get("partial")
    ]  # fmt: skip
    merged["parallel"] = None
    merged["throughput"] = next(
        r["throughput"] for r in reversed(loaded) if len(r.get("throughput") or []) > 2
    )
    was = merged["git"]
    merged["git"] = {"commit": commit, "modified": []}
    merged["reconstructed"] = {
        "git": f"the device machine's copy held .git at {was['commit'][:10]} with "
        f"{len(was['modified'])} files modified; those are the files {commit[:10]} changed "
        "since (benchmarks/gpu_policy.py too, untracked there): the tree of that commit"
    }
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--kinds", default=",".join(RUNS))
    parser.add_argument("--steps", type=int, help="cap every run at N GRPO steps (CPU smoke)")
    parser.add_argument("--parallel", type=int, help="runs at once (default: all)")
    parser.add_argument("--budget-s", type=float, default=3600, help="stop runs still going then")
    parser.add_argument("--batch-sizes", default="16,64,256,1024", help="throughput's")
    parser.add_argument("--rollouts", type=int, default=1024, help="throughput's")
    parser.add_argument("--commit", help="the commit measured, where the copy has no .git")
    parser.add_argument("--out", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--table", type=Path)
    parser.add_argument("--render", type=Path, metavar="JSON")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="JSON", help="with --commit")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # NAME-sSEED: one run, in this process
    args = parser.parse_args(argv)
    if args.render:
        text = render(json.loads(args.render.read_text()))
        print(text)
        if args.table:
            args.table.write_text(text)
        return 0
    if args.merge:
        if not (args.commit and args.json):
            parser.error("--merge needs --commit and --json")
        return _finish(merge(args.merge, args.commit), args)
    if args.data is None:
        parser.error("--data is required")
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu_policy-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.one:
        from judgeflow.log_setup import JOB_FORMAT, show_logs

        show_logs(stream="stdout", fmt=JOB_FORMAT)
        seed = int(args.one.rpartition("-s")[2])
        row = run_one(args.one, seed, args.data, out, args.steps)
        (out / f"{args.one}.json").write_text(json.dumps(row, indent=2, default=str))
        return 0

    results = _stamp(sys.argv[1:] if argv is None else argv, args.commit)
    names = [f"{k}-s{s}" for s in args.seeds.split(",") for k in args.kinds.split(",")]
    results |= {"parallel": args.parallel or len(names), "runs": [], "throughput": None}
    deadline = time.monotonic() + args.budget_s
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    pending, running = list(names), {}
    while pending or running:
        while pending and len(running) < results["parallel"]:
            name = pending.pop(0)
            log = (out / f"{name}.log").open("w")
            command = [sys.executable, __file__, "--data", str(args.data), "--out", str(out),
                       "--one", name, *(["--steps", str(args.steps)] if args.steps else [])]  # fmt: skip
            running[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
            print(f"started {name}", flush=True)
        time.sleep(1)
        for name, proc in list(running.items()):
            if proc.poll() is None and time.monotonic() < deadline:
                continue
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            del running[name]
            done = out / f"{name}.json"
            partial = out / f"{name}.partial.json"
            if done.exists():
                row = json.loads(done.read_text())
            else:
                tail = (out / f"{name}.log").read_text()[-1500:]
                row = {"run": name, "error": f"exit {proc.returncode}: {tail}"}
                if partial.exists():  # cut short: the steps it made
                    row["partial"] = json.loads(partial.read_text())
            results["runs"].append(row)
            print(f"finished {name}: {row.get('error') or row['after'].get('eval/verifiable_correct_rate')}",
                  flush=True)  # fmt: skip
            if args.json:
                args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    results["runs"].sort(key=lambda r: names.index(r["run"]))
    sizes = [int(size) for size in args.batch_sizes.split(",")]
    results["throughput"] = []
    try:  # the judge's throughput, alone on the device
        throughput(args.data, out, sizes, args.rollouts, results["throughput"])
    except Exception as exc:  # the runs' figures are written all the same
        results["throughput_error"] = repr(exc)
    return _finish(results, args)


def _finish(results: dict[str, Any], args: argparse.Namespace) -> int:
    """Write the results file (--json) and print (and --table) its table."""
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    text = render(results)
    print(text)
    if args.table:
        args.table.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
