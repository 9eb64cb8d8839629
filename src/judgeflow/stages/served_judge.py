"""The paying judge of a judge-paid policy on Slurm with verl, served inside the train job's
allocation: `mlflow models serve` of an MLflow model the job writes around the judge's weights (a
pipeline pins `reward.judge` to the registered version's weights) on the head node's last
`reward.judge_gpus` GPUs (the policy's Ray cluster is started on the others), listening where
verl's batch reward manager calls it (`engines.verl.served_judge_url`). Started before verl,
stopped after it, its log beside the job's.

Not executed here: no GPU. The command is what `judgeflow render` prints, and the tests run the
same `mlflow models serve` on CPU and call it through verl's reward manager.
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from judgeflow.config import RunConfig

__all__ = ["judge_server_command", "judge_server_gpus", "served_judge"]

#: How long the judge may take to load before the train job gives up on it.
START_TIMEOUT_S = 900.0


def _serves_a_judge(cfg: RunConfig) -> bool:
    return (
        cfg.mode == "rlvr"
        and cfg.reward.paid_by_judge
        and not cfg.reward.judge_url
        and cfg.resolved_engine == "verl"
    )


#: Where the train job writes the MLflow model of a judge given by its weights (not registered).
JUDGE_MODEL_DIRNAME = "judge-model"


def _wrapped(run_dir: str | Path, judge: str) -> Path:
    """The MLflow model the job writes around a judge's weights: one per judge, so a run whose
    judge changed never serves the wrapper of the last one."""
    digest = hashlib.sha256(judge.encode()).hexdigest()[:12]
    return Path(run_dir) / f"{JUDGE_MODEL_DIRNAME}-{digest}"


def judge_server_command(cfg: RunConfig, run_dir: str | Path = "<run-dir>") -> list[str] | None:
    """`mlflow models serve` of the pinned judge version (or of the MLflow model the job writes
    for a judge given by its weights, under `run_dir`); None when this run serves none."""
    if not _serves_a_judge(cfg):
        return None
    from judgeflow.engines.verl import SERVED_JUDGE_PORT

    judge = cfg.reward.judge or ""
    model = judge if judge.startswith("models:/") else str(_wrapped(run_dir, judge))
    mlflow = str(Path(sys.executable).parent / "mlflow")
    # -t: MLflow's scoring server ends a request after 60 s by default; a batch of long judge
    # replies takes longer, and the client (`ServedJudge`) waits as long as this
    return [mlflow, "models", "serve", "-m", model, "--env-manager", "local",
            "-h", "127.0.0.1", "-p", str(SERVED_JUDGE_PORT), "-w", "1",
            "-t", str(math.ceil(cfg.reward.judge_timeout_s))]  # fmt: skip


def judge_server_gpus(cfg: RunConfig) -> str:
    """CUDA_VISIBLE_DEVICES of the judge: the node's last `reward.judge_gpus` GPUs."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = visible.split(",") if visible else [str(i) for i in range(cfg.cluster.gpus_per_node)]
    return ",".join(ids[len(ids) - cfg.reward.judge_gpus :])


@contextmanager
def served_judge(cfg: RunConfig, log_dir: str | Path) -> Iterator[str | None]:
    """Serve the judge for the body (verl's training) when this run needs one; its URL."""
    command = judge_server_command(cfg, log_dir)
    if command is None:
        yield None
        return
    from judgeflow.engines.verl import served_judge_url

    judge = cfg.reward.judge or ""
    if not judge.startswith("models:/"):  # weights, not a registered version: wrap them
        from judgeflow.inference.pyfunc import save_judge_model

        model_dir = _wrapped(log_dir, judge)
        if not model_dir.is_dir():
            save_judge_model(model_dir, {
                "model_uri": judge, "mode": cfg.reward.judge_mode,
                "max_new_tokens": cfg.reward.judge_max_new_tokens,
                "storage_root": cfg.storage.root, "batch_size": cfg.reward.judge_batch_size,
            })  # fmt: skip

    url = served_judge_url(cfg)
    log = Path(log_dir) / "judge-server.log"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": judge_server_gpus(cfg)}
    with log.open("ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_until_up(url.removesuffix("/invocations") + "/ping", proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


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
            time.sleep(2)
    raise TimeoutError(
        f"the judge server did not answer {ping} in {START_TIMEOUT_S:.0f} s; see {log}"
    )
