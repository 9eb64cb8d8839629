"""verl's console log -> progress and the standard metric names, on lines verl's own logger
prints (verl 0.6.1 `Tracking(default_backend=["console"])`), and verl's MLflow name rule."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import verl

from judgeflow.engines.verl_log import (
    STANDARD_NAMES,
    VerlLogFollower,
    gradient_accumulation,
    mlflow_name,
    parse_step_line,
    parse_total_steps,
    standard_metrics,
)

VERL = Path(verl.__file__).parent
SOURCE = "TowerBlocks-MT-Ranking.ranking_score"


def _step_metrics(step: int) -> dict[str, float]:
    """What verl's trainer logs for a step (names from metric_utils / dp_actor / fsdp_workers)."""
    return {
        "training/global_step": step,
        "training/epoch": 0,
        "critic/score/mean": np.float64(0.25 * step),
        "critic/score/max": 1.0,
        "critic/rewards/mean": np.float64(0.25 * step),
        "critic/advantages/mean": np.float32(0.0),
        "actor/pg_loss": np.float64(-0.01 * step),
        "actor/kl_loss": 1e-07 * step,
        "actor/kl_coef": 0.001,
        "actor/entropy": 2.5,
        "actor/grad_norm": np.float32(0.75),
        "actor/lr": 1e-06,
        "response_length/mean": 42.0,
        "timing_s/step": 12.5,
        f"val-core/{SOURCE}/reward/mean@4": 0.5 + 0.1 * step,
        f"val-aux/{SOURCE}/valid_answer/mean@4": 0.9,
        "val-core/other/reward/mean@4": 0.3 + 0.1 * step,
        "val-aux/other/valid_answer/mean@4": 0.7,
    }


def _recorded_log(capsys: pytest.CaptureFixture[str]) -> list[str]:
    from verl.utils.tracking import Tracking

    tracking = Tracking(project_name="judgeflow", experiment_name="t", default_backend=["console"])
    print("Total training steps: 3")  # as RayPPOTrainer._create_dataloader prints it
    for step in (1, 2, 3):
        tracking.log(data=_step_metrics(step), step=step)
    lines = capsys.readouterr().out.splitlines()
    # Ray prefixes the TaskRunner actor's output; the driver's stdout has both forms.
    return [f"(TaskRunner pid=4242) {line}" if i % 2 else line for i, line in enumerate(lines)]


def test_the_recorded_log_gives_progress_and_the_standard_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = _recorded_log(capsys)
    plain = [line.removeprefix("(TaskRunner pid=4242) ") for line in lines]
    assert any(
        line.startswith("step:1 - ") and " - critic/score/mean:0.25 - " in line for line in plain
    )
    progress: list[tuple[int, int]] = []
    logged: list[tuple[int, dict[str, float]]] = []
    follower = VerlLogFollower(
        progress=lambda s, t: progress.append((s, t)),
        sink=lambda m, s: logged.append((s, m)),
        accumulation=4,  # verl logged each loss / 4 (see standard_metrics)
    )
    for line in ["(TaskRunner pid=4242) INFO something else", *lines]:
        follower.feed(line)
    assert progress == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert [s for s, _ in logged] == [1, 2, 3]
    step2 = logged[1][1]
    assert step2["train/reward_mean"] == pytest.approx(0.5)  # critic/score/mean
    # verl's scaled losses undone: KL estimate x 4, and TRL's loss = (pg + coef x kl) x 4
    assert step2["train/kl"] == pytest.approx(2e-07 * 4)
    assert step2["train/loss"] == pytest.approx((-0.02 + 0.001 * 2e-07) * 4)
    assert step2["train/grad_norm"] == pytest.approx(0.75)
    assert step2["train/learning_rate"] == pytest.approx(1e-06)
    assert step2["train/completion_length"] == pytest.approx(42.0)
    assert step2["val/reward_mean"] == pytest.approx((0.7 + 0.5) / 2)  # mean over sources
    assert step2["val/format_failure_rate"] == pytest.approx(1 - 0.8)
    assert set(step2) == {
        *STANDARD_NAMES.values(),
        "train/kl",
        "train/loss",
        "val/reward_mean",
        "val/format_failure_rate",
    }
    assert follower.last_step == 3 and follower.total == 3


def test_without_the_accumulation_the_scaled_losses_are_left_out() -> None:
    metrics = {"critic/score/mean": 0.5, "actor/pg_loss": -0.01, "actor/kl_loss": 1e-3}
    assert standard_metrics(metrics) == {"train/reward_mean": 0.5}


