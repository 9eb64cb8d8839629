"""GRPO with TRL on the tiny model: trains, streams named metrics, checkpoints and resumes."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgeflow.engines.trl import (
    GrpoParams,
    map_trl_logs,
    params_from,
    read_data_order,
    reward_functions,
    train_grpo,
)

NAMED_METRICS = {
    "train/reward_mean",
    "train/reward_std",
    "train/zero_std_frac",
    "train/real_batch_size_ratio",
    "train/kl",
    "train/loss",
    "train/completion_length",
    "train/format_failure_rate",
    "train/learning_rate",
}


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, rl_row: Any
) -> tuple[Path, Path]:
    train = tmp_path_factory.mktemp("grpo") / "train.parquet"
    pq.write_table(pa.Table.from_pylist([rl_row(i) for i in range(8)]), train)
    return tiny_model, train


def _params(model: Path, out: Path, max_steps: int) -> GrpoParams:
    return GrpoParams(
        model_path=str(model),
        output_dir=str(out),
        reward="pointwise",
        learning_rate=1e-4,
        num_generations=4,
        prompts_per_step=2,
        micro_batch_size=4,
        max_prompt_length=128,
        max_completion_length=16,
        max_steps=max_steps,
        save_steps=1,
        use_cpu=True,
        filter_zero_std_samples=True,  # open-instruct's filtering, through resumes too
    )


def test_trains_streams_metrics_and_resumes(
    setup: tuple[Path, Path], tmp_path: Path, rl_row: Any
) -> None:
    model, train = setup
    out = tmp_path / "run"
    logged: list[tuple[int, dict[str, float]]] = []
    steps: list[tuple[int, int]] = []

    val = tmp_path / "val.parquet"  # evaluated after each step: its rows are not training data
    rows = [{**rl_row(i), "extra_info": {"index": i}} for i in (100, 101)]
    pq.write_table(pa.Table.from_pylist(rows), val)
    first = train_grpo(
        _params(model, out, max_steps=2),
        train,
        eval_file=val,
        metrics_sink=lambda m, s: logged.append((s, m)),
        progress=lambda step, total: steps.append((step, total)),
    )

    assert first.global_step == 2 and first.resumed_from is None
    assert first.last_checkpoint == out / "checkpoint-2"
    assert (out / "checkpoint-1").is_dir()
    assert (first.final_model_dir / "model.safetensors").is_file()
    assert (first.final_model_dir / "tokenizer.json").is_file()
    assert steps == [(1, 2), (2, 2)]
    per_step = {s: m for s, m in logged if "train/loss" in m}
    assert sorted(per_step) == [1, 2]
    assert [s for s, m in logged if "val/reward_mean" in m] == [1, 2]
    for metrics in per_step.values():
        # A step whose groups all lack reward variance trains on nothing (zero-variance
        # filtering): no forward pass, so no KL to report.
        trained = metrics["train/real_batch_size_ratio"] > 0
        expected = NAMED_METRICS if trained else NAMED_METRICS - {"train/kl"}
        assert metrics.keys() >= expected
        assert trained or "train/kl" not in metrics
        assert all(math.isfinite(metrics[k]) for k in expected)
        assert metrics["train/real_batch_size_ratio"] == pytest.approx(
            1 - metrics["train/zero_std_frac"]
        )
        assert 0.0 <= metrics["train/format_failure_rate"] <= 1.0
        assert 0.0 <= metrics["train/zero_std_frac"] <= 1.0
        assert metrics["train/learning_rate"] == pytest.approx(1e-4)
        assert 0 < metrics["train/completion_length"] <= 16
    assert "train/summary/runtime" in first.metrics
    assert first.metrics.keys() >= NAMED_METRICS - {"train/kl"}

    logged.clear()
    steps.clear()
    second = train_grpo(
        _params(model, out, max_steps=3),
        train,
        metrics_sink=lambda m, s: logged.append((s, m)),
        progress=lambda step, total: steps.append((step, total)),
    )

    assert second.resumed_from == out / "checkpoint-2"
    assert second.global_step == 3
    assert steps == [(3, 3)]  # continued, did not start over
    assert [s for s, m in logged if "train/loss" in m] == [3]
    assert second.last_checkpoint == out / "checkpoint-3"
    # The audit trail: two training prompts per step, none of the validation rows.
    order = read_data_order(out)
    assert sorted(order) == [1, 2, 3]
    assert [order[s]["attempt_from"] for s in (1, 2, 3)] == [0, 0, 2]
    assert all(len(r["rows"]) == 2 and set(r["rows"]) <= set(range(8)) for r in order.values())


def test_reward_adapter_scores_conversational_completions() -> None:
    score, format_failure = reward_functions("pointwise")
    completions = [
        [{"role": "assistant", "content": "<think>fine</think><score>3</score>"}],
        [{"role": "assistant", "content": "<think>close</think><score>4</score>"}],
        [{"role": "assistant", "content": "no verdict"}],
        "<score>0</score>",  # plain-text prompts give plain-text completions
    ]
    kwargs: dict[str, Any] = {
        "prompts": [[{"role": "user", "content": "q"}]] * 4,
        "reward_model": [
            {"style": "rule", "ground_truth": {"helpfulness": 3}},
            {"style": "rule", "ground_truth": {"helpfulness": 2}},
            {"style": "rule", "ground_truth": {"helpfulness": 0}},
            {"style": "rule", "ground_truth": 0},
        ],
        "data_source": ["d"] * 4,
        "extra_info": [{"index": i} for i in range(4)],
        "trainer_state": None,
    }
    assert score(completions=completions, **kwargs) == [1.0, 0.5, 0.0, 1.0]
    assert format_failure(completions=completions, **kwargs) == [0.0, 0.0, 1.0, 0.0]
    assert (score.__name__, format_failure.__name__) == ("pointwise", "format_failure")


def test_trl_log_keys_map_to_stable_names() -> None:
    step = map_trl_logs(
        {
            "loss": 0.5,
            "reward": 0.25,
            "frac_reward_zero_std": 0.75,
            "completions/mean_length": 12.0,
            "rewards/format_failure/mean": 0.1,
            "rewards/pointwise/mean": 0.25,
            "weird key(1)": 3,
            "note": "not a number",
            "flag": True,
        }
    )
    assert step == {
        "train/loss": 0.5,
        "train/reward_mean": 0.25,
        "train/zero_std_frac": 0.75,
        "train/completion_length": 12.0,
        "train/format_failure_rate": 0.1,
        "train/rewards/pointwise/mean": 0.25,
        "train/weird key_1_": 3.0,
    }
    assert map_trl_logs({"eval_reward": 0.5, "eval_loss": 0.1}) == {
        "val/reward_mean": 0.5,
        "val/loss": 0.1,
    }
    summary = map_trl_logs({"train_runtime": 1.5, "train_loss": 0.2, "epoch": 1.0})
    assert summary == {
        "train/summary/runtime": 1.5,
        "train/summary/loss": 0.2,
        "train/summary/epoch": 1.0,
    }


def test_batch_shape_is_validated() -> None:
    with pytest.raises(ValueError, match="multiple of micro_batch_size"):
        GrpoParams(
            model_path="m", output_dir="o", reward="pairwise", num_generations=3, micro_batch_size=2
        )
    params = GrpoParams(
        model_path="m", output_dir="o", reward="grrm", num_generations=8, prompts_per_step=3
    )
    assert params.gradient_accumulation_steps == 6  # 24 completions, 4 per micro batch


def test_a_partially_saved_checkpoint_is_skipped(tmp_path: Path) -> None:
    from judgeflow.engines.trl import last_complete_checkpoint

    for step, complete in ((2, True), (4, True), (6, False)):
        ckpt = tmp_path / f"checkpoint-{step}"
        ckpt.mkdir()
        if complete:
            (ckpt / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-8").mkdir()  # killed while writing the state file
    (tmp_path / "checkpoint-8" / "trainer_state.json").write_text('{"global_st')
    (tmp_path / "checkpoint-final").mkdir()
    assert last_complete_checkpoint(tmp_path) == tmp_path / "checkpoint-4"
    assert last_complete_checkpoint(tmp_path / "absent") is None


def test_rlvr_reward_adapter_pays_verifiers_and_penalises_truncation() -> None:
    """reward="rlvr": the verifiers pay, TRL's truncation test (no stop token at the end) gives
    the non-stop penalty, and two probes report format failures and verifiable correctness."""
    rules = {"r1_style_format": "off", "non_stop_penalty": True}
    score, format_failure, correct = reward_functions("rlvr", rlvr_rules=rules, stop_token_ids={0})
    completions = [
        [{"role": "assistant", "content": "so the answer is 4"}],  # right, stopped
        [{"role": "assistant", "content": "so the answer is 4"}],  # right, cut off
        [{"role": "assistant", "content": "<answer>paris</answer>"}],  # right, other verifier
        [{"role": "assistant", "content": "5"}],  # wrong, stopped
    ]
    kwargs: dict[str, Any] = {
        "reward_model": [{"ground_truth": ["4"]}, {"ground_truth": ["4"]},
                         {"ground_truth": ["Paris"]}, {"ground_truth": ["4"]}],
        "data_source": ["gsm8k", "gsm8k", "string_matcher", "gsm8k"],
        "extra_info": [{"dataset": ["gsm8k"]}, {"dataset": ["gsm8k"]},
                       {"dataset": ["string_matcher"]}, {"dataset": ["gsm8k"]}],
        "completion_ids": [[5, 6, 0], [5, 6, 7], [8, 0], [9, 0]],
    }  # fmt: skip
    assert score(completions, **kwargs) == [10.0, -10.0, 10.0, 0.0]
    assert correct(completions, **kwargs) == [1.0, 1.0, 1.0, 0.0]  # before the penalty
    assert format_failure(completions, **kwargs) == [0.0] * 4  # the format is off
    gated_score, gated_failure, _ = reward_functions("rlvr")
    assert gated_score(completions, **kwargs)[0] == 0.0  # gated (default): no </think>, no pay
    assert gated_failure(completions, **kwargs) == [1.0] * 4
    # One unpaid probe per verifier: its own rows only (None elsewhere, which TRL leaves out).
    *_, gsm8k, matcher = reward_functions(
        "rlvr", rlvr_rules=rules, stop_token_ids={0}, verifiers=["gsm8k", "string_matcher"]
    )
    assert (gsm8k.__name__, matcher.__name__) == ("gsm8k_correct", "string_matcher_correct")
    assert gsm8k(completions, **kwargs) == [1.0, 1.0, None, 0.0]
    assert matcher(completions, **kwargs) == [None, None, 1.0, None]
    logged = map_trl_logs({"rewards/gsm8k_correct/mean": 2 / 3,
                           "rewards/string_matcher_correct/mean": float("nan")})  # fmt: skip
    assert logged == {"train/verifiable_correct_rate/gsm8k": 2 / 3}  # NaN: none of its rows


def test_a_rollout_that_holds_a_stop_string_is_not_truncated() -> None:
    """`grpo.stop_strings`: a completion that holds one stopped there (finish reason `stop`, no
    non-stop penalty), though it ends in no end-of-sequence token."""
    rules = {"r1_style_format": "off", "non_stop_penalty": True}
    score, *_ = reward_functions("rlvr", rlvr_rules=rules, stop_token_ids={0},
                                 stop_strings=["</answer>"])  # fmt: skip
    completions = ["<answer>4</answer>", "<answer>4", "5</answer>"]
    kwargs: dict[str, Any] = {
        "reward_model": [{"ground_truth": ["4"]}] * 3, "data_source": ["gsm8k"] * 3,
        "extra_info": [{"dataset": ["gsm8k"]}] * 3, "completion_ids": [[5, 6], [5, 6], [7, 8]],
    }  # fmt: skip
    assert score(completions, **kwargs) == [10.0, -10.0, 0.0]


def test_a_stopped_rollout_ends_with_the_token_that_completed_the_string() -> None:
    """Whatever followed it (padding: the pad token, or the end-of-sequence token where the two
    are one) is taken off; a rollout without the string is kept whole."""
    from judgeflow.engines.trl.update import _through_first_stop

    pieces = {1: "The", 2: " answer", 3: "</ans", 4: "wer>", 9: ""}  # 9: pad = eos

    def decode(ids: list[int]) -> str:
        return "".join(pieces[i] for i in ids)

    assert _through_first_stop([1, 2, 3, 4, 9, 9], ["</answer>"], decode) == [1, 2, 3, 4]
    assert _through_first_stop([1, 2, 9], ["</answer>"], decode) == [1, 2, 9]
    assert _through_first_stop([1, 2, 3, 4, 1], ["x", "answer"], decode) == [1, 2]


def test_trl_generation_stops_at_the_stop_strings_and_trains_on_no_padding(
    tmp_path: Path, setup: tuple[Path, Path]
) -> None:
    """TRL's trainer as judgeflow builds it, with `grpo.stop_strings`: each rollout ends at the
    token that completes a stop string (or at the length limit), and what generate padded after
    a stopped rollout is not part of its completion."""
    from judgeflow.engines.trl.mapping import grpo_config
    from judgeflow.engines.trl.training import load_rl_parquet, policy_tokenizer
    from judgeflow.engines.trl.update import resumable_trainer_class

    model, train = setup
    stops = ["e", "a", "o"]
    params = _params(model, tmp_path / "run", max_steps=1)
    params = GrpoParams(**{**params.__dict__, "stop_strings": tuple(stops)})
    tokenizer = policy_tokenizer(str(model))
    trainer = resumable_trainer_class()(
        model=str(model), reward_funcs=reward_functions("pointwise"),
        args=grpo_config(params, has_eval=False), train_dataset=load_rl_parquet(train),
        processing_class=tokenizer,
    )  # fmt: skip
    assert trainer.generation_config.stop_strings == stops
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": f"Say {i}."}],
                                             add_generation_prompt=True, tokenize=False)
               for i in range(8)]  # fmt: skip
    _, completions, *_ = trainer._generate_single_turn(prompts, None)
    stopped = 0
    for ids in completions:
        text = tokenizer.decode(ids, skip_special_tokens=True)
        assert ids and ids[-1] != tokenizer.pad_token_id, ids  # no padding left on
        if len(ids) < params.max_completion_length and ids[-1] != tokenizer.eos_token_id:
            stopped += 1  # it stopped at a string: the last token completed the first one
            assert any(s in text for s in stops), text
            assert not any(s in tokenizer.decode(ids[:-1], skip_special_tokens=True) for s in stops)
    assert stopped >= len(completions) // 2, completions  # the untrained model rarely ends itself


def test_grpo_with_verifiable_rewards_on_rlvr_rows(tmp_path: Path, tiny_model: Path) -> None:
    """A policy trained on prepared RLVR rows (`judgeflow prepare rlvr`'s parquet) with the
    verifiers paying: the run completes and reports verifiable_correct_rate."""
    from judgeflow.data.rlvr import prepare_rlvr

    sample = (
        Path(__file__).resolve().parents[2] / "src/judgeflow/samples/rlvr/open_instruct_mixed.jsonl"
    )
    prepared = prepare_rlvr(sample, tmp_path / "rlvr.parquet")
    logged: list[dict[str, float]] = []
    params = GrpoParams(
        model_path=str(tiny_model), output_dir=str(tmp_path / "run"), reward="rlvr",
        learning_rate=1e-4, num_generations=4, prompts_per_step=2, micro_batch_size=4,
        max_prompt_length=256, max_completion_length=8, max_steps=2, save_steps=10,
        use_cpu=True, rlvr_rules={"r1_style_format": "off", "non_stop_penalty": True},
    )  # fmt: skip
    result = train_grpo(params, prepared.train_path, metrics_sink=lambda m, s: logged.append(m))
    assert result.global_step == 2
    steps = [m for m in logged if "train/loss" in m]
    assert len(steps) == 2
    for metrics in steps:
        assert 0.0 <= metrics["train/verifiable_correct_rate"] <= 1.0
        assert metrics["train/format_failure_rate"] == 0.0  # the format is off
        per_verifier = {k for k in metrics if k.startswith("train/verifiable_correct_rate/")}
        assert per_verifier  # the verifiers of this step's single-verifier rows
        assert per_verifier <= {f"train/verifiable_correct_rate/{v}" for v in (
            "gsm8k", "math", "strict_math", "string_matcher", "flan", "ifeval_old")}  # fmt: skip
        # 8 new tokens rarely end the untrained model's reply: truncated ones earn -10
        assert -10.0 <= metrics["train/reward_mean"] <= 10.0


def test_a_judge_paid_step_logs_the_judges_rates_over_its_rollouts_only(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step trains on a judge row and a gsm8k row (4 rollouts each); a scripted pairwise
    judge fails the first verdict of each call and flips the second: both rates are the share of
    the 4 judged rollouts (a mean over all 8 would halve them)."""
    import json

    from judgeflow.data.rlvr import prepare_rlvr
    from judgeflow.inference import judge_reward

    verdicts = [{"valid": False}, {"valid": True, "consistent": False, "better": "A"}]
    calls: list[int] = []

    class Scripted:
        mode = "pairwise"

        def verdicts(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            calls.append(len(rows))
            good = {"valid": True, "consistent": True, "better": "A"}
            return [verdicts[k] if k < 2 else good for k in range(len(rows))]

    monkeypatch.setattr(judge_reward, "client_for", lambda settings: Scripted())
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in [
        {"messages": [{"role": "user", "content": "What is the capital of France?"}],
         "ground_truth": "Paris is the capital of France.", "dataset": "judge"},
        {"messages": [{"role": "user", "content": "What is 3 + 4?"}], "ground_truth": "7",
         "dataset": "gsm8k"},
    ]))  # fmt: skip
    prepared = prepare_rlvr(rows, tmp_path / "rlvr.parquet", judge_datasets=["judge"])
    logged: list[dict[str, float]] = []
    rules = {"r1_style_format": "off", "judge_weights": "/unused", "judge_mode": "pairwise",
             "judge_datasets": ["judge"], "judge_max_new_tokens": 8,
             "judge_max_failure_rate": 0.5}  # fmt: skip
    params = GrpoParams(
        model_path=str(tiny_model), output_dir=str(tmp_path / "run"), reward="rlvr",
        learning_rate=1e-4, num_generations=4, prompts_per_step=2, micro_batch_size=4,
        max_prompt_length=128, max_completion_length=8, max_steps=2, save_steps=10,
        use_cpu=True, rlvr_rules=rules,
    )  # fmt: skip
    train_grpo(params, prepared.train_path, metrics_sink=lambda m, s: logged.append(m))
    steps = [m for m in logged if "train/loss" in m]
    assert len(steps) == 2 and len(calls) == 2  # one judge call per step
    for metrics, asked in zip(steps, calls, strict=True):
        assert asked >= 2  # an empty answer is not asked; the tiny model writes something
        assert metrics["train/judge_format_failure_rate"] == pytest.approx(1 / 4)
        assert metrics["train/judge_inconsistent_rate"] == pytest.approx(1 / 4)


