"""GRPO with TRL's `GRPOTrainer`: the local (CPU / one GPU) engine for the judge recipes.

It reads the same verl RL parquet and scores with the same verl `compute_score` functions as the
cluster engine, so a run here differs from a verl run only in scale. Metrics leave through an
injected sink (the caller decides where they go: MLflow, a list in a test), never through TRL's
own integrations.

Every optimizer step appends the prepared rows it trained on to `data_order.jsonl` in the output
directory (`read_data_order`): an audit trail of what the model saw, in order, across resumes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from transformers import TrainerCallback

from judgeflow.engines.zero_variance import micro_batches
from judgeflow.modes import Mode

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from judgeflow.config import RunConfig

__all__ = [
    "DATA_ORDER_FILE",
    "GrpoParams",
    "MetricsSink",
    "Progress",
    "TrainResult",
    "load_rl_parquet",
    "map_trl_logs",
    "read_data_order",
    "reward_functions",
    "step_line",
    "train_grpo",
]

MetricsSink = Callable[[dict[str, float], int], None]
Progress = Callable[[int, int], None]
LineSink = Callable[[str], None]

#: Columns the reward adapter reads; TRL hands every non-prompt column to reward functions.
_REWARD_COLUMNS = ("data_source", "reward_model", "extra_info")
_FORMAT_FAILURE = "format_failure"
_VERIFIABLE_CORRECT = "verifiable_correct"
_CORRECT_SUFFIX = "_correct"  # a per-verifier probe: `<verifier>_correct`
_PER_VERIFIER = re.compile(rf"rewards/(.+){_CORRECT_SUFFIX}/mean")
#: TRL 0.24 log keys -> the stable names judgeflow reports (same names for every engine).
_RENAMES = {
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "zero_std_frac",
    "kl": "kl",
    "loss": "loss",
    "completions/mean_length": "completion_length",
    f"rewards/{_FORMAT_FAILURE}/mean": "format_failure_rate",
    f"rewards/{_VERIFIABLE_CORRECT}/mean": "verifiable_correct_rate",
    "learning_rate": "learning_rate",
    "rewards/judge_reward/mean": "judge_reward",
    "rewards/reference_f1/mean": "reference_f1",
    "rewards/judge_format_failure/mean": "judge_format_failure_rate",
}
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_\-. /]")  # what MLflow accepts in a metric name
#: The audit trail of training data order, one JSON line per optimizer step (`read_data_order`).
DATA_ORDER_FILE = "data_order.jsonl"


@dataclass(frozen=True)
class GrpoParams:
    """Engine-neutral GRPO knobs; the run configuration maps onto these.

    Batch shape: each optimizer step generates `prompts_per_step * num_generations` completions
    and back-propagates them `micro_batch_size` at a time (gradient accumulation makes up the rest).
    """

    model_path: str
    output_dir: str
    reward: Mode  # rlvr: a policy paid by verifiers (`judgeflow.rewards.rlvr`)
    learning_rate: float = 1e-6
    num_generations: int = 4
    prompts_per_step: int = 1
    micro_batch_size: int = 4
    max_prompt_length: int = 4096
    max_completion_length: int = 2048
    max_steps: int = -1  # -1: run num_train_epochs
    num_train_epochs: float = 1.0
    beta: float = 0.001  # KL coefficient; 0 switches the reference model off
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo"] = "dapo"
    scale_rewards: Literal["group", "batch", "none"] = "group"  # "none": GRPO without std
    lr_scheduler_type: str = "constant"
    lr_scheduler_kwargs: Mapping[str, Any] = field(default_factory=dict)
    warmup_ratio: float = 0.0
    epsilon: float = 0.2  # clip range below 1
    epsilon_high: float | None = None  # clip range above 1; None: epsilon
    importance_sampling_level: Literal["token", "sequence"] = "token"  # "sequence": GSPO
    shuffle_dataset: bool = True
    max_grad_norm: float = 1.0
    save_steps: int = 20
    save_total_limit: int | None = None
    logging_steps: int = 1
    eval_steps: int | None = None  # None: evaluate every save_steps when an eval file is given
    seed: int = 0
    use_cpu: bool | None = None  # None: CPU exactly when CUDA is unavailable
    bf16: bool | None = None  # None: bf16 on a GPU that supports it, fp32 otherwise
    gradient_checkpointing: bool = False
    cpu_threads: int | None = None  # None: at most the CPUs this process may use
    #: open-instruct's --filter_zero_std_samples: completions of groups without reward variance
    #: are not trained on (their micro-batches skipped; `engines.zero_variance`).
    filter_zero_std_samples: bool = False
    #: reward="rlvr": the reward's settings (`judgeflow.rewards.rlvr.score.compute_score`'s
    #: keywords: RewardRules fields and the sandbox's bounds).
    rlvr_rules: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        completions = self.prompts_per_step * self.num_generations
        if self.num_generations < 2:
            raise ValueError(f"num_generations must be at least 2 (got {self.num_generations})")
        if self.prompts_per_step < 1 or self.micro_batch_size < 1:
            raise ValueError("prompts_per_step and micro_batch_size must be positive")
        if self.filter_zero_std_samples and self.loss_type != "dapo":
            # The other losses average within each micro-batch: a micro-batch the filtering
            # left part-full would weigh each of its completions more.
            raise ValueError(
                "filter_zero_std_samples needs the token-mean loss (loss_type 'dapo'), "
                f"not {self.loss_type!r}"
            )
        if completions % self.micro_batch_size:
            raise ValueError(
                f"prompts_per_step * num_generations ({completions}) must be a multiple of "
                f"micro_batch_size ({self.micro_batch_size})"
            )

    @property
    def gradient_accumulation_steps(self) -> int:
        return self.prompts_per_step * self.num_generations // self.micro_batch_size


@dataclass(frozen=True)
class TrainResult:
    """Where the trained model is and how the run ended."""

    final_model_dir: Path  # model + tokenizer, save_pretrained layout
    last_checkpoint: Path | None
    global_step: int
    resumed_from: Path | None
    metrics: dict[str, float] = field(default_factory=dict)  # last step's metrics + run summary


def train_grpo(
    params: GrpoParams,
    train_file: str | Path,
    *,
    eval_file: str | Path | None = None,
    metrics_sink: MetricsSink | None = None,
    progress: Progress | None = None,
    resume: bool = True,
    on_line: LineSink | None = None,
) -> TrainResult:
    """Train with GRPO on a verl RL parquet; resume from the newest checkpoint when there is one.

    Each logging step sends one readable line (`step_line`) to `on_line` instead of the
    Trainer's raw dict dump and progress bar.
    """
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    _limit_cpu_threads(params)
    output_dir = Path(params.output_dir)
    resumed_from = last_complete_checkpoint(output_dir) if resume else None

    recorder = _MetricsCallback(metrics_sink, progress, on_line or _print_line)
    data_order = _DataOrderRecorder(
        output_dir / DATA_ORDER_FILE, params.num_generations, _checkpoint_step(resumed_from)
    )
    tokenizer = _tokenizer(params.model_path)
    reward_funcs: list[Any] = [
        *reward_functions(
            params.reward,
            observe=data_order.observe,
            rlvr_rules=params.rlvr_rules,
            stop_token_ids={tokenizer.eos_token_id, tokenizer.pad_token_id} - {None},
            verifiers=rlvr_verifiers(train_file) if params.reward == "rlvr" else (),
        )
    ]
    trainer = _resumable_trainer_class()(
        model=params.model_path,
        reward_funcs=reward_funcs,
        args=_grpo_config(params, has_eval=eval_file is not None, rewards=len(reward_funcs)),
        train_dataset=load_rl_parquet(train_file),
        eval_dataset=load_rl_parquet(eval_file) if eval_file is not None else None,
        processing_class=tokenizer,
        callbacks=[recorder, data_order],
    )
    trainer.filter_zero_std_samples = params.filter_zero_std_samples
    for noisy in (ProgressCallback, PrinterCallback):  # they print every log dict verbatim
        trainer.remove_callback(noisy)
    trainer.train(resume_from_checkpoint=str(resumed_from) if resumed_from else None)

    final_dir = output_dir / "final"
    trainer.save_model(str(final_dir))  # writes the tokenizer too (it is the processing class)
    return TrainResult(
        final_model_dir=final_dir,
        last_checkpoint=last_complete_checkpoint(output_dir),
        global_step=trainer.state.global_step,
        resumed_from=resumed_from,
        metrics=dict(recorder.latest),
    )


def last_complete_checkpoint(output_dir: Path) -> Path | None:
    """The newest `checkpoint-N` that was saved completely.

    A job killed while saving leaves a partial directory; the Trainer writes trainer_state.json
    last, so a checkpoint without it is skipped and the previous one is used. The Trainer does
    not write that file atomically either: one cut short (empty, or not a JSON object) would
    fail every resume, so it counts as missing.
    """
    if not output_dir.is_dir():
        return None
    steps = [
        (int(p.name.removeprefix("checkpoint-")), p)
        for p in output_dir.glob("checkpoint-*")
        if p.name.removeprefix("checkpoint-").isdigit()
    ]
    for _, path in sorted(steps, reverse=True):
        if _state_readable(path / "trainer_state.json"):
            return path
    return None


def _state_readable(path: Path) -> bool:
    try:
        return isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        return False


def read_data_order(output_dir: str | Path) -> dict[int, dict[str, Any]]:
    """Step -> what that optimizer step trained on, from `data_order.jsonl` (`DATA_ORDER_FILE`).

    Each record has `rows` (the prepared rows' `extra_info.index`), `prompt_hashes`
    (`extra_info.prompt_hash`, what decontamination compares), `epoch` and `attempt_from` (the
    checkpoint step the writing attempt resumed from; 0 for a fresh start). A step trained again
    after resuming from an older checkpoint keeps its last record: the earlier one belongs to
    an attempt whose weights were thrown away. A line cut short by a kill is skipped.
    """
    path = Path(output_dir) / DATA_ORDER_FILE
    order: dict[int, dict[str, Any]] = {}
    if not path.is_file():
        return order
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        order[int(record["step"])] = record
    return dict(sorted(order.items()))


def load_rl_parquet(path: str | Path) -> Dataset:
    """The verl parquet as a `datasets.Dataset` with the prompt and the reward inputs only."""
    import pyarrow.parquet as pq
    from datasets import Dataset

    table = pq.read_table(str(path))
    if "prompt" not in table.column_names:
        raise ValueError(f"{path}: no 'prompt' column (columns: {table.column_names})")
    if "reward_model" not in table.column_names:
        raise ValueError(f"{path}: no 'reward_model' column (columns: {table.column_names})")
    keep = ["prompt", *(c for c in _REWARD_COLUMNS if c in table.column_names)]
    return Dataset(table.select(keep))  # in memory: no datasets cache directory to manage


def reward_functions(
    reward: str,
    *,
    observe: Callable[[Mapping[str, Any]], None] | None = None,
    rlvr_rules: Mapping[str, Any] | None = None,
    stop_token_ids: Collection[int] = (),
    verifiers: Sequence[str] = (),
) -> list[Callable[..., Sequence[float | None]]]:
    """TRL reward functions over `judgeflow.rewards.<reward>.compute_score`.

    The first pays the verl `score`; the second reports `1 - valid_answer` and is given weight
    0, so TRL logs the format-failure rate (`rewards/format_failure/mean`) without paying it.
    `reward="rlvr"` adds a third, also unpaid: the share of completions with a verifiable
    reward (`verifiable_correct_rate`); its settings are `rlvr_rules`, and a completion that does
    not end in one of `stop_token_ids` (TRL's own test for truncation) has finish reason
    `length`, for the non-stop penalty. Then one unpaid probe per name in `verifiers`: whether
    a completion of a row checked by that verifier alone was paid, None for other rows (TRL
    averages without them: `verifiable_correct_rate/<verifier>`). `observe` sees the reward
    inputs of every scored batch (the rows being trained on), once.
    """
    from judgeflow.inference.judge_reward import is_judge_paid
    from judgeflow.rewards import reward_function

    compute_score = reward_function(reward)
    rules, stops = (
        (dict(rlvr_rules or {}), set(stop_token_ids)) if reward == "rlvr" else ({}, set())
    )
    judge_paid = reward == "rlvr" and is_judge_paid(rules)
    last: list[Any] = [None, None]  # the batch the functions were last called on, its results

    def results(completions: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        if last[0] is completions:  # TRL calls every function on one batch: score it once
            return cast("list[Mapping[str, Any]]", last[1])
        n = len(completions)
        sources = kwargs.get("data_source") or [""] * n
        extras = kwargs.get("extra_info") or [None] * n
        ids = kwargs.get("completion_ids") or [None] * n
        finishes = []
        for token_ids in ids:
            stopped = not stops or (bool(token_ids) and token_ids[-1] in stops)
            finishes.append("stop" if stopped else "length")
        truths = [(rm or {}).get("ground_truth") for rm in kwargs["reward_model"]]
        texts = [_completion_text(c) for c in completions]
        scored: list[Mapping[str, Any]]
        if judge_paid:  # the whole step's rollouts to the judge at once
            from judgeflow.inference.judge_reward import compute_score as judged_score

            extras = [
                {**(e or {}), "finish_reason": f} for e, f in zip(extras, finishes, strict=True)
            ]
            scored = list(judged_score(sources, texts, truths, extras, **rules))
        else:
            scored = []
            for text, truth, source, extra, finish in zip(
                texts, truths, sources, extras, finishes, strict=True
            ):
                settings = dict(rules)
                if reward == "rlvr" and stops:
                    settings["finish_reason"] = finish
                scored.append(compute_score(source, text, truth, extra, **settings))
        last[:] = [completions, scored]
        return scored

    def score(completions: Sequence[Any], **kwargs: Any) -> list[float]:
        if observe is not None:
            observe(kwargs)
        return [float(r["score"]) for r in results(completions, kwargs)]

    def format_failure(completions: Sequence[Any], **kwargs: Any) -> list[float]:
        return [1.0 - float(r["valid_answer"]) for r in results(completions, kwargs)]

    def verifiable_correct(completions: Sequence[Any], **kwargs: Any) -> list[float]:
        return [float(r["verifiable_reward"] > 0) for r in results(completions, kwargs)]

    def judge_part(key: str, name: str) -> Callable[..., list[float | None]]:
        def probe(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
            return [
                float(r[key]) if r.get("judged") else None for r in results(completions, kwargs)
            ]

        probe.__name__ = name
        return probe

    def correct_for(verifier: str) -> Callable[..., list[float | None]]:
        def probe(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
            extras = kwargs.get("extra_info") or [None] * len(completions)
            return [
                float(r["verifiable_reward"] > 0) if _row_verifiers(extra) == [verifier] else None
                for r, extra in zip(results(completions, kwargs), extras, strict=True)
            ]

        probe.__name__ = f"{verifier}{_CORRECT_SUFFIX}"
        return probe

    score.__name__ = reward  # TRL names the per-function metrics after __name__
    format_failure.__name__ = _FORMAT_FAILURE
    verifiable_correct.__name__ = _VERIFIABLE_CORRECT
    if reward != "rlvr":
        return [score, format_failure]
    judge_probes = (
        [judge_part(key, name) for key, name in _JUDGE_PROBES.items()] if judge_paid else []
    )
    probes = [correct_for(v) for v in verifiers if not judge_paid or v not in _judge_names(rules)]
    return [score, format_failure, verifiable_correct, *probes, *judge_probes]


#: Judge-paid runs: unpaid probes over the rows the judge scored (None elsewhere), logged as
#: `train/judge_reward`, `train/judge_format_failure_rate` and `train/reference_f1`.
_JUDGE_PROBES = {
    "judge_reward": "judge_reward",
    "reference_f1": "reference_f1",
    "judge_format_failure": "judge_format_failure",
}


def _judge_names(rules: Mapping[str, Any]) -> set[str]:
    return {str(d).lower() for d in rules.get("judge_datasets") or ()}


def _row_verifiers(extra: Any) -> list[str]:
    return (
        [str(d) for d in (extra or {}).get("dataset") or []] if isinstance(extra, Mapping) else []
    )


def rlvr_verifiers(train_file: str | Path) -> list[str]:
    """The verifiers that check a row of an RLVR parquet on their own (its per-verifier rates)."""
    import pyarrow.parquet as pq

    extras = pq.read_table(str(train_file), columns=["extra_info"]).column("extra_info")
    return sorted({v[0] for e in extras.to_pylist() if len(v := _row_verifiers(e)) == 1})


def _per_verifier(key: str) -> str:
    """`rewards/<verifier>_correct/mean` -> `verifiable_correct_rate/<verifier>`."""
    found = _PER_VERIFIER.fullmatch(key)
    return f"{_RENAMES[f'rewards/{_VERIFIABLE_CORRECT}/mean']}/{found[1]}" if found else key


def map_trl_logs(logs: Mapping[str, Any]) -> dict[str, float]:
    """TRL/Trainer log keys -> judgeflow metric names (`train/…`, `val/…`, `train/summary/…`).

    The end-of-training summary (`train_runtime`, `train_loss`, …) goes under `train/summary/`
    so it cannot overwrite the last step's `train/loss`.
    """
    summary = "train_runtime" in logs
    out: dict[str, float] = {}
    for key, value in logs.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isnan(value):  # a per-verifier probe with none of its rows in the step
            continue
        if summary:
            name = f"train/summary/{key.removeprefix('train_')}"
        elif key.startswith("eval_"):
            base = key.removeprefix("eval_")
            name = f"val/{_RENAMES.get(base, base)}"
        else:
            name = f"train/{_RENAMES.get(key, _per_verifier(key))}"
        out[_UNSAFE_NAME_CHARS.sub("_", name)] = float(value)
    return out


#: What a step line shows, in order: (metric, label, format).
_LINE_FIELDS = (
    ("reward_mean", "reward", "{:.3f}"),
    ("reward_std", "±", "{:.3f}"),
    ("format_failure_rate", "format_fail", "{:.2f}"),
    ("zero_std_frac", "zero_std", "{:.2f}"),
    ("kl", "kl", "{:.4f}"),
    ("loss", "loss", "{:.4f}"),
    ("completion_length", "len", "{:.1f}"),
)


def step_line(step: int, total: int, metrics: Mapping[str, float]) -> str:
    """One readable line for a logging step: `grpo step 12/40 | reward 0.625 ± 0.310 | …`."""
    parts = [f"grpo step {step}/{total}" if total > 0 else f"grpo step {step}"]
    for prefix, what in (("train/", ""), ("val/", "val ")):
        shown = [
            f"{what}{label} {fmt.format(metrics[prefix + key])}"
            for key, label, fmt in _LINE_FIELDS
            if prefix + key in metrics
        ]
        parts += shown
    if len(parts) == 1:
        return ""
    return " | ".join(parts).replace(" | ± ", " ± ")


class _MetricsCallback(TrainerCallback):
    """Streams renamed metrics to the sink on every log, reports step progress, and writes one
    readable line per logging step."""

    def __init__(
        self, sink: MetricsSink | None, progress: Progress | None, on_line: LineSink | None = None
    ) -> None:
        self.sink = sink
        self.progress = progress
        self.on_line = on_line
        self.latest: dict[str, float] = {}

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not state.is_world_process_zero or not logs:
            return
        metrics = map_trl_logs(logs)
        self.latest.update(metrics)
        if self.sink is not None and metrics:
            self.sink(metrics, state.global_step)
        line = step_line(state.global_step, state.max_steps, metrics)
        if self.on_line is not None and line:
            self.on_line(line)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.progress is not None and state.is_world_process_zero:
            self.progress(state.global_step, state.max_steps)


class _DataOrderRecorder(TrainerCallback):
    """Appends one line per optimizer step to `data_order.jsonl`: which prepared rows it trained on.

    The reward adapter hands over the rows of each scored generation batch (`observe`); only
    those between `on_step_begin` and `on_step_end` are training rows (evaluation scores rows
    after `on_step_end`). A generation batch is each prompt `num_generations` times in a row, so
    every `num_generations`-th entry is one prompt. Each line is written, flushed and synced
    when its step ends, so a job killed later keeps it. One process (CPU / one GPU) sees all
    rows; with several, this records the first process's share.
    """

    def __init__(self, path: Path, num_generations: int, attempt_from: int) -> None:
        self.path = path
        self.num_generations = num_generations
        self.attempt_from = attempt_from
        self._in_step = False
        self._extras: list[Any] = []

    def observe(self, reward_kwargs: Mapping[str, Any]) -> None:
        if self._in_step:
            extras = reward_kwargs.get("extra_info") or []
            self._extras.extend(extras[:: self.num_generations])

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._in_step, self._extras = True, []

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._in_step = False
        if not state.is_world_process_zero:
            return
        extras = [e if isinstance(e, Mapping) else {} for e in self._extras]
        record = {
            "step": state.global_step,
            "epoch": round(float(state.epoch or 0.0), 6),
            "rows": [e.get("index") for e in extras],
            "prompt_hashes": [e.get("prompt_hash") for e in extras],
            "attempt_from": self.attempt_from,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:  # one write per line: O_APPEND
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


@functools.cache
def _resumable_trainer_class() -> type[Any]:
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

        def compute_loss(self: Any, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            if inputs["advantages"].shape[0] == 0:  # all it had was filtered out: no forward
                import torch

                # A leaf the backward pass can run on; it reaches no parameter.
                return torch.zeros((), device=self.args.device, requires_grad=True)
            return super().compute_loss(model, inputs, *args, **kwargs)

    return ResumableGRPOTrainer


def _epoch_seed(seed: int, epoch: int) -> int:
    digest = hashlib.sha256(f"judgeflow-train-order:{seed}:{epoch}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def _checkpoint_step(checkpoint: Path | None) -> int:
    return int(checkpoint.name.removeprefix("checkpoint-")) if checkpoint else 0


#: verl's loss aggregation -> TRL's loss type (TRL has no seq-mean-token-sum).
LOSS_TYPES: dict[str, Literal["grpo", "dapo", "dr_grpo", "bnpo"]] = {
    "token-mean": "dapo",  # token mean over the whole batch
    "seq-mean-token-mean": "grpo",
    "seq-mean-token-sum-norm": "dr_grpo",
}
#: verl's policy loss -> TRL's importance-sampling level; the others are verl-only.
LOSS_MODES: dict[str, Literal["token", "sequence"]] = {"vanilla": "token", "gspo": "sequence"}


def params_from(cfg: RunConfig, output_dir: str | Path) -> GrpoParams:
    """The run config as TRL's GRPO knobs; a `grpo` key TRL cannot honour is a config error."""
    from judgeflow.config import ConfigError

    g = cfg.grpo
    if g.loss_agg_mode not in LOSS_TYPES:
        raise ConfigError(
            f"grpo.loss_agg_mode={g.loss_agg_mode} has no TRL equivalent; use one of "
            f"{', '.join(LOSS_TYPES)} or engine=verl"
        )
    if g.filter_zero_std_samples and g.loss_agg_mode != "token-mean":
        raise ConfigError(
            "grpo.filter_zero_std_samples=true needs grpo.loss_agg_mode=token-mean on TRL (the "
            "other losses average within a micro-batch, and a part-full one would weigh more)"
        )
    if g.loss_mode not in LOSS_MODES:
        raise ConfigError(
            f"grpo.loss_mode={g.loss_mode} is verl-only; TRL has {', '.join(LOSS_MODES)}"
        )
    scheduler: str = g.lr_scheduler_type
    kwargs: dict[str, float] = {}
    if scheduler == "cosine" and g.min_lr_ratio > 0:
        scheduler, kwargs = "cosine_with_min_lr", {"min_lr_rate": g.min_lr_ratio}
    return GrpoParams(
        model_path=cfg.model.path,
        output_dir=str(output_dir),
        reward=cfg.mode,
        learning_rate=g.learning_rate,
        lr_scheduler_type=scheduler,
        lr_scheduler_kwargs=kwargs,
        warmup_ratio=g.lr_warmup_steps_ratio,
        num_generations=g.rollout_n,
        prompts_per_step=g.train_batch_size,
        micro_batch_size=g.rollout_n,  # one prompt's group per forward/backward pass
        max_prompt_length=cfg.data.max_prompt_length,
        max_completion_length=cfg.data.max_response_length,
        max_steps=g.max_steps or -1,
        num_train_epochs=g.total_epochs,
        beta=g.kl_loss_coef if g.use_kl_loss else 0.0,
        temperature=g.temperature,
        top_p=g.top_p,
        top_k=g.top_k if g.top_k > 0 else None,
        loss_type=LOSS_TYPES[g.loss_agg_mode],
        scale_rewards="group" if g.norm_adv_by_std_in_grpo else "none",
        epsilon=g.clip_ratio_low,
        epsilon_high=g.clip_ratio_high,
        importance_sampling_level=LOSS_MODES[g.loss_mode],
        shuffle_dataset=g.data_shuffle,
        save_steps=g.save_freq,
        save_total_limit=g.max_actor_ckpt_to_keep,
        eval_steps=g.test_freq,
        seed=cfg.data.seed,
        gradient_checkpointing=g.gradient_checkpointing,
        filter_zero_std_samples=g.filter_zero_std_samples,
        rlvr_rules=cfg.policy_reward_kwargs(),  # and the paying judge, when one pays
    )


def _grpo_config(params: GrpoParams, *, has_eval: bool, rewards: int | None = None) -> Any:
    """TRL's config; `rewards`: how many reward functions there are (the first pays), by default
    as many as `reward_functions` gives without per-verifier probes."""
    import torch
    from trl import GRPOConfig

    use_cpu = not torch.cuda.is_available() if params.use_cpu is None else params.use_cpu
    bf16 = params.bf16
    if bf16 is None:  # GRPOConfig would default to bf16 even on CPU
        bf16 = not use_cpu and torch.cuda.is_bf16_supported()
    eval_steps = params.eval_steps or params.save_steps
    return GRPOConfig(
        output_dir=params.output_dir,
        learning_rate=params.learning_rate,
        lr_scheduler_type=params.lr_scheduler_type,
        lr_scheduler_kwargs=dict(params.lr_scheduler_kwargs) or None,
        warmup_ratio=params.warmup_ratio,
        max_grad_norm=params.max_grad_norm,
        per_device_train_batch_size=params.micro_batch_size,
        gradient_accumulation_steps=params.gradient_accumulation_steps,
        num_generations=params.num_generations,
        max_prompt_length=params.max_prompt_length,
        max_completion_length=params.max_completion_length,
        max_steps=params.max_steps,
        num_train_epochs=params.num_train_epochs,
        beta=params.beta,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k,
        loss_type=params.loss_type,
        epsilon=params.epsilon,
        epsilon_high=params.epsilon_high,
        importance_sampling_level=params.importance_sampling_level,
        shuffle_dataset=params.shuffle_dataset,
        scale_rewards=params.scale_rewards,
        # The score pays; the format-failure (and verifiable-correct) probes only report.
        reward_weights=[1.0] + [0.0] * ((rewards or len(reward_functions(params.reward))) - 1),
        save_strategy="steps",
        save_steps=params.save_steps,
        save_total_limit=params.save_total_limit,
        logging_steps=params.logging_steps,
        eval_strategy="steps" if has_eval else "no",
        eval_steps=eval_steps if has_eval else None,
        per_device_eval_batch_size=params.num_generations,  # whole prompt groups
        seed=params.seed,
        use_cpu=use_cpu,
        bf16=bf16,
        gradient_checkpointing=params.gradient_checkpointing,
        use_vllm=False,
        dataloader_num_workers=0,
        report_to="none",  # metrics leave through the sink only
        log_completions=False,
    )


def _tokenizer(model_path: str) -> Any:
    from transformers import AutoTokenizer

    # Left truncation keeps the end of an over-long judge prompt: the output format instructions.
    return AutoTokenizer.from_pretrained(model_path, truncation_side="left")


def _print_line(line: str) -> None:
    print(line, flush=True)  # a job's stdout is a file: flush so the log streams per step


def _completion_text(completion: Any) -> str:
    """Conversational completions are `[{"role": "assistant", "content": …}]`; take the text."""
    if isinstance(completion, str):
        return completion
    return "".join(str(m.get("content", "")) for m in completion if m.get("role") == "assistant")


def _limit_cpu_threads(params: GrpoParams) -> None:
    """Do not run more torch threads than CPUs we may use (containers report the host's)."""
    import torch

    if params.use_cpu is False:
        return
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = params.cpu_threads or min(torch.get_num_threads(), allowed or 1)
    if threads != torch.get_num_threads():
        torch.set_num_threads(max(1, threads))