def test_gradient_accumulation_is_verls() -> None:
    # grrm-rlvr on 2 x 8 GPUs: 128 prompts x 8 responses over 16 ranks, micro-batches of 8
    assert gradient_accumulation(ppo_mini_batch_size=128, rollout_n=8, n_gpus=16,
                                 ppo_micro_batch_size_per_gpu=8) == 8  # fmt: skip
    assert gradient_accumulation(ppo_mini_batch_size=128, rollout_n=8, n_gpus=16,
                                 ppo_micro_batch_size_per_gpu=8,
                                 ulysses_sequence_parallel_size=2) == 16  # fmt: skip
    # The verl 0.6.1 lines this undoes: if they change, the correction must too.
    actor = (VERL / "workers/actor/dp_actor.py").read_text()
    workers = (VERL / "workers/fsdp_workers.py").read_text()
    assert "loss_scale_factor = 1 / self.gradient_accumulation" in actor
    assert (
        'micro_batch_metrics["actor/pg_loss"] = pg_loss.detach().item() * loss_scale_factor'
        in actor
    )
    assert (
        'micro_batch_metrics["actor/kl_loss"] = kl_loss.detach().item() * loss_scale_factor'
        in actor
    )
    assert "self.config.ppo_mini_batch_size // self.config.ppo_micro_batch_size_per_gpu" in actor
    assert "self.config.actor.ppo_mini_batch_size *= self.config.rollout.n" in workers
    assert (
        "self.config.actor.ppo_mini_batch_size //= self.device_mesh.size() "
        "// self.ulysses_sequence_parallel_size" in workers
    )


def test_other_lines_are_not_steps() -> None:
    for line in ["", "Total training steps: 12", "step:", "validation generation end",
                 "(WorkerDict pid=1) [Rank 0] step:notanumber"]:  # fmt: skip
        assert parse_step_line(line) is None
    assert parse_total_steps("Total training steps: 12") == 12
    assert parse_total_steps("step:1 - a:1") is None
    assert parse_step_line("\x1b[36m(TaskRunner pid=7)\x1b[0m step:5 - critic/score/mean:0.5") == (
        5,
        {"critic/score/mean": 0.5},
    )
    assert parse_step_line("step:2 - actor/pg_loss:np.float64(-0.5)") == (
        2,
        {"actor/pg_loss": -0.5},
    )


def test_mlflow_names_are_what_verls_adapter_stores(tmp_path: Path) -> None:
    """Log through verl's own MLflow adapter into a real (sqlite) MLflow and read names back."""
    import mlflow
    from mlflow.tracking import MlflowClient
    from verl.utils.tracking import _MlflowLoggingAdapter

    names = [f"val-core/{SOURCE}/reward/mean@4", "val-aux/a b/acc/best@4/std", "x#y(z)",
             "critic/score/mean", "timing_s/gen", "perf/max_memory_allocated_gb", "ü@ö"]  # fmt: skip
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    try:
        with mlflow.start_run() as run:
            _MlflowLoggingAdapter().log(dict.fromkeys(names, 1.0), step=1)
    finally:
        mlflow.set_tracking_uri(None)
    stored = MlflowClient(uri).get_run(run.info.run_id).data.metrics
    assert sorted(stored) == sorted(mlflow_name(n) for n in names)
    assert mlflow_name(f"val-core/{SOURCE}/reward/mean@4") == f"val-core/{SOURCE}/reward/mean_at_4"


def test_every_mapped_verl_name_is_one_verl_produces() -> None:
    """If verl renames a metric, this fails instead of the dashboard going quiet."""
    code = "\n".join(
        (VERL / rel).read_text()
        for rel in (
            "trainer/ppo/metric_utils.py",
            "trainer/ppo/ray_trainer.py",
            "workers/actor/dp_actor.py",
            "workers/fsdp_workers.py",
        )
    )
    for name in STANDARD_NAMES:
        assert f'"{name}"' in code or f'"{name.rsplit("/", 1)[0]}/' in code, name
    assert 'print(f"Total training steps: {self.total_training_steps}")' in code
    assert re.search(r'metric_sec = "val-core"', code)
    assert 'core_var = "acc" if "acc" in var2metric2val else "reward"' in code


class _ScriptedJudge:
    """A pairwise judge whose k-th verdict of a call is `script[k]`."""

    mode = "pairwise"

    def __init__(self) -> None:
        self.script: list[str] = []

    def verdicts(self, rows: list[Any]) -> list[dict[str, Any]]:
        return [dict(_VERDICTS[self.script[k]]) for k in range(len(rows))]


_VERDICTS: dict[str, dict[str, Any]] = {
    "good": {"valid": True, "consistent": True, "better": "A"},
    "flipped": {"valid": True, "consistent": False, "better": "A"},
    "malformed": {"valid": False, "reasoning": "no verdict"},
}


def _as_verl_names(per_source: dict[str, dict[str, dict[str, float]]]) -> dict[str, float]:
    """`process_validation_metrics`' output named as `RayPPOTrainer._validate` names it."""
    out = {}
    for source, variables in per_source.items():
        for var, metrics in variables.items():
            for metric, value in metrics.items():
                core = var == "reward" and metric.startswith(("mean", "maj", "best"))
                out[f"{'val-core' if core else 'val-aux'}/{source}/{var}/{metric}"] = value
    return out


