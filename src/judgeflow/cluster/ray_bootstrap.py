"""Start a private Ray cluster inside one Slurm allocation, run a driver on it, tear it down.

One implementation serves both ways a GPU stage is launched: a submitit job function calls
:func:`run_in_ray_cluster` on every task, and an sbatch script runs the module on every node::

    srun --ntasks-per-node=1 python -m judgeflow.cluster.ray_bootstrap \\
        --rendezvous-root /shared/jf-rendezvous -- python -m verl.trainer.main_ppo ...

Rank 0 starts ``ray start --head --block`` on free ports with a per-job ``--temp-dir`` and a
random per-job auth token, publishes ``ip:port`` in ``<rendezvous_dir>/head.json``, waits until
every node has joined, then runs the driver with :func:`driver_env` (``RAY_ADDRESS`` plus the
auth settings) and streams its output. Other ranks join as workers and leave when rank 0 writes
``<rendezvous_dir>/done`` or the head goes away. Every rank stops exactly the processes it
started (never a bare ``ray stop``, which kills every Ray process of the user on the host), also
on SIGTERM/SIGINT, and removes its temp dir; one it could not remove (the rank was SIGKILLed)
the next job on the node does (:mod:`judgeflow.cluster.temp_dirs`).

Auth: ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH=<rendezvous_dir>/auth_token`` (mode 0600)
go to the head, the workers and the driver; a client without the token is refused.

Environment: ``JUDGEFLOW_RAY_NODE_IP`` overrides the node address Ray advertises;
``JUDGEFLOW_RAY_TMPDIR`` (default ``/tmp``) is where the short per-job temp dirs go.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judgeflow.cluster.heartbeat import NODE_LOST_EXIT, READINESS_PROBE, Heartbeat, Watchdog
from judgeflow.cluster.net import free_ports, node_ip
from judgeflow.cluster.procs import ProcessTree, exit_on_signals
from judgeflow.cluster.temp_dirs import OwnedDir, sweep_stale
from judgeflow.data.io import atomic_write_text
from judgeflow.log_setup import JOB_FORMAT, show_logs

__all__ = [
    "Allocation",
    "HeadInfo",
    "RayBootstrapError",
    "driver_env",
    "exit_on_signals",
    "main",
    "run_in_ray_cluster",
]

Log = Callable[[str], None]
logger = logging.getLogger("judgeflow.cluster.ray_bootstrap")  # also when run as __main__

HEAD_FILE = "head.json"
TEMP_PREFIX = "jf-ray-"  # per-job temp dirs: jf-ray-<job>-<rank>-<random>
DONE_FILE = "done"
TOKEN_FILE = "auth_token"
_POLL_S = 0.1
# How long the head's own GCS may take to listen: `ray start --head` on a busy node can take
# longer than the wait for the other nodes (--ready-timeout), which a test or a user may set short.
_HEAD_START_S = 120.0
# How often a worker rank tries `ray start --address` before it gives up.
_JOIN_ATTEMPTS = 3
# Ray's minimum object store size (75 MiB); used when the caller asks for the smallest.
MIN_OBJECT_STORE_BYTES = 75 * 1024 * 1024


class RayBootstrapError(RuntimeError):
    """The Ray cluster of this allocation could not be started or joined."""


@dataclass(frozen=True)
class Allocation:
    """Who this task is in the job: the same view for submitit and for a plain srun."""

    job_id: str
    rank: int
    world: int
    node_name: str
    rendezvous_dir: Path

    @classmethod
    def from_env(cls, rendezvous_root: str | Path) -> Allocation:
        """Read Slurm's task variables; without Slurm, a single local node.

        The rendezvous dir is keyed by job, step and restart count, so a requeued job or a second
        Ray step in the same job never reads the previous head's address.
        """
        env = os.environ
        root = Path(rendezvous_root)
        job_id = env.get("SLURM_JOB_ID")
        if job_id is None:
            job_id = f"local-{os.getpid()}-{secrets.token_hex(3)}"
            return cls(job_id, 0, 1, socket.gethostname(), root / job_id)
        rank = int(env.get("SLURM_PROCID", env.get("SLURM_NODEID", "0")))
        world = int(env.get("SLURM_NNODES", env.get("SLURM_NTASKS", "1")))
        node = env.get("SLURMD_NODENAME", socket.gethostname())
        step = env.get("SLURM_STEP_ID", "batch")
        attempt = env.get("SLURM_RESTART_COUNT", "0")
        return cls(job_id, rank, world, node, root / f"{job_id}.{step}.{attempt}")


@dataclass(frozen=True)
class HeadInfo:
    """What rank 0 publishes for the other ranks and hands to the driver."""

    address: str
    token_path: Path
    dashboard_url: str | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "address": self.address,
                "token_path": str(self.token_path),
                "dashboard_url": self.dashboard_url,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> HeadInfo:
        data = json.loads(text)
        return cls(data["address"], Path(data["token_path"]), data.get("dashboard_url"))


def auth_env(token_path: Path) -> dict[str, str]:
    """Token-auth settings for every Ray process of the job (head, workers, driver)."""
    return {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token_path),
        "RAY_USAGE_STATS_ENABLED": "0",
    }


def driver_env(head: HeadInfo, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for an engine command (verl, a script) that should use this Ray cluster.

    ``RAY_AUTH_TOKEN`` is dropped because Ray prefers it over ``RAY_AUTH_TOKEN_PATH``: a token
    left in the user's environment would silently override this job's token.
    """
    env = dict(os.environ if base is None else base)
    env.pop("RAY_AUTH_TOKEN", None)
    env.update(auth_env(head.token_path))
    env["RAY_ADDRESS"] = head.address
    return env


