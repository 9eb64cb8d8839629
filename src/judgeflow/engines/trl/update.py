"""The GRPO update: TRL's `GRPOTrainer` with a resumable training order, zero-variance filtering
and stop strings.

Three changes to TRL 0.24's trainer, each where TRL leaves a hook: the sampler reseeds every epoch
(a resume replays the order), the micro-batches come from `engines.zero_variance` (groups
without reward variance can be skipped, open-instruct's --filter_zero_std_samples), and
generation can stop at strings (open-instruct's --stop_strings).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

from judgeflow.engines.zero_variance import micro_batches

__all__ = ["resumable_trainer_class"]


@functools.cache
def resumable_trainer_class() -> type[Any]:
    """`GRPOTrainer` whose training order is a function of (seed, epoch), so a resume replays it.

    TRL 0.24's `RepeatSampler` seeds its generator once, when the trainer is built, and draws
    one permutation per epoch from it: epoch 2's order is the generator's second draw. A resumed
    job builds a new trainer, and the Trainer no longer replays earlier epochs to advance the
    generator, so after a resume at or after an epoch boundary epoch 2 got epoch 1's order again
    (a mid-epoch resume trained the rest of epoch 1's order: rows repeated, others skipped).
    Here each epoch reseeds from (seed, epoch) before it draws. The epoch comes from the trainer
    state, not from `set_epoch`: accelerate's `skip_first_batches` (mid-epoch resume) wraps the
    loader in a new one that calls `set_epoch(0)` on the sampler.
    """
    from torch.utils.data import Sampler
    from trl import GRPOTrainer

    class EpochSeededSampler(Sampler[int]):
        def __init__(self, inner: Any, epoch: Callable[[], int]) -> None:
            self.inner, self.epoch = inner, epoch

        def __len__(self) -> int:
            return len(self.inner)

        def __iter__(self) -> Any:
            if self.inner.shuffle:
                self.inner.generator.manual_seed(_epoch_seed(self.inner.seed or 0, self.epoch()))
            return iter(self.inner)

    class ResumableGRPOTrainer(GRPOTrainer):
        filter_zero_std_samples = False

        def _get_train_sampler(self, dataset: Any = None) -> Any:
            inner = super()._get_train_sampler(dataset)
            # floor(state.epoch) is the epoch being trained: 1.0 at the end of epoch 1, and a
            # resumed state (1.0, 1.33) is loaded before the first batch is drawn.
            return EpochSeededSampler(inner, lambda: int(self.state.epoch or 0))

        def _prepare_inputs(self: Any, generation_batch: Any) -> Any:
            """TRL's own, but the micro-batches come from `zero_variance.micro_batches`."""
            if not self.model.training:
                return super()._prepare_inputs(generation_batch)
            if self.accelerator.num_processes > 1:
                # Groups may span processes there, the DAPO token count is global, and a rank
                # that skips a micro-batch would leave the others waiting in its collectives.
                if self.filter_zero_std_samples:
                    raise RuntimeError(
                        "grpo.filter_zero_std_samples is for one process (CPU or one GPU)"
                    )
                return super()._prepare_inputs(generation_batch)
            steps = self.args.steps_per_generation
            if self._step % (steps * self.num_iterations) == 0 or self._buffered_inputs is None:
                split = micro_batches(
                    self._generate_and_score_completions(generation_batch),
                    self.num_generations,
                    steps,
                    drop_zero_variance=self.filter_zero_std_samples,
                )
                self._buffered_inputs = split.batches
                self._metrics["train"]["real_batch_size_ratio"].append(split.real_batch_size_ratio)
                self._metrics["train"]["skipped_micro_batch_frac"].append(split.skipped / steps)
            inputs = self._buffered_inputs[self._step % steps]
            self._step += 1
            return inputs

        def _generate_single_turn(self: Any, prompts: Any, images: Any) -> Any:
            """TRL's own, but with `generation_kwargs.stop_strings` it works: transformers'
            `generate` needs the tokenizer to find them, which TRL does not pass; and a rollout
            that stopped at one ends with the token that completed it (what generate wrote after
            it, padding, is neither trained on nor counted, whatever the pad token is)."""
            stops = getattr(self.generation_config, "stop_strings", None)
            if not stops:
                return super()._generate_single_turn(prompts, images)
            model = self.accelerator.unwrap_model(self.model_wrapped)
            model.generate = functools.partial(type(model).generate, model,
                                               tokenizer=self.processing_class)  # fmt: skip
            try:
                prompt_ids, completion_ids, *rest = super()._generate_single_turn(prompts, images)
            finally:
                del model.generate
            decode = functools.partial(self.processing_class.decode, skip_special_tokens=True)
            completion_ids = [_through_first_stop(ids, stops, decode) for ids in completion_ids]
            return (prompt_ids, completion_ids, *rest)

        def compute_loss(self: Any, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            if inputs["advantages"].shape[0] == 0:  # all it had was filtered out: no forward
                import torch

                # A leaf the backward pass can run on; it reaches no parameter.
                return torch.zeros((), device=self.args.device, requires_grad=True)
            return super().compute_loss(model, inputs, *args, **kwargs)

    return ResumableGRPOTrainer


def _through_first_stop(
    ids: list[int], stops: list[str], decode: Callable[[list[int]], str]
) -> list[int]:
    """`ids` up to the token that completes the first stop string (all of them when none
    appears): the shortest prefix whose text holds one, found by bisection (holding one is
    kept as the prefix grows)."""
    if not any(stop in decode(ids) for stop in stops):
        return ids
    low, high = 1, len(ids)  # the shortest holding prefix has a length in [low, high]
    while low < high:
        mid = (low + high) // 2
        if any(stop in decode(ids[:mid]) for stop in stops):
            high = mid
        else:
            low = mid + 1
    return ids[:low]


def _epoch_seed(seed: int, epoch: int) -> int:
    digest = hashlib.sha256(f"judgeflow-train-order:{seed}:{epoch}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1
