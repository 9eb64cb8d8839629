"""The reward → advantage → gradient path of the TRL engine, on the tiny model.

One GRPO step with judgeflow's own GRPO configuration (`grpo_config`: loss, reward scaling,
KL, optimiser) and a reward we control: a completion that earns more than its group must
become more likely, the others less; a group whose rewards are all equal has zero advantages
and must not move the model at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.slow

PROMPT = [{"role": "user", "content": "What is the capital of France?"}]


def _trainer(
    tiny_model: Path, tmp_path: Path, reward: Any, *, beta: float, lr: float, micro: int = 8
) -> Any:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from judgeflow.engines.trl import GrpoParams
    from judgeflow.engines.trl.mapping import grpo_config

    params = GrpoParams(
        model_path=str(tiny_model),
        output_dir=str(tmp_path / "grpo"),
        reward="pointwise",
        learning_rate=lr,
        num_generations=4,
        prompts_per_step=2,
        micro_batch_size=micro,
        max_completion_length=8,
        max_steps=1,
        beta=beta,
        save_steps=1000,
        seed=0,
    )
    return GRPOTrainer(
        model=str(tiny_model),
        reward_funcs=[reward, _unpaid],  # judgeflow's weights: [1, 0] (the format probe)
        args=grpo_config(params, has_eval=False),
        train_dataset=Dataset.from_list([{"prompt": PROMPT}] * 2),
        processing_class=AutoTokenizer.from_pretrained(tiny_model),
    )


def _unpaid(completions: list[Any], **_: Any) -> list[float]:
    return [0.0] * len(completions)


def _constant(completions: list[Any], **_: Any) -> list[float]:
    return [0.5] * len(completions)


def _logprob(model: Any, prompt_ids: list[int], completion_ids: list[int]) -> float:
    """log p(completion | prompt), summed over the completion's tokens."""
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, :-1].log_softmax(-1)
    targets = ids[0, 1:]
    token_logps = logits.gather(-1, targets[:, None])[:, 0]
    return float(token_logps[len(prompt_ids) - 1 :].sum())


def test_a_group_whose_rewards_differ_moves_the_model_toward_the_rewarded_completion(
    tiny_model: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    seen: list[tuple[list[int], float]] = []

    def first_in_order(
        completions: list[Any], completion_ids: list[list[int]], **_: Any
    ) -> list[float]:
        """1.0 for the lexicographically smallest completion of each group of 4, else 0.0."""
        rewards = []
        for start in range(0, len(completion_ids), 4):
            group = [tuple(ids) for ids in completion_ids[start : start + 4]]
            rewards += [1.0 if ids == min(group) else 0.0 for ids in group]
        seen.extend(zip([list(ids) for ids in completion_ids], rewards, strict=True))
        return rewards

    trainer = _trainer(tiny_model, tmp_path, first_in_order, beta=0.0, lr=5e-3)
    before = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    prompt_ids = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True)
    trainer.train()
    after = trainer.model.eval()

    assert len(seen) == 8 and len({tuple(ids) for ids, _ in seen}) > 2, "completions must differ"
    assert trainer.state.log_history[0]["frac_reward_zero_std"] == 0.0  # non-zero advantages
    deltas: dict[bool, list[float]] = {True: [], False: []}
    for ids, reward in seen:
        change = _logprob(after, prompt_ids, ids) - _logprob(before, prompt_ids, ids)
        deltas[reward == 1.0].append(change)
    assert all(d > 0 for d in deltas[True]), deltas  # rewarded completions became more likely
    assert sum(deltas[False]) / len(deltas[False]) < 0, deltas  # the rest, on average, less


@pytest.mark.parametrize("beta", [0.0, 0.1])
def test_equal_rewards_in_every_group_give_zero_advantages_and_no_update(
    tiny_model: Path, tmp_path: Path, beta: float
) -> None:
    """With the KL term on, the policy still equals the reference, so nothing moves either."""
    trainer = _trainer(tiny_model, tmp_path, _constant, beta=beta, lr=5e-3)
    initial = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()

    log = trainer.state.log_history[0]
    assert log["frac_reward_zero_std"] == 1.0 and log["reward_std"] == 0.0
    assert log["loss"] == 0.0
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(p, initial[n])]
    assert changed == []


def _judgeflow_trainer(
    tiny_model: Path, tmp_path: Path, reward: Any, *, filter_zero_std: bool
) -> tuple[Any, list[int]]:
    """judgeflow's own trainer class (what `train_grpo` runs), counting its loss passes."""
    from judgeflow.engines.trl.update import resumable_trainer_class

    base = _trainer(tiny_model, tmp_path, reward, beta=0.1, lr=5e-3, micro=4)
    passes: list[int] = []

    class Counting(resumable_trainer_class()):  # type: ignore[misc]
        def _compute_loss(self, model: Any, inputs: Any) -> Any:
            passes.append(int(inputs["advantages"].shape[0]))
            return super()._compute_loss(model, inputs)

    trainer = Counting(
        model=base.model,
        reward_funcs=[reward, _unpaid],
        args=base.args,
        train_dataset=base.train_dataset,
        processing_class=base.processing_class,
    )
    trainer.filter_zero_std_samples = filter_zero_std
    return trainer, passes


def _first_group_varies(completion_ids: list[list[int]], **_: Any) -> list[float]:
    """Group 1 (the first 4): 1.0 for its smallest completion, else 0; group 2: all 0.5."""
    group = [tuple(ids) for ids in completion_ids[:4]]
    return [1.0 if ids == min(group) else 0.0 for ids in group] + [0.5] * 4


def test_zero_variance_groups_get_no_forward_or_backward_pass(
    tiny_model: Path, tmp_path: Path
) -> None:
    """open-instruct's --filter_zero_std_samples on TRL: of two micro-batches of 4, the one
    the constant group would have filled is skipped whole; the varied group still trains."""
    trainer, passes = _judgeflow_trainer(
        tiny_model, tmp_path, lambda completions, completion_ids, **kw: _first_group_varies(
            completion_ids), filter_zero_std=True)  # fmt: skip
    initial = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()

    log = trainer.state.log_history[0]
    assert log["frac_reward_zero_std"] == 0.5
    assert log["real_batch_size_ratio"] == 0.5 and log["skipped_micro_batch_frac"] == 0.5
    assert passes == [4]  # one micro-batch: the varied group's 4 completions, nothing else
    assert any(not torch.equal(p, initial[n]) for n, p in trainer.model.named_parameters())


def test_without_filtering_every_micro_batch_gets_its_pass(
    tiny_model: Path, tmp_path: Path
) -> None:
    trainer, passes = _judgeflow_trainer(
        tiny_model, tmp_path, lambda completions, completion_ids, **kw: _first_group_varies(
            completion_ids), filter_zero_std=False)  # fmt: skip
    trainer.train()
    log = trainer.state.log_history[0]
    assert log["real_batch_size_ratio"] == 0.5 and log["skipped_micro_batch_frac"] == 0.0
    assert passes == [4, 4]  # TRL's own split: both micro-batches, groups mixed


def test_a_step_of_only_zero_variance_groups_trains_nothing(
    tiny_model: Path, tmp_path: Path
) -> None:
    trainer, passes = _judgeflow_trainer(tiny_model, tmp_path, _constant, filter_zero_std=True)
    initial = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    assert passes == []
    assert trainer.state.log_history[0]["real_batch_size_ratio"] == 0.0
    assert trainer.state.global_step == 1
    assert all(torch.equal(p, initial[n]) for n, p in trainer.model.named_parameters())