# --------------------------------------------------------------------------- signals


# --------------------------------------------------------------------------- the cluster


@dataclass
class _Node:
    """This rank's share of the cluster: its temp dir, its processes, where logs go."""

    alloc: Allocation
    log: Log
    owned: OwnedDir = field(init=False)
    started: list[ProcessTree] = field(default_factory=list)

    def __post_init__(self) -> None:
        base = os.environ.get("JUDGEFLOW_RAY_TMPDIR", "/tmp")
        # What a killed job on this node left (it ran no teardown): its lock died with it.
        for stale in sweep_stale(base, f"{TEMP_PREFIX}*"):
            self.log(f"[ray-bootstrap] removed {stale}: a killed job's, left behind")
        # Short on purpose: Ray's unix socket paths under it must stay below ~107 chars.
        tag = "".join(c for c in self.alloc.job_id if c.isalnum() or c in "-_")[-16:]
        self.owned = OwnedDir.create(base, f"{TEMP_PREFIX}{tag}-{self.alloc.rank}-")

    @property
    def temp_dir(self) -> Path:
        return self.owned.path

    @property
    def start_log(self) -> Path:
        return self.alloc.rendezvous_dir / f"ray-start-rank{self.alloc.rank}.log"

    @property
    def kept_logs(self) -> Path:
        return self.alloc.rendezvous_dir / "ray-logs" / f"rank{self.alloc.rank}"

    def spawn(
        self, name: str, cmd: Sequence[str], env: Mapping[str, str], out: Any, owns_temp: bool
    ) -> ProcessTree:
        """Start `cmd` as a process tree of its own, so teardown can find all of it."""
        started = ProcessTree.start(
            name, cmd, env, stdout=out, temp_dir=self.temp_dir if owns_temp else None
        )
        self.started.append(started)
        self.log(f"[ray-bootstrap] rank {self.alloc.rank}: {name} pid {started.proc.pid}")
        return started

    def ray_start(self, args: Sequence[str], env: Mapping[str, str]) -> ProcessTree:
        cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", *args]
        self.log(f"[ray-bootstrap] rank {self.alloc.rank}: temp dir {self.temp_dir}")
        with open(self.start_log, "ab") as out:
            return self.spawn("ray start", cmd, env, out, owns_temp=True)

    def teardown(self, grace_s: float, keep_logs: bool) -> None:
        """Stop the driver first, then Ray; keep Ray's logs on failure; remove the temp dir."""
        for started in reversed(self.started):
            started.stop(grace_s, self.log)
        if keep_logs:
            with contextlib.suppress(OSError):
                shutil.copytree(
                    self.temp_dir / "session_latest" / "logs",
                    self.kept_logs,
                    dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.sock", "old"),
                )
                self.log(f"[ray-bootstrap] Ray logs kept in {self.kept_logs}")
        self.owned.remove()

    def failure(self, what: str) -> RayBootstrapError:
        return RayBootstrapError(
            f"rank {self.alloc.rank} on {self.alloc.node_name}: {what}; see {self.start_log} "
            f"and Ray's logs in {self.kept_logs}"
        )


