"""Benchmark: the demo's time by stage, and a cached no-op retraining, as a user runs them.

    .venv/bin/python benchmarks/pipeline.py [--quick]

In a fresh JUDGEFLOW_HOME (a temp dir): build the tiny model (`judgeflow dev tiny-model`, as
`make demo`'s bootstrap does), then run `judgeflow run grpo-pointwise --profile tiny` twice. The
first run is the demo; the second, on unchanged data, must take every stage from the cache. For
each run: the wall time of the command, its phases from the log's timestamps (command start →
`Starting temporary server` → `Beginning flow run` → the flow's `Finished in state` → exit, and
the server's own `up after` line: it starts while the command imports), the stage rows of its
`run-summary` artifact (StageRecorder: ran / cached, seconds), read from Prefect's SQLite
database under the home, and the engines' training-loop seconds (`*/summary/runtime` in MLflow),
which split a training stage into its loop and its start-up and hand-back. `--quick` turns SFT and evaluation off and trains one
step, to check the measurement, not to report it.

Also here, because the demo's `prepare` stage is where it shows: preparing the 40-row sample
with the tokenizer length filter in a fresh process, with judgeflow's tokenizer loading and with
`AutoTokenizer` (what prepare used before), which imports torch's compiler, scikit-learn and
SciPy through transformers' generation utilities.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
DEMO = ["run", "grpo-pointwise", "--profile", "tiny"]
QUICK = ["--set", "sft.enabled=false", "--set", "evaluation.enabled=false",
         "--set", "grpo.max_steps=1"]  # fmt: skip
# What would point a run at services or state outside the fresh home.
_OUTSIDE = ("PREFECT_API_URL", "PREFECT_HOME", "PREFECT_PROFILES_PATH", "MLFLOW_TRACKING_URI",
            "JUDGEFLOW_PREFECT_RESULTS", "JUDGEFLOW_PREFECT_CACHE_KEYS",
            "PREFECT_LOCAL_STORAGE_PATH", "PREFECT_MEMO_STORE_PATH")  # fmt: skip
_LOG = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) \| \w+\s*\| (.*)$", re.MULTILINE)
_MARKS = {
    "server_starting": re.compile(r"^judgeflow - Starting temporary server"),
    "server_up": re.compile(r"^judgeflow - Temporary server up after"),
    "flow_begins": re.compile(r"^Flow run '[^']+' - Beginning flow run"),
    "flow_finished": re.compile(r"^Flow run '[^']+' - Finished in state"),
}
_UP_AFTER = re.compile(r"judgeflow - Temporary server up after ([\d.]+) s")
_RUN_ID = re.compile(r"MLflow run id : (\w+)")
#: The training loop's own seconds (the engines' train_runtime), per stage of the run summary.
_RUNTIME = {"sft": "sft/summary/runtime", "train": "train/summary/runtime"}
SAMPLE = "openjudge_pointwise.jsonl"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _OUTSIDE}
    return {**env, "JUDGEFLOW_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
            "RAY_USAGE_STATS_ENABLED": "0", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip


# --------------------------------------------------------------------------- one judgeflow run


def phases(log: str, start: float, end: float) -> dict[str, float]:
    """Seconds per phase of a `judgeflow run`, from the wall clock and the log's times: the
    command starts the temporary Prefect server first thing, imports while it starts, and
    begins the flow once both are done; the server's own start-up is the line it logs."""
    day = dt.datetime.fromtimestamp(start).date()
    marks: dict[str, float] = {}
    for clock, message in _LOG.findall(log):
        moment = dt.datetime.combine(day, dt.time.fromisoformat(clock)).timestamp()
        if moment < start - 3600:  # the run crossed midnight
            moment += 86400
        for name, pattern in _MARKS.items():
            if name not in marks and pattern.search(message):
                marks[name] = moment
    if len(marks) != len(_MARKS):
        raise RuntimeError(f"log lines missing ({sorted(set(_MARKS) - set(marks))})")
    up = _UP_AFTER.search(log)
    assert up is not None  # server_up was found
    return {
        "cli_start_s": marks["server_starting"] - start,
        "server_start_s": float(up.group(1)),
        "until_flow_s": marks["flow_begins"] - start,
        "flow_s": marks["flow_finished"] - marks["flow_begins"],
        "exit_s": end - marks["flow_finished"],
        "wall_s": end - start,
    }


