"""judge-grpo with its GPU stages as Slurm jobs on the dev cluster (real Prefect, MLflow, Slurm).

Covers: the train stage runs as a Slurm job from the flow and its metrics reach MLflow; a train
job killed with scancel, then its resubmission's stage process killed with SIGKILL, is retried
each time and resumes from its checkpoint; cancelling the flow run cancels the job; nothing is
left behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from mlflow.tracking import MlflowClient
from waits import HANG_GUARD_S

if TYPE_CHECKING:
    from conftest import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(900)]


def _slurm_overrides(mlflow_server: str, *extra: str) -> list[str]:
    return [
        f"tracking.tracking_uri={mlflow_server}",
        "engine=trl",  # no GPUs here: TRL inside the Slurm job instead of verl
        "cluster.backend=slurm",
        "cluster.partition=debug",
        "cluster.timeout_min=15",
        "cluster.ray_num_cpus=1",
        "cluster.ray_object_store_mb=80",
        "cluster.poll_s=1",
        "cluster.retry_delay_s=1",
        "sft.enabled=false",  # the SFT stage as a job: tests/flows/test_grrm_flow.py
        *extra,
    ]


#: Accounting states of a job that has not ended yet.
_ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "RESIZING"}


def _jobs(cluster: SlurmCluster, name: str, since: str) -> list[tuple[str, str]]:
    """(job id, state) of the jobs named `name` since `since`, once none is still active: the
    command that followed a job returns when the job's result is read, and slurmdbd records the
    job's end a moment later."""
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        out = cluster.run("sacct", "-X", "-n", "-P", "-S", since, "--name", name,
                          "-o", "JobID,State")  # fmt: skip
        jobs = [tuple(line.split("|", 1)) for line in out.strip().splitlines() if line]
        if not any(state in _ACTIVE for _, state in jobs) or time.monotonic() > deadline:
            return jobs  # type: ignore[return-value]
        time.sleep(0.5)


def _queue(cluster: SlurmCluster, name: str) -> list[str]:
    return cluster.run("squeue", "-h", "-n", name, "-o", "%i").split()