def _ray_env(base: Mapping[str, str], token_path: Path) -> dict[str, str]:
    env = dict(base)
    env.pop("RAY_AUTH_TOKEN", None)
    env.pop("RAY_ADDRESS", None)  # `ray start --head` must not join some other cluster
    env.update(auth_env(token_path))
    # A batch job has nothing to drain: stop at once instead of Ray's 30 s default.
    env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] = "0"
    return env


@dataclass(frozen=True)
class _Resources:
    num_cpus: int | None
    num_gpus: int | None
    object_store_memory: int | None


def _common_args(ip: str, alloc: Allocation, temp_dir: Path, res: _Resources) -> list[str]:
    nm, om, agent, agent_grpc, rt_env, metrics = free_ports(6)
    args = [
        f"--node-ip-address={ip}",
        f"--temp-dir={temp_dir}",
        f"--node-manager-port={nm}",
        f"--object-manager-port={om}",
        f"--dashboard-agent-listen-port={agent}",
        f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--runtime-env-agent-port={rt_env}",
        f"--metrics-export-port={metrics}",
        # One resource per rank: same-IP nodes (the dev cluster) are otherwise indistinguishable.
        f"--resources={json.dumps({f'jf_node_{alloc.rank}': 1})}",
        "--disable-usage-stats",
    ]
    if res.num_cpus is not None:
        args.append(f"--num-cpus={res.num_cpus}")
    if res.num_gpus is not None:
        args.append(f"--num-gpus={res.num_gpus}")
    if res.object_store_memory is not None:
        args.append(f"--object-store-memory={res.object_store_memory}")
    return args


