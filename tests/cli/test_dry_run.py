"""`judgeflow render`: the exact sbatch script and commands, and nothing written or submitted."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from judgeflow.cli.typer_app import app


def test_render_slurm_recipe_prints_sbatch_stage_and_engine_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path))
    image = "apptainer exec --nv --bind /shared /shared/judgeflow.sif python"
    result = CliRunner().invoke(
        app,
        [
            "render", "grpo-pointwise", "--set", "cluster.backend=slurm",
            "--set", "cluster.partition=gpu", "--set", "cluster.nodes=2",
            "--set", f"cluster.python={image}", "--set", "cluster.setup=[module load cuda]",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.output
    assert "#SBATCH --nodes=2" in out and "#SBATCH --gpus-per-node=8" in out
    assert "#SBATCH --partition=gpu" in out and "module load cuda" in out
    assert f"{image} -u -m submitit.core._submit" in out  # the container's python runs the job
    assert "python -m judgeflow.stages.jobs" in out
    assert "verl.trainer.main_ppo" in out and "trainer.nnodes=2" in out
    assert "custom_reward_function.path=" in out and "rewards/pointwise.py" in out
    assert not (tmp_path / "jobs").exists()  # a dry run writes nothing


def test_render_local_trl_recipe_has_no_engine_command() -> None:
    result = CliRunner().invoke(app, ["render", "grpo-pairwise", "--profile", "tiny"])
    assert result.exit_code == 0, result.output
    assert "engine trl, backend local" in result.output
    assert "main_ppo" not in result.output


def test_render_rlvr_prints_verls_command_with_the_policys_reward_and_no_judging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `judgeflow render rlvr --set cluster.backend=slurm` prints; that verl accepts the
    command is tests/engines/test_verl_validation.py's (its own validate_config and reward
    manager on the same overrides)."""
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["render", "rlvr", "--set", "cluster.backend=slurm"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "# recipe rlvr: stage train (engine verl, backend slurm)" in out
    assert "verl.trainer.main_ppo" in out and "rewards/rlvr/score.py" in out
    assert "+custom_reward_function.reward_kwargs.verification_reward=10.0" in out
    assert "+custom_reward_function.reward_kwargs.r1_style_format=off" in out
    assert "actor_rollout_ref.rollout.n=16" in out and "data.train_batch_size=64" in out
    assert "judging" not in out  # a policy writes no verdicts
    assert not (tmp_path / "jobs").exists()
