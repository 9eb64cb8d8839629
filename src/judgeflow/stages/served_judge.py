"""The paying judge of a judge-paid policy, served inside the train job's allocation: `mlflow
models serve` of an MLflow model the job writes around the judge's weights (a pipeline pins
`reward.judge` to the registered version's weights), on the head node's last
`reward.judge_gpus` GPUs (the policy trains on the others; on CPU where the allocation has no
GPUs, as TRL on the dev cluster), called by the policy's reward (TRL's reward function, verl's
batch reward manager) through `judgeflow.inference.served_judge_client`. Started before the
engine, watched while it trains, stopped after it; its log beside the job's.

Each job's judge is its own, also on a node other jobs share:

- it listens on a port free when the job starts (`cluster.net.free_ports`), never a fixed one;
- the MLflow model carries an instance id made for this job, which the judge says when asked
  which weights it serves (`params: {"identify": true}`); the job checks it once the server is
  up (another job's judge on that port is refused) and pins it as the judge every reward
  process checks before it pays (`reward.judge_model`'s check, `ServedJudge._check_model`);
- a watcher notices the server exit while training and writes why (exit code, log tail) to a
  status file the reward reads when a call fails: the stage stops at once with that error
  (`JudgeUnavailable`) instead of retrying a judge that is gone for `reward.judge_retry_s`.

`judgeflow render` prints the same command, with `<free-port>` for the port the job picks.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

from judgeflow.config import ConfigError, RunConfig

__all__ = [
    "judge_model_config",
    "judge_server_command",
    "judge_server_gpus",
    "served_judge",
]

#: How long the judge may take to load before the train job gives up on it.
START_TIMEOUT_S = 900.0
#: The MLflow model the job writes around the judge's weights, one per job (its instance id).
JUDGE_MODEL_DIRNAME = "judge-model"
logger = logging.getLogger("judgeflow")


def judge_server_command(
    cfg: RunConfig,
    model_dir: str | Path = f"<run-dir>/{JUDGE_MODEL_DIRNAME}-<instance>",
    port: Any = None,
) -> list[str] | None:
    """`mlflow models serve` of the judge's MLflow model `model_dir` on `port` (rendered:
    `engines.verl.RENDERED_JUDGE_PORT`); None when this run serves no judge."""
    from judgeflow.engines.verl import RENDERED_JUDGE_PORT

    if not cfg.serves_judge_in_allocation:
        return None
    mlflow = str(Path(sys.executable).parent / "mlflow")
    # -t: MLflow's scoring server ends a request after 60 s by default; a batch of long judge
    # replies takes longer, and the client (`ServedJudge`) waits as long as this
    return [mlflow, "models", "serve", "-m", str(model_dir), "--env-manager", "local",
            "-h", "127.0.0.1", "-p", str(RENDERED_JUDGE_PORT if port is None else port), "-w", "1",
            "-t", str(math.ceil(cfg.reward.judge_timeout_s))]  # fmt: skip


def judge_server_gpus(cfg: RunConfig) -> str:
    """CUDA_VISIBLE_DEVICES of the judge: the node's last `reward.judge_gpus` GPUs (none: CPU)."""
    if not cfg.cluster.gpus_per_node:
        return ""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = visible.split(",") if visible else [str(i) for i in range(cfg.cluster.gpus_per_node)]
    return ",".join(ids[len(ids) - cfg.reward.judge_gpus :])


def judge_model_config(cfg: RunConfig, instance: str) -> dict[str, Any]:
    """The `model_config` of the MLflow model a job serves its judge with: the pinned judge's
    weights, how it judges, and the job's instance id."""
    r = cfg.reward
    return {"model_uri": r.judge, "mode": r.judge_mode, "max_new_tokens": r.judge_max_new_tokens,
            "storage_root": cfg.storage.root, "batch_size": r.judge_batch_size,
            "instance": instance}  # fmt: skip