def _tcp_open(address: str, timeout: float = 1.0) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def _wait_for(
    what: str, ready: Callable[[], bool], timeout_s: float, alive: Callable[[], bool]
) -> None:
    """Poll ``ready`` until true; fail early when the process it depends on died."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if not alive():
            raise RayBootstrapError(f"{what}: the process it waits on exited")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not ready after {timeout_s:.0f}s")
        time.sleep(_POLL_S)


def _start_head(
    node: _Node,
    env: Mapping[str, str],
    ready_timeout_s: float,
    res: _Resources,
    dashboard: bool,
) -> tuple[HeadInfo, dict[str, str]]:
    """Start the head, publish its address once GCS listens, wait for all nodes to be alive."""
    alloc = node.alloc
    token_path = alloc.rendezvous_dir / TOKEN_FILE
    for stale in (HEAD_FILE, DONE_FILE, TOKEN_FILE):
        (alloc.rendezvous_dir / stale).unlink(missing_ok=True)
    atomic_write_text(token_path, secrets.token_hex(32), mode=0o600)
    ray_env = _ray_env(env, token_path)

    ip = node_ip()
    gcs, client, dash = free_ports(3)
    address = f"{ip}:{gcs}"
    args = [
        "--head",
        f"--port={gcs}",
        f"--ray-client-server-port={client}",
        *_common_args(ip, alloc, node.temp_dir, res),
    ]
    if dashboard:
        args += ["--include-dashboard=true", f"--dashboard-host={ip}", f"--dashboard-port={dash}"]
    else:
        args += ["--include-dashboard=false", f"--dashboard-host={ip}"]
    head = node.ray_start(args, ray_env)

    def alive() -> bool:
        return head.proc.poll() is None

    # The probe imports Ray (seconds) while the head starts, so start it right away.
    probe = node.spawn(
        "readiness probe",
        [sys.executable, "-c", READINESS_PROBE, address, str(alloc.world), str(ready_timeout_s)],
        ray_env,
        None,
        owns_temp=False,
    )
    try:
        _wait_for(
            "head GCS", lambda: _tcp_open(address), max(ready_timeout_s, _HEAD_START_S), alive
        )
        info = HeadInfo(address, token_path, f"http://{ip}:{dash}" if dashboard else None)
        atomic_write_text(alloc.rendezvous_dir / HEAD_FILE, info.to_json())
        node.log(f"[ray-bootstrap] head at {address}; waiting for {alloc.world} node(s)")
        _wait_for(
            f"{alloc.world} Ray node(s) alive",
            lambda: probe.proc.poll() is not None,
            ready_timeout_s + 30,
            alive,
        )
    except (TimeoutError, RayBootstrapError) as exc:
        raise node.failure(str(exc)) from exc
    finally:
        probe.stop(1, node.log)
        node.started.remove(probe)
    if probe.proc.returncode != 0:
        raise node.failure(
            f"{alloc.world} Ray node(s) not alive after {ready_timeout_s:.0f}s "
            f"(probe exit {probe.proc.returncode}){_other_ranks_logs(alloc)}"
        )
    return info, driver_env(info, env)


def _other_ranks_logs(alloc: Allocation, lines: int = 5) -> str:
    """The last lines of the other ranks' ``ray start`` logs, which say why a node is missing."""
    parts = []
    for path in sorted(alloc.rendezvous_dir.glob("ray-start-rank*.log")):
        if path.name == f"ray-start-rank{alloc.rank}.log":
            continue
        with contextlib.suppress(OSError):
            tail = path.read_text(errors="replace").strip().splitlines()[-lines:]
            parts.append(f"\n{path.name} ends:\n  " + "\n  ".join(tail or ["(empty)"]))
    return "".join(parts) or "; no other rank wrote a ray start log (did they start?)"


def _stream(proc: subprocess.Popen[bytes]) -> int:
    """Copy the driver's output line by line to our stdout, where Slurm/submitit log it."""
    assert proc.stdout is not None
    out = sys.stdout
    for line in iter(proc.stdout.readline, b""):
        out.write(line.decode(errors="replace"))
        out.flush()
    return proc.wait()


def _run_head(
    node: _Node,
    command: Sequence[str],
    env: Mapping[str, str],
    ready_timeout_s: float,
    res: _Resources,
    dashboard: bool,
    node_timeout_s: float,
) -> int:
    t0 = time.monotonic()
    info, denv = _start_head(node, env, ready_timeout_s, res, dashboard)
    node.log(
        f"[ray-bootstrap] {node.alloc.world} node(s) up in {time.monotonic() - t0:.1f}s"
        + (f"; dashboard {info.dashboard_url}" if info.dashboard_url else "")
    )
    try:
        driver = node.spawn("driver", command, denv, subprocess.PIPE, owns_temp=False)
    except OSError as exc:  # e.g. the command does not exist
        node.log(f"[ray-bootstrap] cannot run driver {command[:1]}: {exc}")
        return 127

    def lost(rank: int, silent_s: float) -> None:
        node.log(
            f"[ray-bootstrap] rank {rank} silent for {silent_s:.0f}s: its node is lost; "
            "stopping the driver so the stage fails now (retryably) and frees the allocation"
        )
        driver.stop(5, node.log)

    watchdog = Watchdog(
        node.alloc.rendezvous_dir, range(1, node.alloc.world), lost_after_s=node_timeout_s,
        on_lost=lost,
    )  # fmt: skip
    watchdog.start()
    try:
        code = _stream(driver.proc)
    finally:
        watchdog.stop()
    if watchdog.lost is not None:
        code = NODE_LOST_EXIT
    node.log(f"[ray-bootstrap] driver exited with {code}")
    return code


