"""Benchmark: Ray start-up inside a 2-node allocation, against the reference scripts' sleeps.

    .venv/bin/python benchmarks/ray_startup.py [--runs 10]          # the dev Slurm cluster
    .venv/bin/python benchmarks/ray_startup.py --local --runs 2     # no Slurm: 2 local ranks

Reference Slurm scripts start the head, `sleep 10`, start each worker and `sleep 5`, so their
driver starts 15 s after the job for 2 nodes, whether Ray is ready or not. judgeflow's bootstrap
polls until every node is alive. Each run is a real job of `infra/slurm/judgeflow-stage.sbatch`
(`sbatch --wait --nodes=2`), with these instants on the host's clock:

- job start: the batch script's first command (its `JUDGEFLOW_SETUP` hook writes `date +%s.%N`);
- nodes registered: the last node's `start_time_ms` in Ray's GCS node table (read by the driver);
- engine command starts: the driver script's first statement (`time.time()` before any import);
- teardown: rank 0's own `[ray-bootstrap] rank 0: torn down in Y s` (driver exit → every process
  it started stopped and its temp dir removed); the slowest rank's figure is kept too.

`--local` runs the same bootstrap as two processes with Slurm's variables set (rank 0 and 1),
job start being their launch: it checks the measurement without a cluster, it is not the figure.
The dev cluster is brought up if it is not (and down again afterwards); every job carries a tag
in its environment, and no process, job or Ray temp dir of it may be left behind.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "infra" / "slurm" / "judgeflow-stage.sbatch"
DEV_CLUSTER = REPO / "infra" / "slurm" / "dev-cluster"
NODES = 2
SLEEP_HEAD_S, SLEEP_WORKER_S = 10.0, 5.0
FIXED_SLEEPS_S = SLEEP_HEAD_S + SLEEP_WORKER_S * (NODES - 1)
# Small object stores, as the cluster tests use: the dev cluster's fake nodes share one host.
OBJECT_STORE_BYTES = 80 * 2**20
RAY_ARGS = ["--num-cpus", "1", "--object-store-memory", str(OBJECT_STORE_BYTES)]

DRIVER = """\
import time
driver_start = time.time()  # the engine command's first statement
import json, os, sys
from ray._raylet import GcsClient
from ray.core.generated.gcs_pb2 import GcsNodeInfo
nodes = GcsClient(address=os.environ["RAY_ADDRESS"]).get_all_node_info(timeout=30).values()
alive = [n for n in nodes if n.state == GcsNodeInfo.GcsNodeState.ALIVE]
with open(sys.argv[1], "w") as out:
    json.dump({"driver_start": driver_start, "alive": len(alive),
               "node_start_ms": sorted(n.start_time_ms for n in alive)}, out)
