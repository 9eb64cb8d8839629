"""The paying judge a train job serves inside its own allocation (`judgeflow.stages.served_judge`),
as two jobs on one node serve theirs: real `mlflow models serve` processes of the tiny judge.

Each job's judge listens on a port of its own and says it is that job's (an instance id in the
weights it says it serves); a reward pinned to one job's judge refuses the other's; a judge that
dies while its job trains stops that job's reward at once, with the server's exit and log,
instead of retrying for `reward.judge_retry_s`; the other job's judge goes on paying; nothing is
left running. (The same judge paying TRL inside a Slurm job on the dev cluster:
tests/cluster/test_served_judge_on_slurm.py.)
"""

from __future__ import annotations

import os
import signal
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest

from judgeflow.config import load_config
from judgeflow.inference.judge_reward import client_for
from judgeflow.inference.served_judge_client import JudgeRefused, JudgeUnavailable, ServedJudge
from judgeflow.stages.served_judge import judge_server_command, served_judge

pytestmark = pytest.mark.timeout(600)

ROWS = [{"query": "Which is an animal: cat or chair?", "response": "cat"}]


def _cfg(judge: Path) -> object:
    return load_config(
        "rlvr-judged",
        profile="tiny-hackable",
        overrides=[
            "engine=trl",
            "cluster.backend=slurm",  # a job on the dev cluster's CPU nodes serves its judge
            f"reward.judge={judge}",
            "reward.judge_mode=pointwise",
            "reward.judge_max_new_tokens=4",
        ],
    )


def _servers(instance: str) -> list[int]:
    """PIDs of processes whose command line names the judge instance's MLflow model."""
    found = subprocess.run(["pgrep", "-f", instance], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


@pytest.mark.slow(seconds=25)  # two `mlflow models serve` started and watched
def test_two_jobs_on_one_node_are_each_paid_by_their_own_judge_and_a_dead_one_stops_its_job(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # what a killed server leaves stays here
    cfg = _cfg(tiny_model)
    assert cfg.serves_judge_in_allocation  # type: ignore[attr-defined]
    rendered = judge_server_command(cfg)  # type: ignore[arg-type]
    assert rendered is not None and "<free-port>" in rendered
    with ExitStack() as jobs:
        served = [
            jobs.enter_context(served_judge(cfg, tmp_path / name))  # type: ignore[arg-type]
            for name in ("job-a", "job-b")
        ]
        a, b = served
        assert a is not None and b is not None
        assert a["judge_url"] != b["judge_url"]  # a free port each, not one fixed port
        instances = [s["judge_model"].rsplit(" instance ", 1)[1] for s in served]
        assert instances[0] != instances[1] and all(_servers(i) for i in instances)

        pays_a = client_for(cfg.policy_reward_kwargs(served=a))  # type: ignore[attr-defined]
        assert isinstance(pays_a, ServedJudge) and pays_a.url == a["judge_url"]
        [verdict] = pays_a.verdicts(ROWS)
        assert verdict["valid"] is False  # the untrained tiny judge: a reply that does not parse

        # job B's reward pointed at job A's judge (its port reused) refuses to be paid by it
        foreign = ServedJudge(a["judge_url"], "pointwise", 4, model=b["judge_model"])
        with pytest.raises(JudgeRefused, match=f"instance {instances[0]}"):
            foreign.verdicts(ROWS)
        foreign.close()

        # job B's judge dies while B trains: B's reward stops at once, saying why
        pays_b = client_for(cfg.policy_reward_kwargs(served=b))  # type: ignore[attr-defined]
        assert pays_b.verdicts(ROWS)  # type: ignore[attr-defined]
        for pid in _servers(instances[1]):
            os.kill(pid, signal.SIGKILL)
        status = Path(b["judge_server_status"])
        with pytest.raises(JudgeUnavailable, match="exited") as stopped:
            while True:  # each call fails to connect; once the watcher has written, it stops
                pays_b.verdicts(ROWS)  # type: ignore[attr-defined]
        assert status.exists() and str(tmp_path / "job-b" / "judge-server.log") in str(
            stopped.value
        )
        assert pays_a.verdicts(ROWS)  # job A's judge is untouched
    assert not any(_servers(i) for i in instances)  # both stopped with their jobs
    assert not list(tmp_path.glob("job-*/judge-model-*"))  # the per-job MLflow models removed
