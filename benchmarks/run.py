"""judgeflow's benchmarks: one command, one table, one results file the README is rendered from.

    .venv/bin/python benchmarks/run.py --update-readme      # everything (root: Slurm), README too
    .venv/bin/python benchmarks/run.py --quick              # tiny sizes, no Slurm: a check
    .venv/bin/python benchmarks/run.py --only rewards ray-startup --json results.json

A full run of every benchmark writes benchmarks/results.json (date, machine, git commit, every
row and raw figure), which is committed; `--update-readme` (or `benchmarks/readme.py`) then
rewrites the README's generated regions from it. `--quick` and `--only` runs write a results file
only where `--json` says (`--quick` is recorded in it).

Benchmarks (each module's docstring says exactly what it measures):
  prepare-judge   prepare_judge vs pandas iterrows and batched pyarrow: rows/s, peak RSS, same
                  rows; and judgeflow's peak RSS as the input grows (20,000 → 1,000,000 rows)
  prepare-grrm    GRRM SFT and RL preparation vs the same two baselines (grrm_prepare.py), and
                  judgeflow's peak RSS as the input grows
  rewards         compute_score calls/s per recipe: well-formed, malformed, long reasoning
  ray-startup     Ray in a 2-node dev Slurm allocation: p50/p95 over 10 jobs vs fixed sleeps
  cached-retrain  a second `judgeflow run grpo-pointwise --profile tiny`, everything cached
  demo-stages     the demo's seconds by stage (run-summary), and prepare's import overhead
`--quick` shrinks every size and runs ray-startup as two local ranks without Slurm; its figures
check the code, they are not figures to quote.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import grrm_prepare
import judge_prepare
import pipeline
import ray_startup
import readme
import rewards
from stamp import stamp

BENCHMARKS = ("prepare-judge", "prepare-grrm", "rewards", "ray-startup", "cached-retrain",
              "demo-stages")  # fmt: skip
RESULTS = Path(__file__).resolve().parent / "results.json"
BASELINES = {"pandas": "pandas iterrows", "pyarrow": "batched pyarrow"}


@dataclass
class Row:
    """One line of the table: `ours` is judgeflow's figure, `baseline` what it is compared to."""

    benchmark: str
    case: str
    metric: str
    ours: str
    baseline: str = ""
    vs: str = ""
    note: str = ""


def _mib(kb: float) -> str:
    return f"{kb / 1024:,.0f} MiB"