def _join(
    node: _Node, info: HeadInfo, ip: str, res: _Resources, env: Mapping[str, str]
) -> ProcessTree:
    """Start this rank's ``ray start --address`` on freshly picked ports."""
    args = [f"--address={info.address}", *_common_args(ip, node.alloc, node.temp_dir, res)]
    worker = node.ray_start(args, _ray_env(env, info.token_path))
    node.log(f"[ray-bootstrap] rank {node.alloc.rank}: joining {info.address}")
    return worker


def _run_worker(
    node: _Node,
    env: Mapping[str, str],
    ready_timeout_s: float,
    res: _Resources,
) -> None:
    """Join the head named in the rendezvous file; return when the head is done or gone."""
    alloc = node.alloc
    head_file = alloc.rendezvous_dir / HEAD_FILE
    done = alloc.rendezvous_dir / DONE_FILE
    try:
        _wait_for(f"rendezvous file {head_file}", head_file.exists, ready_timeout_s, lambda: True)
    except TimeoutError as exc:
        raise RayBootstrapError(f"rank {alloc.rank}: {exc}; did rank 0 start?") from exc
    info = HeadInfo.from_json(head_file.read_text())
    ip = node_ip()
    attempt = 1
    worker = _join(node, info, ip, res, env)
    misses, next_check = 0, 0.0
    heartbeat = Heartbeat(alloc.rendezvous_dir, alloc.rank)  # rank 0 watches it
    while not done.exists():
        heartbeat.beat()
        if worker.proc.poll() is not None:
            if done.exists():
                break
            code = worker.proc.returncode
            if attempt >= _JOIN_ATTEMPTS:
                raise node.failure(f"ray start exited with {code} ({attempt} attempts)")
            # Most often a port we picked was taken meanwhile: pick fresh ones and join again.
            node.log(f"[ray-bootstrap] rank {alloc.rank}: ray start exited with {code}; retrying")
            worker.stop(1, node.log)
            node.started.remove(worker)
            attempt += 1
            worker = _join(node, info, ip, res, env)
            continue
        if time.monotonic() >= next_check:
            misses = 0 if _tcp_open(info.address) else misses + 1
            next_check = time.monotonic() + 2.0
            if misses >= 3:
                node.log(f"[ray-bootstrap] rank {alloc.rank}: head {info.address} is gone")
                break
        time.sleep(_POLL_S)