def _wait(probe: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def _stage_process(run_dir: Path) -> int:
    """The PID of the train stage's command (`python -m judgeflow.stages.jobs …/train/input.json`)."""
    wanted = f"{run_dir.name}/train/input.json"
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "judgeflow.stages.jobs" in cmdline and wanted in cmdline:
                return int(entry.name)
    raise AssertionError(f"no stage process for {wanted}")


def _checkpoints(runs: Path) -> list[int]:
    """The steps of the train stage's checkpoints that have their trainer_state.json."""
    found = runs.glob("*/checkpoint-*/trainer_state.json")
    return sorted(int(p.parent.name.rsplit("-", 1)[1]) for p in found)


def test_stages_run_as_slurm_jobs_and_a_train_job_killed_twice_resumes_from_its_checkpoints(
    slurm_cluster: SlurmCluster,
    prefect_server: str,
    mlflow_server: str,
    judgeflow_home: Path,
    tmp_path: Path,
) -> None:
    """A judge pipeline on Slurm: the evaluations and the train stage run as Slurm jobs and log
    to MLflow from inside them. Its train job is killed from outside twice — first cancelled
    (scancel), then the resubmitted job's stage process killed as a dying node's would be
    (SIGKILL) — and the stage is resubmitted each time and resumes from its newest checkpoint;
    the steps before a checkpoint it resumed from are not trained again. (One run for all of
    it: a Slurm pipeline costs a minute and a half of the suite.)"""
    import signal

    from flows.judge_grpo import judge_grpo
    from judgeflow.engines.trl.checkpoints import checkpoint_step, last_complete_checkpoint

    since = _now()
    overrides = _slurm_overrides(
        mlflow_server, "grpo.max_steps=12", "grpo.save_freq=1", "cluster.retries=2",
        # A SIGKILLed process leaves its temporary files behind, as on a dying node: here they go
        # to the test's folder. Cancelled (SIGTERM), the stage removes its own.
        f"cluster.env.TMPDIR={tmp_path}",
    )  # fmt: skip
    outcome: dict[str, Any] = {}

    def run_flow() -> None:
        try:
            outcome["summary"] = judge_grpo(mode="pointwise", profile="tiny", overrides=overrides)
        except BaseException as exc:  # surfaced by the assertion below
            outcome["error"] = exc

    thread = threading.Thread(target=run_flow, daemon=True)
    thread.start()
    runs = judgeflow_home / "artifacts" / "runs"
    _wait(lambda: 2 in _checkpoints(runs), 400, "checkpoint-2")
    first_job = _wait(lambda: _queue(slurm_cluster, "judgeflow-train"), 30, "the train job")[0]
    slurm_cluster.run("scancel", first_job)

    # The resubmitted job resumes from the newest checkpoint the cancelled one left.
    second_job = _wait(
        lambda: [j for j in _queue(slurm_cluster, "judgeflow-train") if j != first_job],
        120, "the resubmitted train job",
    )[0]  # fmt: skip
    run_dir = next(runs.glob("*/checkpoint-2")).parent
    first_resume = checkpoint_step(last_complete_checkpoint(run_dir))  # what a resume takes
    assert first_resume < 10, f"the cancelled job got to checkpoint-{first_resume}: too far"
    _wait(lambda: first_resume + 2 in _checkpoints(runs), 400, f"checkpoint-{first_resume + 2}")
    os.kill(_stage_process(run_dir), signal.SIGKILL)
    thread.join(timeout=600)
    assert not thread.is_alive(), "the flow did not finish"
    assert "error" not in outcome, outcome.get("error")

    summary = outcome["summary"]
    assert summary["global_step"] == 12
    run = MlflowClient(mlflow_server).get_run(summary["mlflow_run_id"])
    resumed_from = run.data.tags["judgeflow.resumed_from"]  # the last attempt's
    assert "checkpoint-" in resumed_from
    second_resume = int(resumed_from.rsplit("-", 1)[1])
    assert second_resume >= first_resume + 2
    states = dict(_jobs(slurm_cluster, "judgeflow-train", since))
    assert states[first_job].startswith("CANCELLED")
    assert states[second_job].startswith("FAILED")
    third_job = run.data.tags["judgeflow.train.job_id"]
    assert third_job not in (first_job, second_job) and states[third_job] == "COMPLETED"
    assert _queue(slurm_cluster, "judgeflow-train") == []
    # The evaluations ran as Slurm jobs too, and the judge it trained was saved and measured.
    evaluations = _jobs(slurm_cluster, "judgeflow-evaluate-before", since) + _jobs(
        slurm_cluster, "judgeflow-evaluate-after", since
    )
    assert [state for _, state in evaluations] == ["COMPLETED", "COMPLETED"]
    assert "after/exact_match" in run.data.metrics
    assert Path(summary["checkpoint"], "model.safetensors").is_file()
    # No attempt trained a step at or before the checkpoint it resumed from: the steps up to
    # the first resume point were trained once (by the first job), and so were those from two
    # past it (the cancelled job got at most one further) to the second (by the second job);
    # a step a kill interrupted, at most twice; every step was.
    steps = Counter(  # logged from inside the Slurm jobs
        m.step
        for m in MlflowClient(mlflow_server).get_metric_history(run.info.run_id, "train/loss")
    )
    assert sorted(steps) == list(range(1, 13))
    once = [*range(1, first_resume + 1), *range(first_resume + 2, second_resume + 1)]
    assert all(steps[s] == 1 for s in once), (first_resume, second_resume, steps)
    assert all(steps[s] <= 2 for s in steps), steps


SERVE = """
import sys
from flows.judge_grpo import judge_grpo
judge_grpo.serve(name=sys.argv[1])
"""


def test_cancelling_the_flow_run_cancels_its_slurm_job(
    slurm_cluster: SlurmCluster, prefect_server: str, mlflow_server: str, judgeflow_home: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.deployments import run_deployment
    from prefect.states import Cancelling

    since = _now()
    log = tmp_path / "serve.log"
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE, "cancel-test"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        # the runner polls for scheduled runs every second, not every ten
        env={**os.environ, "PREFECT_API_URL": prefect_server, "PREFECT_RUNNER_POLL_FREQUENCY": "1"},
    )  # fmt: skip
    try:
        flow_run = _wait(
            lambda: _try_run_deployment(
                run_deployment,
                {
                    "mode": "pointwise",
                    "profile": "tiny",
                    "overrides": _slurm_overrides(
                        mlflow_server,
                        "grpo.max_steps=200",
                        "evaluation.enabled=false",
                        "cluster.retries=0",
                    ),
                },
            ),
            120,
            "the deployment to be served",
        )

        def train_job() -> list[str]:
            assert "Finished in state Failed" not in log.read_text(), log.read_text()[-3000:]
            return _queue(slurm_cluster, "judgeflow-train")

        job_id = _wait(train_job, 300, "the train job")[0]
        _wait(
            lambda: "RUNNING" in slurm_cluster.run("squeue", "-h", "-j", job_id, "-o", "%T"),
            120,
            "job start",
        )

        import asyncio

        async def cancel_and_wait() -> StateType:
            async with get_client() as client:
                await client.set_flow_run_state(flow_run.id, Cancelling(), force=True)
                for _ in range(240):
                    state = (await client.read_flow_run(flow_run.id)).state
                    if state and state.is_final():
                        return state.type
                    await asyncio.sleep(0.5)
            raise AssertionError("flow run never reached a final state")

        assert asyncio.run(cancel_and_wait()) == StateType.CANCELLED
        _wait(
            lambda: not _queue(slurm_cluster, "judgeflow-train"), 60, "the job to leave the queue"
        )
        # slurmdbd records the end a moment after the job leaves the queue: wait for it.
        state = _wait(
            lambda: dict(_jobs(slurm_cluster, "judgeflow-train", since)).get(job_id),
            60,
            "accounting to record the job",
        )
        assert state.startswith("CANCELLED"), state
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        for job in _queue(slurm_cluster, "judgeflow-train"):
            slurm_cluster.run("scancel", job)


def _try_run_deployment(run_deployment: Any, parameters: dict[str, Any]) -> Any:
    try:
        return run_deployment("judge-grpo/cancel-test", parameters=parameters, timeout=0)
    except Exception:  # not registered yet
        return None