def _s(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds >= 1 else f"{seconds:.2f} s"


def _prep_rows(bench: str, case: str, res: dict[str, Any]) -> list[Row]:
    """rows/s, then peak RSS, of one preparation against each baseline (`res`: `ours`, one
    summary per baseline, `identical`: whether each baseline wrote judgeflow's rows)."""
    ours = res["ours"]
    rate = ours["rows"] / ours["seconds"]
    speed, memory = [], []
    for impl, name in BASELINES.items():
        base = res[impl]
        base_rate = base["rows"] / base["seconds"]
        speed.append(
            Row(
                bench,
                case,
                "rows/s (median)",
                f"{rate:,.0f}",
                f"{base_rate:,.0f} ({name})",
                f"×{rate / base_rate:.1f}",
                f"{ours['rows']:,} rows; identical rows: {res['identical'][impl]}",
            )
        )
        memory.append(
            Row(
                bench,
                case,
                "peak RSS",
                _mib(ours["rss_peak_kb"]),
                f"{_mib(base['rss_peak_kb'])} ({name})",
                f"{ours['rss_peak_kb'] / base['rss_peak_kb']:.2f}×",
                f"after imports {_mib(ours['rss_imports_kb'])} / {_mib(base['rss_imports_kb'])}",
            )
        )
    return speed + memory


# --------------------------------------------------------------------------- the benchmarks


def bench_prepare_judge(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    rows, repeat = (300, 1) if quick else (20000, 3)
    with tempfile.TemporaryDirectory(prefix="jfbench-") as tmp:
        res = judge_prepare.compare(rows, repeat, Path(tmp))
    case = f"pointwise, {rows:,} OpenJudge rows ({res['input_mib']:.1f} MiB JSONL)"
    sizes = (300, 6000) if quick else (20_000, 1_000_000)
    res["growth"] = small, large = judge_prepare.growth(sizes)
    grows = Row("prepare-judge", f"pointwise, {sizes[0]:,} → {sizes[1]:,} rows "
                f"({small['input_mib']:,.0f} → {large['input_mib']:,.0f} MiB JSONL)",
                "peak RSS as the input grows",
                f"{_mib(small['rss_peak_kb'])} → {_mib(large['rss_peak_kb'])}", "", "",
                f"{small['rows_per_s']:,.0f} → {large['rows_per_s']:,.0f} rows/s; "
                "one run each")  # fmt: skip
    return [*_prep_rows("prepare-judge", case, res), grows], res


def bench_prepare_grrm(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    groups, repeat = (300, 1) if quick else (20000, 3)
    m = k = 4  # subgroup and shuffle augmentation, the GRRM recipe's defaults
    raw: dict[str, Any] = {"groups": groups, "m": m, "k": k}
    table: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="jfbench-") as tmp:
        root = Path(tmp)
        data = root / "input.parquet"
        grrm_prepare.generate(data, groups)
        for kind in ("sft", "rl"):
            res: dict[str, Any] = {}
            for impl in grrm_prepare.IMPLS:
                out = root / f"{impl}-{kind}.parquet"
                runs = [grrm_prepare.measure(impl, kind, data, out, m, k) for _ in range(repeat)]
                res[impl] = grrm_prepare.summarise(runs)
            res["identical"] = {
                impl: grrm_prepare.same_rows(
                    root / f"ours-{kind}.parquet", root / f"{impl}-{kind}.parquet"
                )
                for impl in BASELINES
            }
            raw[kind] = res
            case = f"{kind.upper()}, {groups:,} groups" + (f" (M={m}, K={k})" * (kind == "rl"))
            table += _prep_rows("prepare-grrm", case, res)
    growth, raw["growth"] = _grrm_growth((100, 1600) if quick else (5000, 80000), m, k)
    return table + growth, raw


def _grrm_growth(sizes: tuple[int, int], m: int, k: int) -> tuple[list[Row], dict[str, Any]]:
    """judgeflow's peak RSS (and rows/s) at a small and a 16× larger input: a streaming
    preparation's memory should barely grow. One run per size."""
    raw: dict[str, Any] = {"groups": list(sizes)}
    table: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="jfbench-") as tmp:
        root = Path(tmp)
        for groups in sizes:
            grrm_prepare.generate(root / f"input-{groups}.parquet", groups)
        for kind in ("sft", "rl"):
            runs = [grrm_prepare.measure("ours", kind, root / f"input-{groups}.parquet",
                                         root / "out.parquet", m, k) for groups in sizes]  # fmt: skip
            raw[kind] = runs
            small, large = runs
            table.append(
                Row("prepare-grrm", f"{kind.upper()}, {sizes[0]:,} → {sizes[1]:,} groups",
                    "peak RSS as the input grows", f"{_mib(small['rss_peak_kb'])} → "
                    f"{_mib(large['rss_peak_kb'])}", "", "",
                    f"{small['rows'] / small['seconds']:,.0f} → "
                    f"{large['rows'] / large['seconds']:,.0f} rows/s; one run each"))  # fmt: skip
    return table, raw


def bench_rewards(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    calls, repeat = (200, 1) if quick else (2000, 5)
    raw = rewards.run_all(calls, repeat)
    table = [
        Row("rewards", f"{name.replace('/', ', ')}", "calls/s (median)", f"{r['calls_per_s']:,.0f}",
            note=f"{r['us_per_call']:.1f} µs/call; completions of {r['mean_chars']:,.0f} chars")
        for name, r in raw.items()
    ]  # fmt: skip
    return table, raw


def bench_ray_startup(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    runs = 1 if quick else 10
    try:
        info = ray_startup.measure(runs, local=quick)
    except ray_startup.Unavailable as exc:
        return [Row("ray-startup", "2 nodes", "skipped", "–", note=str(exc))], {"skipped": str(exc)}
    q = info["quantiles"]
    where = "2 local ranks, no Slurm" if quick else "2 nodes, dev Slurm cluster"
    case = f"{where}, {runs} jobs"

    def pq(key: str) -> str:
        return f"p50 {_s(q[key]['p50'])} / p95 {_s(q[key]['p95'])}"

    fixed = info["fixed_sleeps_s"]
    return [
        Row("ray-startup", case, "job start → last node registered", pq("registered_s"),
            "not checked", "", "Ray GCS start_time_ms of the last node"),
        Row("ray-startup", case, "job start → engine command starts", pq("driver_s"),
            f"{fixed:.0f} s (fixed sleeps)", f"{fixed / q['driver_s']['p50']:.1f}× sooner (p50)",
            f"bootstrap's own 'up in': {pq('bootstrap_up_s')}"),
        Row("ray-startup", case, "teardown (rank 0)", pq("teardown_s"), "", "",
            f"slowest rank: {pq('teardown_slowest_s')}"),
    ], info  # fmt: skip


_PIPELINE: dict[bool, dict[str, Any]] = {}


def _pipeline(quick: bool) -> dict[str, Any]:
    """Both pipeline benchmarks come from the same two runs in one fresh home."""
    if quick not in _PIPELINE:
        _PIPELINE[quick] = pipeline.measure(quick)
    return _PIPELINE[quick]


def bench_cached_retrain(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    info = _pipeline(quick)
    first, second = info["first"]["phases"], info["second"]["phases"]
    case = "2nd `judgeflow run grpo-pointwise --profile tiny`" + (
        " (quick)" if quick else ", the fresh clone's"
    )
    wall = second["wall_s"]

    def share(key: str, what: str, note: str = "") -> Row:
        return Row("cached-retrain", case, what, _s(second[key]),
                   note=f"{second[key] / wall:.0%}" + (f"; {note}" if note else ""))  # fmt: skip

    cached = "every stage cached" if info["second_all_cached"] else "NOT every stage cached"
    return [
        Row("cached-retrain", case, "wall time", _s(wall), f"{_s(first['wall_s'])} (1st run)",
            f"{wall / first['wall_s']:.0%} of it", cached),
        share("until_flow_s", "command → flow begins",
              f"the Prefect server starts first ({_s(second['server_start_s'])} to answer) "
              f"while the CLI imports and opens MLflow ({_s(second['cli_start_s'])} to start it)"),
        share("flow_s", "flow (cache lookups, MLflow records, figures from the cache)"),
        share("exit_s", "exit (summary, server stop)"),
    ], {"first": info["first"], "second": info["second"]}  # fmt: skip


def bench_demo_stages(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    info = _pipeline(quick)
    run = info["first"]
    case = "`make demo`" + (" (quick)" if quick else " in a fresh clone")
    phase = run["phases"]
    table = []
    if clone := info.get("fresh_clone"):
        table.append(Row("demo-stages", case, "bootstrap (new .venv, tiny model)",
                         _s(clone["bootstrap_s"]), note="uv, from its package cache"))  # fmt: skip
    table += [
        Row("demo-stages", case, "`judgeflow run` wall time", _s(phase["wall_s"]),
            note="first run: no bytecode cached, a new Prefect database"),
        Row("demo-stages", case, "Prefect server start-up", _s(phase["server_start_s"]),
            note="started first: overlaps the CLI's imports"),
        Row("demo-stages", case, "command → flow begins", _s(phase["until_flow_s"])),
    ]  # fmt: skip
    loops = run.get("training_loop_s", {})
    for s in run["stages"]:
        note = s["status"]
        if (loop := loops.get(s["stage"])) is not None and s["status"] == "ran":
            note += (f"; training loop {_s(loop)}, start-up and hand-back "
                     f"{_s(s['duration_s'] - loop)}")  # fmt: skip
        table.append(Row("demo-stages", case, f"stage {s['stage']}", _s(s["duration_s"]),
                         note=note))  # fmt: skip
    prep = info["prepare_40_rows"]
    ours, auto = prep["ours"], prep["autotokenizer"]
    table.append(
        Row("demo-stages", "prepare 40 sample rows + length filter, new process",
            "process wall time", _s(ours["process_s"]),
            f"{_s(auto['process_s'])} (AutoTokenizer, before)",
            f"×{auto['process_s'] / ours['process_s']:.1f}",
            f"tokenizer + prepare {_s(ours['prepare_s'])} vs {_s(auto['prepare_s'])}; "
            f"identical rows: {prep['identical']}; before imported {', '.join(auto['imported'])}")
    )  # fmt: skip
    return table, {"command": info["command"], "first": run, "prepare_40_rows": prep,
                   "fresh_clone": info.get("fresh_clone")}  # fmt: skip


RUNNERS: dict[str, Callable[[bool], tuple[list[Row], dict[str, Any]]]] = {
    "prepare-judge": bench_prepare_judge,
    "prepare-grrm": bench_prepare_grrm,
    "rewards": bench_rewards,
    "ray-startup": bench_ray_startup,
    "cached-retrain": bench_cached_retrain,
    "demo-stages": bench_demo_stages,
}


# --------------------------------------------------------------------------- output


def markdown(rows: list[Row]) -> str:
    header = ["benchmark", "case", "metric", "judgeflow", "baseline", "vs baseline", "notes"]
    lines = [header] + [list(asdict(r).values()) for r in rows]
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    out = []
    for n, line in enumerate(lines):
        out.append("| " + " | ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) + " |")  # fmt: skip
        if n == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[5:]),
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="tiny sizes, no Slurm (a check)")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, metavar="NAME",
                        help=f"run only these: {', '.join(BENCHMARKS)}")  # fmt: skip
    parser.add_argument(
        "--json",
        type=Path,
        help="write the results file here (default for a full run of every benchmark: "
        "benchmarks/results.json, which the README is rendered from)",
    )
    parser.add_argument("--update-readme", action="store_true",
                        help="then rewrite the README's regions from the results file "
                             "(benchmarks/readme.py)")  # fmt: skip
    args = parser.parse_args()
    output = args.json or (None if args.only or args.quick else RESULTS)
    if args.update_readme and (args.only or output != RESULTS):
        parser.error("--update-readme: run every benchmark, into benchmarks/results.json")

    started = dt.datetime.now().astimezone()
    results: dict[str, Any] = {
        **stamp(" ".join([Path(sys.executable).name, *sys.argv])),
        "quick": args.quick,
    }
    table: list[Row] = []
    raw: dict[str, Any] = {}
    failed: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for name in args.only or BENCHMARKS:
        print(f"[benchmarks] {name} ...", file=sys.stderr, flush=True)
        start = time.monotonic()
        try:
            rows, raw[name] = RUNNERS[name](args.quick)
        except Exception as exc:
            failed[name] = "".join(traceback.format_exception(exc))
            rows = [Row(name, "", "FAILED", "–", note=f"{type(exc).__name__}: {exc}"[:200])]
            print(failed[name], file=sys.stderr)
        table += rows
        seconds[name] = round(time.monotonic() - start, 1)
        print(f"[benchmarks] {name}: {seconds[name]:.0f} s", file=sys.stderr, flush=True)

    print(f"judgeflow benchmarks, {started:%Y-%m-%d %H:%M %Z}, {os.cpu_count()} CPUs"
          + (" (--quick: checks, not figures)" if args.quick else ""))  # fmt: skip
    print(markdown(table))
    if output:
        results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        results.update(seconds=seconds, rows=[asdict(r) for r in table], raw=raw, failed=failed)
        output.write_text(json.dumps(results, indent=2, default=str, ensure_ascii=False) + "\n")
        print(f"[benchmarks] results: {output}", file=sys.stderr)
    if args.update_readme:
        if failed:
            print("[benchmarks] README not updated: a benchmark failed", file=sys.stderr)
        else:
            readme.main([])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