@pytest.mark.usefixtures("datasets_cache")
def test_the_judges_failures_reach_verls_step_and_validation_metrics(
    tmp_path: Path, tokenizer: Any, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """verl's batch reward manager, loaded as main_ppo loads it, runs judgeflow's judged reward
    on 3 judge rows and a gsm8k row: validation before training (step 0), then step 1's
    training reward and its validation. The counts line of step 1's training call and verl's
    console step line give `train/judge_*_rate` over the 3 judged rollouts; verl's validation
    means (over all 4 rollouts of the source) give the judged-only `val/judge_*_rate`."""
    import sys

    from test_verl_validation import batch_of, composed, reward_manager, rl_dataset
    from verl.trainer.ppo.metric_utils import process_validation_metrics
    from verl.utils.tracking import Tracking

    from judgeflow.data.rlvr import prepare_rlvr

    rows = tmp_path / "rows.jsonl"
    questions = ["What is the capital of France?", "What is 2 + 2?", "Name a colour."]
    rows.write_text("".join(json.dumps(r) + "\n" for r in [
        *({"messages": [{"role": "user", "content": q}], "ground_truth": f"Answer to {q}",
           "dataset": "judge"} for q in questions),
        {"messages": [{"role": "user", "content": "What is 3 + 4?"}], "ground_truth": "7",
         "dataset": "gsm8k"},
    ]))  # fmt: skip
    prepared = prepare_rlvr(rows, tmp_path / "rlvr.parquet", judge_datasets=["judge"])
    config = composed("rlvr-judged", overrides=[
        "data.max_prompt_length=256", "reward.judge=/models/judge", "reward.judge_mode=pairwise",
        "reward.judge_max_new_tokens=8", "rlvr.r1_style_format=off"])  # fmt: skip
    assert config.custom_reward_function.reward_kwargs.judge_log_counts is True
    dataset = rl_dataset([str(prepared.train_path)], config, tokenizer)
    data, _ = batch_of([dataset[i] for i in range(4)], ["Paris.", "4", "Red.", "7"], tokenizer)
    data.non_tensor_batch["data_source"] = np.array(["mixed"] * 4, dtype=object)  # one source
    judge = _ScriptedJudge()
    sys.modules.pop("custom_module", None)
    try:
        manager = reward_manager(config, tokenizer)
        monkeypatch.setattr(sys.modules["custom_module"], "client_for", lambda settings: judge)

        def call(script: list[str]) -> dict[str, float]:
            judge.script = script
            out = manager(data, return_dict=True)
            infos = {"reward": out["reward_tensor"].sum(-1).tolist(), **out["reward_extra_info"]}
            uids = [str(i) for i in range(4)]
            return _as_verl_names(process_validation_metrics(["mixed"] * 4, uids, infos))

        capsys.readouterr()
        tracking = Tracking(project_name="judgeflow", experiment_name="t",
                            default_backend=["console"])  # fmt: skip
        tracking.log(data=call(["good", "good", "good"]), step=0)  # validation before training
        train = call(["malformed", "flipped", "flipped"])  # step 1's rollouts
        val = call(["malformed", "malformed", "good"])  # step 1's validation
        tracking.log(data={"critic/score/mean": 0.5, **val}, step=1)
    finally:
        sys.modules.pop("custom_module", None)
    lines = capsys.readouterr().out.splitlines()
    assert sum("judgeflow judge counts: judged=3 asked=3" in line for line in lines) == 3
    assert train["val-aux/mixed/judge_inconsistent/mean@1"] == pytest.approx(2 / 4)  # diluted
    assert val["val-aux/mixed/judge_format_failure/mean@1"] == pytest.approx(2 / 4)
    logged: list[tuple[int, dict[str, float]]] = []
    follower = VerlLogFollower(sink=lambda m, s: logged.append((s, m)))
    for line in lines:
        follower.feed(f"(TaskRunner pid=9) {line}")
    step0, step1 = dict(logged)[0], dict(logged)[1]
    assert "train/judge_format_failure_rate" not in step0  # validation only: no training
    assert step0["val/judge_format_failure_rate"] == 0.0
    assert step1["train/judge_format_failure_rate"] == pytest.approx(1 / 3)
    assert step1["train/judge_inconsistent_rate"] == pytest.approx(2 / 3)
    assert step1["val/judge_format_failure_rate"] == pytest.approx(2 / 3)  # not verl's 2 / 4
    assert step1["val/judge_inconsistent_rate"] == 0.0


def test_a_run_the_judge_stopped_says_why() -> None:
    follower = VerlLogFollower()
    follower.feed("(TaskRunner pid=9) ray.exceptions.RayTaskError(JudgeFailing): ray::run()")
    follower.feed("(TaskRunner pid=9) judgeflow.inference.judge_failures.JudgeFailing: the "
                  "pairwise judge: 64 of its last 64 replies did not parse")  # fmt: skip
    assert follower.judge_failing == (
        "JudgeFailing: the pairwise judge: 64 of its last 64 replies did not parse"
    )
