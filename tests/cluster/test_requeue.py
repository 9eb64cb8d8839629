"""A time-limit/preemption signal requeues the stage through submitit, and the rerun resumes."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from waits import HANG_GUARD_S

from judgeflow.cluster import JobSpec, submit, watch
from judgeflow.config import ClusterConfig

if TYPE_CHECKING:
    from conftest import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(600)]

# A "training" command that checkpoints as it goes and resumes from its checkpoint. The first
# attempt trains until the requeue stops it (however late a busy machine delivers the signal; a
# hang guard ends it at step 300); the rerun trains two more steps and finishes.
TRAINER = textwrap.dedent(
    """
    import json, os, pathlib, time
    state = pathlib.Path(os.environ["STATE"])
    step = int(state.read_text()) if state.exists() else 0
    with open(os.environ["ATTEMPTS"], "a") as fh:
        fh.write(f"start at {step}\\n")
    last = 300 if step == 0 else step + 2
    while step < last:
        time.sleep(1.0)
        step += 1
        state.write_text(str(step))
    result = {"global_step": step, "attempts": open(os.environ["ATTEMPTS"]).read().splitlines()}
    pathlib.Path(os.environ["JUDGEFLOW_STAGE_DIR"], "result.json").write_text(json.dumps(result))
    """
)


def test_usr2_requeues_the_job_and_the_rerun_resumes(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    state, attempts = tmp_path / "state", tmp_path / "attempts"
    spec = JobSpec(
        name="requeue", command=[sys.executable, str(script)], workdir=str(tmp_path / "stage"),
        ray=False, env={"STATE": str(state), "ATTEMPTS": str(attempts)},
    )  # fmt: skip
    cluster = ClusterConfig(backend="slurm", partition="debug", gpus_per_node=0, timeout_min=10)
    handle = submit(spec, cluster)

    def step() -> int:  # the trainer's checkpoint: its last finished step (0 before the first)
        return int(state.read_text() or 0) if state.exists() else 0

    deadline = time.monotonic() + HANG_GUARD_S
    while step() < 2 and time.monotonic() < deadline:
        time.sleep(0.3)
    if step() < 2:  # say what it waited for, and leave nothing running
        why = (
            f"job {handle.job_id}: the first attempt did not checkpoint step 2 within "
            f"{HANG_GUARD_S} s (at step {step()}; started: "
            f"{attempts.read_text().strip() if attempts.exists() else 'no'}; "
            f"queued: {slurm_cluster.queued(handle.job_id)})"
        )
        handle.cancel()
        pytest.fail(why)
    # What Slurm sends before the time limit (--signal=USR2@120) or on preemption.
    slurm_cluster.run("scancel", "--signal=USR2", handle.job_id)

    result = watch(handle, on_log=lambda _line: None, poll_s=1.0)
    assert result["attempts"][0] == "start at 0"
    assert len(result["attempts"]) == 2
    resumed_at = int(result["attempts"][1].removeprefix("start at "))
    assert resumed_at >= 2  # the requeued run continued from its checkpoint
    assert result["global_step"] == resumed_at + 2
    # the same Slurm job ran twice (requeued by submitit), not a resubmission by us
    assert handle.final_state().value == "COMPLETED"