def test_tracking_wandb_offline_writes_the_stages_w_and_b_run(
    tmp_path: Path, setup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With tracking.wandb, TRL reports to W&B too: in offline mode (no network) a real W&B run
    is written, named by the train job's variables (`<MLflow run id>-<stage>`)."""
    from dataclasses import replace

    from judgeflow.config import load_config

    cfg = load_config("grpo-pointwise", overrides=["tracking.wandb.project=judges",
                      "tracking.wandb.mode=offline", "tracking.wandb.tags=[nightly]"])  # fmt: skip
    from judgeflow.stages import job_spec

    job_env = job_spec(cfg, "train", "abc123", {}, dry_run=True).env  # what the train job gets
    assert job_env["WANDB_RUN_GROUP"] == "abc123" and job_env["WANDB_TAGS"] == "nightly"
    for name, value in job_env.items():
        if name.startswith("WANDB_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    model, train = setup
    params = replace(_params(model, tmp_path / "run", max_steps=1), report_to="wandb")
    assert params_from(cfg, "/out").report_to == "wandb"  # what a run with it gets
    train_grpo(params, train, resume=False)
    [run] = (tmp_path / "wandb").glob("offline-run-*-abc123-train")
    assert (run / "run-abc123-train.wandb").stat().st_size > 0  # the run's records, to sync


def test_lora_trains_an_adapter_resumes_and_registers_it_merged(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """grpo.lora on TRL: only the adapter trains (the trainable count says so), a resumed run
    goes on from the adapter's checkpoint, and `final` is the adapter merged into the start
    model: a plain model, answering exactly as the start model with the adapter on. A scripted
    pointwise judge pays 0-4 by position, so every group's rewards vary and the adapter moves."""
    import dataclasses
    import json

    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from judgeflow.data.rlvr import prepare_rlvr
    from judgeflow.inference import judge_reward

    class Scripted:
        mode = "pointwise"

        def verdicts(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [{"valid": True, "score": k % 5} for k in range(len(rows))]

    monkeypatch.setattr(judge_reward, "client_for", lambda settings: Scripted())
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in [
        {"messages": [{"role": "user", "content": f"Name an animal ({i})."}],
         "ground_truth": "A cat.", "dataset": "judge"} for i in range(4)
    ]))  # fmt: skip
    train = prepare_rlvr(rows, tmp_path / "rlvr.parquet", judge_datasets=["judge"]).train_path
    out = tmp_path / "run"
    rules = {"r1_style_format": "off", "judge_weights": "/unused", "judge_mode": "pointwise",
             "judge_datasets": ["judge"], "judge_max_new_tokens": 8}  # fmt: skip
    params = GrpoParams(
        model_path=str(tiny_model), output_dir=str(out), reward="rlvr", learning_rate=1e-2,
        num_generations=4, prompts_per_step=2, micro_batch_size=4, max_prompt_length=128,
        max_completion_length=8, max_steps=2, save_steps=1, use_cpu=True, rlvr_rules=rules,
        lora={"r": 4, "lora_alpha": 8, "target_modules": "all-linear"},
    )  # fmt: skip
    first = train_grpo(params, train)
    assert first.global_step == 2 and (out / "checkpoint-2" / "adapter_config.json").is_file()
    second = train_grpo(dataclasses.replace(params, max_steps=3), train)
    assert second.resumed_from == out / "checkpoint-2" and second.global_step == 3

    full = AutoModelForCausalLM.from_pretrained(tiny_model)
    total = sum(p.numel() for p in full.parameters())
    assert 0 < second.metrics["train/summary/trainable_params"] < total / 5
    assert second.metrics["train/summary/peak_rss_mib"] > 0

    merged = AutoModelForCausalLM.from_pretrained(second.final_model_dir)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    assert (second.final_model_dir / "tokenizer.json").is_file()
    adapted = PeftModel.from_pretrained(full, out / "adapter")
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        with adapted.disable_adapter():
            start = adapted(ids).logits
        on, got = adapted(ids).logits, merged(ids).logits
    assert not torch.allclose(on, start, atol=1e-6)  # the adapter learnt something
    torch.testing.assert_close(got, on, rtol=1e-4, atol=1e-5)