def run_in_ray_cluster(
    alloc: Allocation,
    command: list[str],
    *,
    env: dict[str, str] | None = None,
    ready_timeout_s: float = 120,
    num_gpus: int | None = None,
    num_cpus: int | None = None,
    dashboard: bool = False,
    log: Log = logger.info,
    object_store_memory: int | None = None,
    stop_grace_s: float = 15,
    node_timeout_s: float = 60,
) -> int:
    """Run ``command`` on a Ray cluster spanning the allocation; call it on every task.

    Returns the driver's exit code on rank 0 and 0 on the other ranks. Raises
    :class:`RayBootstrapError` when the cluster cannot be started or joined. Processes this
    call started are stopped before it returns, also on exceptions and on SIGTERM/SIGINT
    (which then end in ``SystemExit(128 + signal)``). ``object_store_memory`` is per node, in
    bytes (Ray's minimum is :data:`MIN_OBJECT_STORE_BYTES`); ``stop_grace_s`` is how long each
    started process gets between SIGTERM and SIGKILL. A worker rank silent for
    ``node_timeout_s`` while the driver runs stops it: rank 0 then returns
    :data:`NODE_LOST_EXIT` (see :mod:`judgeflow.cluster.heartbeat`).
    """
    res = _Resources(num_cpus, num_gpus, object_store_memory)
    alloc.rendezvous_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    base = dict(os.environ if env is None else env)
    node = _Node(alloc, log)
    ok = False
    t0 = time.monotonic()
    try:
        with exit_on_signals(log) as disarm:
            try:
                if alloc.rank == 0:
                    code = _run_head(
                        node, command, base, ready_timeout_s, res, dashboard, node_timeout_s
                    )
                else:
                    _run_worker(node, base, ready_timeout_s, res)
                    code = 0
                ok = code == 0
                return code
            finally:
                disarm()
                if alloc.rank == 0:  # workers tear down while we do, also after a failure
                    with contextlib.suppress(OSError):
                        atomic_write_text(alloc.rendezvous_dir / DONE_FILE, "")
                t1 = time.monotonic()
                # A worker's Ray has nothing left to save once rank 0 is done, and its
                # dashboard agent ignores SIGTERM with the head gone: do not wait out the grace.
                grace = stop_grace_s if alloc.rank == 0 else min(stop_grace_s, 2.0)
                node.teardown(grace, keep_logs=not ok)
                log(
                    f"[ray-bootstrap] rank {alloc.rank}: torn down in "
                    f"{time.monotonic() - t1:.1f}s (total {time.monotonic() - t0:.1f}s)"
                )
    finally:
        if alloc.rank == 0:
            # The token is only valid while the cluster runs; do not leave it on shared disk.
            (alloc.rendezvous_dir / TOKEN_FILE).unlink(missing_ok=True)


# --------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m judgeflow.cluster.ray_bootstrap",
        description="Start a Ray cluster over this Slurm allocation and run CMD on its head.",
        epilog="Run on every node (srun --ntasks-per-node=1 ... -- CMD ARGS...).",
    )
    p.add_argument(
        "--rendezvous-root",
        default=os.environ.get("JUDGEFLOW_RENDEZVOUS_ROOT", str(Path.cwd() / ".jf-rendezvous")),
        help="directory on the shared filesystem; one subdirectory per job step",
    )
    p.add_argument(
        "--ready-timeout",
        type=float,
        default=120.0,
        help=f"seconds to wait for the other nodes (the head's own start: up to {_HEAD_START_S:.0f} s)",
    )
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs per node Ray may use")
    p.add_argument("--num-gpus", type=int, default=None, help="GPUs per node Ray may use")
    p.add_argument(
        "--object-store-memory", type=int, default=None, help="object store bytes per node"
    )
    p.add_argument("--dashboard", action="store_true", help="serve the dashboard on the head IP")
    p.add_argument(
        "--node-timeout", type=float, default=60.0, help="seconds a silent node is given"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS... (run on rank 0)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: exit code is the driver's on rank 0, 0 on workers, 1 if Ray failed."""
    args = _parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    alloc = Allocation.from_env(args.rendezvous_root)
    if alloc.rank == 0 and not command:
        _parser().error("rank 0 needs a driver command after --")

    show_logs(stream="stderr", fmt=JOB_FORMAT)  # each rank's log: a flushed line per record
    try:
        return run_in_ray_cluster(
            alloc,
            command,
            ready_timeout_s=args.ready_timeout,
            num_cpus=args.num_cpus,
            num_gpus=args.num_gpus,
            dashboard=args.dashboard,
            object_store_memory=args.object_store_memory,
            node_timeout_s=args.node_timeout,
        )
    except RayBootstrapError as exc:
        logger.error("[ray-bootstrap] error: %s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