def training_loops(home: Path, log: str) -> dict[str, float]:
    """The engines' own training-loop seconds (train_runtime) of the run, from MLflow's
    database: a stage's time beyond it is start-up (job, imports, model and data loading) and
    hand-back (saving, the result)."""
    found = _RUN_ID.search(log)
    if found is None:
        raise RuntimeError("no 'MLflow run id' line in the output")
    db = sqlite3.connect(f"file:{home / 'mlflow.db'}?mode=ro", uri=True)
    try:
        rows = dict(db.execute(
            "SELECT key, value FROM latest_metrics WHERE run_uuid = ? AND key IN (?, ?)",
            (found.group(1), *_RUNTIME.values()),
        ).fetchall())  # fmt: skip
    finally:
        db.close()
    return {stage: float(rows[key]) for stage, key in _RUNTIME.items() if key in rows}


def run_summary(home: Path) -> list[dict[str, Any]]:
    """The latest `run-summary` artifact's rows (stage, status, duration_s) from Prefect's DB."""
    db = sqlite3.connect(f"file:{home / 'prefect' / 'prefect.db'}?mode=ro", uri=True)
    try:
        row = db.execute(
            "SELECT data FROM artifact WHERE key = 'run-summary' ORDER BY created DESC LIMIT 1"
        ).fetchone()
    finally:
        db.close()
    if row is None:
        raise RuntimeError("no run-summary artifact in Prefect's database")
    data = json.loads(row[0])
    data = json.loads(data) if isinstance(data, str) else data  # stored as a JSON string
    return [{k: r[k] for k in ("stage", "status", "duration_s")} for r in data]


def judgeflow_run(
    home: Path, extra: list[str], label: str, *, bin_dir: Path = BIN, cwd: Path | None = None
) -> dict[str, Any]:
    """One `judgeflow run` in `home`: phases, stage rows and the log's tail on failure."""
    log_path = home.parent / f"{home.name}-{label}.log"
    with log_path.open("wb") as log:
        start = time.time()
        done = subprocess.run([str(bin_dir / "judgeflow"), *DEMO, *extra], env=_env(home),
                              stdout=log, stderr=subprocess.STDOUT, timeout=1800,
                              cwd=cwd)  # fmt: skip
        end = time.time()
    text = log_path.read_text(errors="replace")
    if done.returncode != 0:
        raise RuntimeError(f"judgeflow run ({label}) exited {done.returncode}:\n{text[-3000:]}")
    return {"phases": phases(text, start, end), "stages": run_summary(home),
            "training_loop_s": training_loops(home, text)}  # fmt: skip


# --------------------------------------------------------------------------- prepare's overhead


def prepare_worker(args: argparse.Namespace) -> None:
    """Prepare the 40-row sample with the length filter; print seconds and what got imported."""
    start = time.perf_counter()
    from judgeflow.data import prepare_judge
    from judgeflow.samples import sample_path

    imported = time.perf_counter()
    tokenizer: Any = args.tokenizer
    if args.impl == "autotokenizer":
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    result = prepare_judge("pointwise", [str(sample_path(SAMPLE))], args.output,
                           tokenizer=tokenizer, max_prompt_length=1024)  # fmt: skip
    end = time.perf_counter()
    heavy = ["torch", "torch._dynamo", "sklearn", "scipy", "sympy", "transformers.generation"]
    print(json.dumps({"import_s": imported - start, "prepare_s": end - imported,
                      "rows": result.report["counts"]["rows_written"]["train"],
                      "imported": [m for m in heavy if m in sys.modules]}))  # fmt: skip