"""
UP = re.compile(r"\[ray-bootstrap\] (\d+) node\(s\) up in ([\d.]+)s")
TORN = re.compile(r"\[ray-bootstrap\] rank (\d+): torn down in ([\d.]+)s")


class Unavailable(RuntimeError):
    """The dev Slurm cluster is not up and cannot be started here (not root)."""


# --------------------------------------------------------------------------- the dev cluster


def _state_dir() -> Path:
    """Same rule as infra/slurm/dev-cluster/lib.sh."""
    if os.environ.get("DEV_SLURM_DIR"):
        return Path(os.environ["DEV_SLURM_DIR"])
    return Path(os.environ.get("JUDGEFLOW_HOME") or REPO / ".judgeflow") / "slurm"


def _answers(conf: Path) -> bool:
    if not conf.exists():
        return False
    try:
        ping = subprocess.run(["scontrol", "ping"], env={**os.environ, "SLURM_CONF": str(conf)},
                              capture_output=True, text=True, timeout=15)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "is UP" in ping.stdout


@contextlib.contextmanager
def dev_cluster(info: dict[str, Any]) -> Iterator[Path]:
    """The dev cluster's slurm.conf; started (and stopped afterwards) only if it was not up."""
    conf = _state_dir() / "slurm.conf"
    info["cluster_started_here"] = False
    if _answers(conf):
        yield conf
        return
    if os.geteuid() != 0:
        raise Unavailable(f"dev Slurm cluster is not up; start it with: sudo {DEV_CLUSTER}/up")
    start = time.monotonic()
    up = subprocess.run([str(DEV_CLUSTER / "up")], capture_output=True, text=True, timeout=900)
    if up.returncode != 0:
        subprocess.run([str(DEV_CLUSTER / "down")], capture_output=True, timeout=300)
        raise RuntimeError(f"{DEV_CLUSTER}/up failed ({up.returncode}):\n{up.stderr[-2000:]}")
    info.update(cluster_started_here=True, cluster_up_s=round(time.monotonic() - start, 1))
    try:
        yield conf
    finally:
        down = subprocess.run([str(DEV_CLUSTER / "down")], capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        if down.returncode != 0:
            print(f"{DEV_CLUSTER}/down failed:\n{down.stderr[-2000:]}", file=sys.stderr)


# --------------------------------------------------------------------------- one run


def _result(t0: float, run_dir: Path, log: str) -> dict[str, Any]:
    """The instants of one run, relative to its job start (seconds)."""
    driver = json.loads((run_dir / "driver.json").read_text())
    if driver["alive"] != NODES:
        raise RuntimeError(f"{run_dir}: driver saw {driver['alive']} node(s), not {NODES}")
    torn = {int(rank): float(s) for rank, s in TORN.findall(log)}
    up = UP.search(log)
    if not up or set(torn) != set(range(NODES)):
        raise RuntimeError(f"{run_dir}: bootstrap lines missing in its log:\n{log[-3000:]}")
    return {
        "registered_s": driver["node_start_ms"][-1] / 1000 - t0,
        "head_registered_s": driver["node_start_ms"][0] / 1000 - t0,
        "driver_s": driver["driver_start"] - t0,
        "bootstrap_up_s": float(up.group(2)),  # the bootstrap's own figure, from rank 0's start
        "teardown_s": torn[0],
        "teardown_slowest_s": max(torn.values()),
    }


def slurm_run(conf: Path, run_dir: Path, tag: str) -> dict[str, Any]:
    """One `sbatch --wait` of the stage template with a driver that records its start."""
    hook = run_dir / "setup.sh"
    hook.write_text(f'date +%s.%N > "{run_dir}/t0"\nsource "{sys.prefix}/bin/activate"\n')
    env = {
        **os.environ, "SLURM_CONF": str(conf), "JUDGEFLOW_SETUP": str(hook),
        "JUDGEFLOW_RENDEZVOUS_ROOT": str(run_dir / "rendezvous"),
        "JUDGEFLOW_RAY_ARGS": " ".join(RAY_ARGS), "JF_BENCH_TAG": tag,
        "RAY_USAGE_STATS_ENABLED": "0",
    }  # fmt: skip
    submitted = time.time()
    done = subprocess.run(
        ["sbatch", "--wait", "--parsable", f"--nodes={NODES}", "--partition=debug", "--time=10",
         f"--job-name=jfbench-{tag}", f"--output={run_dir}/job.out", f"--chdir={run_dir}",
         str(TEMPLATE), "--", sys.executable, str(run_dir.parent / "driver.py"),
         str(run_dir / "driver.json")],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    finished = time.time()
    job_out = run_dir / "job.out"
    log = job_out.read_text(errors="replace") if job_out.exists() else ""
    if done.returncode != 0:
        raise RuntimeError(f"sbatch exited {done.returncode}: {done.stderr}\n{log[-3000:]}")
    job_id = done.stdout.strip().split(";")[0]
    t0 = float((run_dir / "t0").read_text())
    return {
        "job_id": job_id,
        **_result(t0, run_dir, log),
        "scheduled_s": t0 - submitted,  # sbatch called → batch script runs
        "job_wall_s": finished - t0,  # batch script runs → `sbatch --wait` returns
    }


def local_run(run_dir: Path, tag: str, index: int) -> dict[str, Any]:
    """Both ranks as local processes with Slurm's variables: no scheduler, same bootstrap."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RAY_"))}
    log_path = run_dir / "job.out"
    command = [sys.executable, "-m", "judgeflow.cluster.ray_bootstrap", "--rendezvous-root",
               str(run_dir / "rendezvous"), *RAY_ARGS, "--", sys.executable,
               str(run_dir.parent / "driver.py"), str(run_dir / "driver.json")]  # fmt: skip
    procs = []
    with log_path.open("wb") as log:
        t0 = time.time()
        for rank in range(NODES):
            env = {**base, "SLURM_JOB_ID": f"{tag}{index}", "SLURM_PROCID": str(rank),
                   "SLURM_NNODES": str(NODES), "SLURMD_NODENAME": f"node{rank + 1}",
                   "JF_BENCH_TAG": tag, "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
            procs.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT))
        try:
            codes = [p.wait(timeout=300) for p in procs]
        finally:
            for p in procs:  # SIGTERM: the bootstrap stops what it started
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=60)
    text = log_path.read_text(errors="replace")
    if codes != [0] * NODES:
        raise RuntimeError(f"bootstrap exit codes {codes}:\n{text[-3000:]}")
    return _result(t0, run_dir, text)


# --------------------------------------------------------------------------- leftovers


def leftovers(tag: str, job_ids: list[str], conf: Path | None) -> list[str]:
    """Processes carrying the tag, our jobs still queued, Ray temp dirs of our jobs."""
    found = []
    needle = f"JF_BENCH_TAG={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes():
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:100]
                found.append(f"pid {entry.name}: {cmd}")
    if conf is not None and job_ids:
        queue = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(job_ids)],
                               env={**os.environ, "SLURM_CONF": str(conf)},
                               capture_output=True, text=True)  # fmt: skip
        found += [f"job {j}" for j in queue.stdout.split()]
    base = Path(os.environ.get("JUDGEFLOW_RAY_TMPDIR", "/tmp"))
    for pattern in [*(f"jf-ray-{job}-*" for job in job_ids), f"jf-ray-{tag}*"]:
        found += [str(p) for p in base.glob(pattern)]
    return found


def _kill(found: list[str]) -> None:
    for item in found:
        if item.startswith("pid "):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(item.split()[1].rstrip(":")), signal.SIGKILL)


# --------------------------------------------------------------------------- all runs


def quantiles(values: list[float]) -> dict[str, float]:
    """p50 and p95 (linear interpolation between ranks, as numpy's default)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return {"p50": ordered[0], "p95": ordered[0]}
    p95 = statistics.quantiles(ordered, n=20, method="inclusive")[18]
    return {"p50": statistics.median(ordered), "p95": p95}


def measure(runs: int, local: bool) -> dict[str, Any]:
    """`runs` start-ups, their quantiles and what (nothing, we check) was left behind."""
    tag = f"jfb{uuid.uuid4().hex[:8]}"
    info: dict[str, Any] = {"mode": "local" if local else "slurm", "runs": runs, "tag": tag}
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="jfbench-ray-") as tmp:
        root = Path(tmp)
        (root / "driver.py").write_text(DRIVER)
        cluster = contextlib.nullcontext(None) if local else dev_cluster(info)
        with cluster as conf:
            try:
                for i in range(runs):
                    run_dir = root / f"run{i}"
                    run_dir.mkdir()
                    if conf is None:
                        results.append(local_run(run_dir, tag, i))
                    else:
                        results.append(slurm_run(conf, run_dir, tag))
            finally:
                job_ids = [r["job_id"] for r in results if "job_id" in r]
                deadline = time.monotonic() + 60  # accounting and teardown take a moment
                left = leftovers(tag, job_ids, conf)
                while left and time.monotonic() < deadline:
                    time.sleep(1)
                    left = leftovers(tag, job_ids, conf)
                _kill(left)
                info["left_behind"] = left
    if info["left_behind"]:
        raise RuntimeError("left behind (killed): " + "; ".join(info["left_behind"]))
    keys = ["registered_s", "driver_s", "teardown_s", "teardown_slowest_s", "bootstrap_up_s"]
    if not local:
        keys += ["scheduled_s", "job_wall_s"]
    info["quantiles"] = {key: quantiles([r[key] for r in results]) for key in keys}
    info["fixed_sleeps_s"] = FIXED_SLEEPS_S
    info["results"] = results
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--local", action="store_true", help="no Slurm: two local ranks")
    args = parser.parse_args()
    info = measure(args.runs, args.local)
    for key, q in info["quantiles"].items():
        print(f"{key:20} p50 {q['p50']:6.2f} s   p95 {q['p95']:6.2f} s")
    print(f"fixed sleeps: {FIXED_SLEEPS_S:.0f} s; left behind: {info['left_behind'] or 'nothing'}")


if __name__ == "__main__":
    main()