@contextmanager
def served_judge(cfg: RunConfig, log_dir: str | Path) -> Iterator[dict[str, Any] | None]:
    """Serve the judge for the body (the engine's training) when this run serves one; the
    reward keywords that reach it (`RunConfig.policy_reward_kwargs(served=…)`), else None."""
    if not cfg.serves_judge_in_allocation:
        yield None
        return
    from judgeflow.cluster.net import free_ports
    from judgeflow.inference.pyfunc import save_judge_model
    from judgeflow.inference.served_judge_client import served_model

    judge = cfg.reward.judge or ""
    if judge.startswith("models:/"):
        raise ConfigError(
            f"reward.judge={judge} is not resolved: a run pins it to the version's weights "
            "first (judgeflow.registry.paying_judge.pin_judge)"
        )
    instance = secrets.token_hex(8)
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    model_dir = Path(log_dir) / f"{JUDGE_MODEL_DIRNAME}-{instance}"
    log = Path(log_dir) / "judge-server.log"
    status = Path(log_dir) / f"judge-server-{instance}.exited"
    [port] = free_ports(1)
    url = f"http://127.0.0.1:{port}/invocations"
    command = judge_server_command(cfg, model_dir, port)
    assert command is not None  # serves_judge_in_allocation
    # MLflow starts `uvicorn` by name, through `bash`: this interpreter's, and the system's,
    # also in a job whose PATH has neither
    path = os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", ""), os.defpath]
    )
    env = {**os.environ, "PATH": path, "CUDA_VISIBLE_DEVICES": judge_server_gpus(cfg)}
    # undone last first, however far it got: the watcher told, the server stopped, the model gone
    with ExitStack() as undo:
        undo.callback(shutil.rmtree, model_dir, ignore_errors=True)
        save_judge_model(model_dir, judge_model_config(cfg, instance))
        logger.info("serving the paying judge at %s (instance %s; log %s)", url, instance, log)
        with log.open("ab") as out:
            # a session of its own: the scoring server's workers are stopped with it (`_stop`)
            proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        undo.callback(_stop, proc)
        watcher = _Watcher(proc, status, log, url)
        undo.callback(watcher.stopping.set)
        _wait_until_up(url.removesuffix("/invocations") + "/ping", proc, log)
        says = served_model(url, str(cfg.reward.judge_mode),
                            timeout_s=cfg.reward.judge_timeout_s, retry_s=60.0)  # fmt: skip
        if not (says or "").endswith(f"instance {instance}"):
            raise RuntimeError(
                f"the judge at {url} is not this job's (it says it serves {says or 'nothing'}, "
                f"not instance {instance}): another program took the port; run the job again"
            )
        watcher.start()
        yield {"judge_url": url, "judge_model": says, "judge_server_status": str(status)}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's whole session (MLflow's CLI and its uvicorn workers); after 30 s,
    or once the CLI has gone, SIGKILL to whatever of it is left."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return  # nothing of it left
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class _Watcher(threading.Thread):
    """Notices the judge server exit while the engine trains: writes why to `status` (which the
    reward reads when a call fails, `ServedJudge`) and logs it."""

    def __init__(self, proc: subprocess.Popen[bytes], status: Path, log: Path, url: str) -> None:
        super().__init__(name="judge-server-watcher", daemon=True)
        self.proc, self.status, self.log, self.url = proc, status, log, url
        self.stopping = threading.Event()

    def run(self) -> None:
        code = self.proc.wait()
        if self.stopping.is_set():
            return
        tail = self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""
        why = (
            f"the judge served inside this job's allocation at {self.url} exited (code {code}) "
            f"while the policy trained; its log, {self.log}, ends:\n{tail}\nThe stage stops "
            "here and resumes from its last checkpoint when run again."
        )
        tmp = self.status.with_suffix(".tmp")
        tmp.write_text(why)
        tmp.replace(self.status)  # whole, or not at all: the reward reads it at any moment
        logger.error("%s", why)


def _wait_until_up(ping: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the judge server exited ({proc.returncode}); {log}:\n{tail}")
        try:
            with urllib.request.urlopen(ping, timeout=5):
                return
        except OSError:
            time.sleep(1)
    raise TimeoutError(
        f"the judge server did not answer {ping} in {START_TIMEOUT_S:.0f} s; see {log}"
    )