def prepare_overhead(tokenizer: Path, root: Path, repeat: int) -> dict[str, Any]:
    """Fresh-process timings of both tokenizer loadings (median of `repeat`), same rows?"""
    from grrm_prepare import same_rows

    out: dict[str, Any] = {}
    for impl in ("ours", "autotokenizer"):
        runs = []
        for _ in range(repeat):
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, __file__, "--prepare-worker", "--impl", impl,
                 "--tokenizer", str(tokenizer), "--output", str(root / f"{impl}.parquet")],
                check=True, capture_output=True, text=True, env=_env(root),
            )  # fmt: skip
            runs.append({**json.loads(done.stdout.strip().splitlines()[-1]),
                         "process_s": time.perf_counter() - start})  # fmt: skip
        out[impl] = {key: statistics.median(r[key] for r in runs)
                     for key in ("import_s", "prepare_s", "process_s")}  # fmt: skip
        out[impl].update(rows=runs[0]["rows"], imported=runs[0]["imported"])
    out["identical"] = same_rows(root / "ours.parquet", root / "autotokenizer.parquet")
    return out


# --------------------------------------------------------------------------- all of it


def _left_behind(home: Path) -> list[str]:
    """Live processes whose environment names the benchmark's home; killed, and reported."""
    needle = f"JUDGEFLOW_HOME={home}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes():
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:100]
                found.append(f"pid {entry.name}: {cmd}")
                os.kill(int(entry.name), signal.SIGKILL)
    return found


def measure(quick: bool) -> dict[str, Any]:
    """Prepare's overhead, then the demo command twice: a full run does it as a newcomer does,
    in a fresh clone of the commit (`git clone`, `./scripts/bootstrap`: a new .venv and the
    tiny model, timed, then `make demo`'s command, then the same command again); `--quick`
    in a fresh JUDGEFLOW_HOME with this checkout's .venv."""
    root = Path(tempfile.mkdtemp(prefix="jfbench-home-"))
    info: dict[str, Any] = {"command": " ".join(["judgeflow", *DEMO, *(QUICK if quick else [])])}
    homes = [root / "home", root / "clone" / ".judgeflow"]
    try:
        info["prepare_40_rows"] = prepare_overhead(_tiny_model(root / "tokenizer"), root,
                                                   1 if quick else 3)  # fmt: skip
        if quick:
            home, bin_dir, cwd = homes[0], BIN, None
            home.mkdir()
            _tiny_model(home / "tiny-model")
        else:
            cwd = root / "clone"
            home, bin_dir = cwd / ".judgeflow", cwd / ".venv" / "bin"
            info["fresh_clone"] = _fresh_clone(cwd, home)
        extra = QUICK if quick else []
        info["first"] = judgeflow_run(home, extra, "first", bin_dir=bin_dir, cwd=cwd)
        info["second"] = judgeflow_run(home, extra, "second", bin_dir=bin_dir, cwd=cwd)
        info["second_all_cached"] = all(s["status"] == "cached" for s in info["second"]["stages"])
    finally:
        time.sleep(1)  # a server shutting down as the CLI exits
        info["left_behind"] = [p for h in homes for p in _left_behind(h)]
        shutil.rmtree(root, ignore_errors=True)
    if info["left_behind"]:
        raise RuntimeError("left behind (killed): " + "; ".join(info["left_behind"]))
    return info


def _tiny_model(target: Path) -> Path:
    subprocess.run([str(BIN / "judgeflow"), "dev", "tiny-model", str(target)],
                   env=_env(target.parent), check=True, capture_output=True, timeout=600)  # fmt: skip
    return target


def _fresh_clone(clone: Path, home: Path) -> dict[str, Any]:
    """`git clone` of this checkout's commit and `./scripts/bootstrap` in it, timed: what
    `make demo` does before its command (a new .venv from the package registry's cache)."""
    repo = Path(__file__).resolve().parents[1]
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    subprocess.run(["git", "clone", "--quiet", str(repo), str(clone)], check=True, timeout=600)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", commit], check=True)
    start = time.time()
    subprocess.run(["./scripts/bootstrap"], cwd=clone, env=_env(home), check=True,
                   capture_output=True, timeout=1800)  # fmt: skip
    return {"commit": commit, "bootstrap_s": time.time() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--prepare-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--impl", default="ours", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare_worker:
        prepare_worker(args)
        return
    print(json.dumps(measure(args.quick), indent=2))


if __name__ == "__main__":
    main()
