"""`judgeflow render`: the exact sbatch script and commands, and nothing written or submitted."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from judgeflow.cli.commands import app


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
