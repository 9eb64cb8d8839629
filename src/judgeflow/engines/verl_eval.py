"""Evaluation on GPU clusters through verl's own validation mode (verl 0.6.1).

`python -m verl.trainer.main_ppo` with `trainer.val_only=True` and `trainer.val_before_train=True`
starts the trainer, generates every eval row `val_kwargs.n` times with vLLM, scores them with
judgeflow's reward, and returns from `RayPPOTrainer.fit` before the first training step. So
evaluation on GPUs uses vLLM without judgeflow importing it.

The completions come back through verl's generation dump: `_validate` hands them to
`_dump_generations`, which writes `trainer.validation_data_dir/<global_steps>.jsonl` (`0.jsonl`
here), one JSON line per completion with `input` (the prompt, decoded without special tokens),
`output`, `gts`, `score`, `step` and the reward's extra keys. Lines follow the eval file's row
order (`data.validation_shuffle=False`), each row's `n` completions consecutive
(`DataProto.repeat(interleave=True)`), minus the rows verl's overlong-prompt filter dropped.
judgeflow scores them with its own code (`evaluation.evaluate_judge`), so the HF and verl paths
report the same metrics; verl's own val metrics are only printed (`trainer.logger=['console']`):
logged at step 0 they would collide between the before and after evaluations of a run.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judgeflow.config import RunConfig, with_policy
from judgeflow.data.grrm_template import LABELS
from judgeflow.engines.verl import (
    MAIN_PPO,
    Runner,
    VerlStageError,
    hydra_value,
    run_streaming,
    verl_overrides,
)

__all__ = [
    "EVALUATION_KEYS",
    "VerlEvaluationError",
    "VerlJudgingGenerator",
    "VerlValidationGenerator",
    "evaluation_gpus",
    "judging_command",
    "read_validation_dump",
    "validation_command",
    "validation_file",
    "validation_overrides",
    "verl_generator_for",
    "verl_judging_generator",
]

#: Under the evaluation's output dir: verl's generation dump, and the rows verl evaluates when
#: they are not the eval file as it is (a limit, pairwise twins).
GENERATIONS_DIRNAME = "generations"
EVAL_ROWS_FILE = "eval.parquet"

_ROLLOUT = "actor_rollout_ref.rollout"
_ACTOR = "actor_rollout_ref.actor"
#: Keys whose value the evaluation decides; a `grpo.extra_overrides` entry for one is left out.
EVALUATION_KEYS = frozenset(
    {
        "actor_rollout_ref.model.path",
        "data.train_files",
        "data.val_files",
        "data.val_max_samples",
        "data.validation_shuffle",
        "data.max_response_length",
        "data.filter_overlong_prompts",
        "data.train_batch_size",
        f"{_ACTOR}.ppo_mini_batch_size",
        f"{_ACTOR}.ppo_micro_batch_size_per_gpu",
        f"{_ACTOR}.ulysses_sequence_parallel_size",
        f"{_ACTOR}.use_kl_loss",
        "algorithm.use_kl_in_reward",
        f"{_ROLLOUT}.tensor_model_parallel_size",
        *(
            f"{_ROLLOUT}.val_kwargs.{k}"
            for k in ("n", "temperature", "top_p", "top_k", "do_sample")
        ),
        "trainer.val_only",
        "trainer.val_before_train",
        "trainer.validation_data_dir",
        "trainer.logger",
        "trainer.resume_mode",
        "trainer.default_local_dir",
        "trainer.nnodes",
        "trainer.n_gpus_per_node",
    }
)


class VerlEvaluationError(VerlStageError):
    """verl's validation left no usable dump: missing, misaligned, or rows it dropped."""


# ---------------------------------------------------------------------------- the command


def evaluation_gpus(cfg: RunConfig) -> int:
    """GPUs of the evaluation job: `evaluation.gpus`, at most a node's."""
    return min(cfg.evaluation.gpus, cfg.cluster.gpus_per_node)


def _evaluation_copy(cfg: RunConfig, n_gpus: int) -> RunConfig:
    """`cfg` as verl must see it to evaluate: the evaluation's sampling, no reference model,
    no resuming, console logging only, and batch sizes any GPU count accepts (nothing trains,
    but verl checks the training batch arithmetic against the GPUs all the same)."""
    e, g = cfg.evaluation, cfg.grpo
    tp = g.rollout_tensor_model_parallel_size
    grpo = g.model_copy(
        update={
            "val_temperature": e.temperature,
            "val_top_p": e.top_p,
            "val_top_k": -1,
            "val_do_sample": e.temperature > 0,
            "use_kl_loss": False,  # verl builds a reference worker otherwise
            "use_kl_in_reward": False,
            "val_before_train": True,  # val_only returns only after this validation
            "resume_mode": "disable",
            "logger": ["console"],
            "max_steps": None,
            "max_actor_ckpt_to_keep": None,
            "train_batch_size": n_gpus,
            "ppo_mini_batch_size": n_gpus,
            "ppo_micro_batch_size_per_gpu": 1,
            "ulysses_sequence_parallel_size": 1,
            "rollout_tensor_model_parallel_size": tp if tp and n_gpus % tp == 0 else None,
            "extra_overrides": [],
            "lora": g.lora.model_copy(update={"rank": 0}),  # the model evaluated is merged
        }
    )
    data = cfg.data.model_copy(
        # a truncated prompt would be judged as if it were whole: drop it, and report it
        update={"max_response_length": e.max_new_tokens, "filter_overlong_prompts": True}
    )
    return cfg.model_copy(update={"grpo": grpo, "data": data})


def validation_file(cfg: RunConfig, eval_file: str, output_dir: str | Path) -> str:
    """The parquet verl evaluates: `eval_file`, or with `evaluation.limit` the first rows,
    which the generator writes beside the dump (verl's own `data.val_max_samples` picks rows
    at random when `data.shuffle` is on)."""
    if cfg.evaluation.limit is None:
        return str(eval_file)
    return str(Path(output_dir) / EVAL_ROWS_FILE)


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def validation_overrides(
    cfg: RunConfig,
    *,
    eval_file: str,
    train_file: str,
    output_dir: str | Path,
    n_gpus: int,
    reward_path: str | None = None,
) -> list[str]:
    """main_ppo's overrides to evaluate `cfg.model.path` on `eval_file` with verl's val_only mode.

    The training overrides of an evaluation copy of `cfg` (`_evaluation_copy`), plus what only
    an evaluation sets. verl builds a train dataloader even in val_only and asserts it is not
    empty, hence `train_file`; `reward_path` as for `verl_overrides`. `grpo.extra_overrides`
    still apply, except to `EVALUATION_KEYS`; one that sets a rendered key replaces it, so no
    key is given twice (hydra keeps the last value of a repeated key silently, and refuses a
    repeated `+key`).
    """
    if n_gpus < 1:
        raise ValueError(
            "evaluation with verl needs a GPU: set evaluation.gpus (and cluster.gpus_per_node)"
        )
    out = Path(output_dir)
    rendered = verl_overrides(
        _evaluation_copy(cfg, n_gpus),
        train_files=[str(train_file)],
        val_files=[validation_file(cfg, eval_file, out)],
        checkpoint_dir=str(out / "checkpoints"),  # never the training checkpoints
        nnodes=1,
        n_gpus_per_node=n_gpus,
        reward_path=reward_path,
        unscored_judge=True,  # a paying judge is not served for an evaluation: rescored after
    )
    rendered += [
        f"{key}={hydra_value(value)}"
        for key, value in [
            (f"{_ROLLOUT}.val_kwargs.n", cfg.evaluation.samples),
            ("data.validation_shuffle", False),  # the dump follows the eval file's order
            ("trainer.val_only", True),
            ("trainer.validation_data_dir", str(out / GENERATIONS_DIRNAME)),
        ]
    ]
    extras = [o for o in cfg.grpo.extra_overrides if _key(o) not in EVALUATION_KEYS]
    replaced = {_key(o) for o in extras}
    overrides = [o for o in rendered if _key(o) not in replaced] + extras
    keys = [_key(o) for o in overrides]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError(f"grpo.extra_overrides sets {', '.join(twice)} more than once")
    return overrides


def validation_command(cfg: RunConfig, *, python: str = sys.executable, **kwargs: Any) -> list[str]:
    """`[python, -m, verl.trainer.main_ppo, *overrides]`; keywords as `validation_overrides`."""
    return [python, "-m", MAIN_PPO, *validation_overrides(cfg, **kwargs)]


# ---------------------------------------------------------------------------- the dump


def latest_dump(dump_dir: str | Path) -> Path:
    """The newest `*.jsonl` verl dumped in `dump_dir` (val_only writes `0.jsonl`)."""
    files = [p for p in Path(dump_dir).glob("*.jsonl") if p.is_file()]
    if not files:
        raise VerlEvaluationError(
            f"no generation dump (*.jsonl) in {dump_dir}: verl's validation did not run "
            "(trainer.val_before_train, trainer.validation_data_dir)"
        )
    return max(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def _squash(text: str) -> str:
    """Text without whitespace: decoding may tidy spaces (clean_up_tokenization_spaces)."""
    return "".join(text.split())


def _needles(row: Mapping[str, Any]) -> list[str]:
    return [_squash(str(m.get("content") or "")) for m in row.get("prompt") or []]


def _read_dump(path: Path) -> list[tuple[int, str, str]]:
    """`(line number, squashed input, output)` per completion."""
    entries = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                entries.append((number, _squash(entry["input"]), str(entry["output"])))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise VerlEvaluationError(
                    f"{path}:{number}: not a verl generation line with input and output ({exc})"
                ) from None
    return entries


def read_validation_dump(
    dump_dir: str | Path, rows: Sequence[Mapping[str, Any]], samples: int
) -> list[list[str]]:
    """The `samples` completions of each eval row, in row order; `[]` for a row verl dropped.

    The dump is walked in order: a row whose prompt (every message's content) is in the next
    line's `input` takes that line and the `samples - 1` after it, which must hold the same
    prompt; a row that is not there was dropped (verl's overlong-prompt filter). A line no row
    accounts for means the dump is not of these rows in this order: that is an error naming
    the file and line.
    """
    path = latest_dump(dump_dir)
    entries = _read_dump(path)
    completions: list[list[str]] = []
    pos, last = 0, None
    for i, row in enumerate(rows):
        needles = _needles(row)
        if pos >= len(entries) or not all(n in entries[pos][1] for n in needles):
            completions.append([])
            continue
        group = entries[pos : pos + samples]
        for k, (number, text, _) in enumerate(group):
            if not all(n in text for n in needles):
                raise VerlEvaluationError(
                    f"{path}:{number}: expected completion {k + 1} of {samples} of eval row {i}, "
                    "found another prompt (was verl run with val_kwargs.n="
                    f"{samples}?)"
                )
        if len(group) < samples:
            raise VerlEvaluationError(
                f"{path}: ends after {len(group)} of the {samples} completions of eval row {i}"
            )
        completions.append([output for _, _, output in group])
        pos, last = pos + samples, i
    if pos < len(entries):
        after = "any eval row" if last is None else f"eval row {last}"
        raise VerlEvaluationError(
            f"{path}:{entries[pos][0]}: this completion's prompt is not that of any eval row "
            f"after {after}: the dump is not of these rows in this order (or verl's decoded "
            "prompt lost part of the row's text)"
        )
    return completions


# ---------------------------------------------------------------------------- the generator


def _messages(prompt: Any) -> list[tuple[str, str]]:
    return [(str(m.get("role")), str(m.get("content"))) for m in prompt or []]


@dataclass
class VerlValidationGenerator:
    """A `Generator` over verl's validation mode: the first call runs main_ppo once for every
    sample of every row and caches the completions; call `seed=k` returns sample k.

    It answers only the rows `evaluate_judge` judges (`rows()`), with the run's evaluation
    settings, and says so otherwise. A row verl dropped raises instead of being scored as an
    empty completion (a format failure the model never made).
    """

    cfg: RunConfig  # model.path: the model evaluated
    eval_file: str
    train_file: str
    output_dir: str
    n_gpus: int
    python: str = sys.executable
    runner: Runner | None = None
    _rows: list[dict[str, Any]] | None = field(default=None, init=False, repr=False)
    _completions: list[list[str]] | None = field(default=None, init=False, repr=False)

    def generate(
        self,
        prompts: Sequence[Sequence[Mapping[str, str]]],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> list[str]:
        e = self.cfg.evaluation
        asked = {"max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p}
        ran = {"max_new_tokens": e.max_new_tokens, "temperature": e.temperature, "top_p": e.top_p}
        if asked != ran:
            raise ValueError(
                f"verl generates with the run's evaluation settings {ran}, not {asked}"
            )
        if not 0 <= seed < e.samples:
            raise ValueError(
                f"seed {seed}: verl makes evaluation.samples={e.samples} completions per row, "
                f"seeds 0 to {e.samples - 1}"
            )
        rows = self.rows()
        self._check_prompts(prompts, rows)
        if self._completions is None:
            self._completions = self._run(rows)
        return [c[seed] for c in self._completions]

    def rows(self) -> list[dict[str, Any]]:
        """The rows `evaluate_judge` judges: the eval file's first `evaluation.limit`, pairwise
        ones in both A/B orders (`evaluation.evaluation_rows`)."""
        if self._rows is None:
            from judgeflow.evaluation import evaluation_rows, read_rows

            self._rows = evaluation_rows(
                self.cfg.mode, read_rows(self.eval_file, self.cfg.evaluation.limit)
            )
        return self._rows

    def _check_prompts(
        self, prompts: Sequence[Sequence[Mapping[str, str]]], rows: list[dict[str, Any]]
    ) -> None:
        if len(prompts) != len(rows):
            raise ValueError(
                f"{len(prompts)} prompts, but verl evaluates {len(rows)} rows of "
                f"{self.eval_file} (evaluation.limit={self.cfg.evaluation.limit})"
            )
        for i, (prompt, row) in enumerate(zip(prompts, rows, strict=True)):
            if _messages(prompt) != _messages(row.get("prompt")):
                raise ValueError(
                    f"prompt {i} is not evaluation row {i} of {self.eval_file}: this "
                    "generator answers only the eval file's rows, in order"
                )

    def _run(self, rows: list[dict[str, Any]]) -> list[list[str]]:
        out = Path(self.output_dir)
        command = validation_command(
            self.cfg,
            python=self.python,
            eval_file=self._write_rows(rows, out),
            train_file=self.train_file,
            output_dir=out,
            n_gpus=self.n_gpus,
        )
        return _run_validation(self.cfg, rows, command, out, self.runner)

    def _write_rows(self, rows: list[dict[str, Any]], out: Path) -> str:
        """The parquet holding exactly `rows`: the eval file, or a copy beside the dump."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from judgeflow.data.io import write_parquet_atomic

        table = pq.read_table(str(self.eval_file))
        whole = table.to_pylist()
        if self.cfg.evaluation.limit is None and rows == whole:
            return self.eval_file
        target = out / EVAL_ROWS_FILE
        # the file's own schema when the rows are its first ones (a limit); else inferred
        sliced = rows == whole[: len(rows)]
        write_parquet_atomic(
            table.slice(0, len(rows)) if sliced else pa.Table.from_pylist(rows), target
        )
        return str(target)


def _run_validation(
    cfg: RunConfig,
    rows: list[dict[str, Any]],
    command: list[str],
    output_dir: Path,
    runner: Runner | None,
) -> list[list[str]]:
    """Run `command`, one verl validation over `rows` (in order) dumping into `output_dir`: the
    completions of each row. A row verl dropped as overlong is an error naming it, never an
    empty answer."""
    dump_dir = output_dir / GENERATIONS_DIRNAME
    shutil.rmtree(dump_dir, ignore_errors=True)  # an earlier attempt's dump must not be read
    run = runner or run_streaming  # looked up at call time: tests replace it
    code = run(command, dict(os.environ))
    if code != 0:
        raise VerlStageError(f"{MAIN_PPO} (validation only) exited with code {code}")
    completions = read_validation_dump(dump_dir, rows, cfg.evaluation.samples)
    dropped = [i for i, c in enumerate(completions) if not c]
    if dropped:
        shown = ", ".join(_row_name(rows[i], i) for i in dropped[:5])
        more = f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
        raise VerlEvaluationError(
            f"verl dropped {len(dropped)} of {len(rows)} rows as longer than "
            f"data.max_prompt_length={cfg.data.max_prompt_length} tokens: {shown}{more}. "
            "Scored as empty completions they would count as format failures; raise "
            "data.max_prompt_length or prepare the data with the same limit"
        )
    return completions


def _row_name(row: Mapping[str, Any], position: int) -> str:
    extra = row.get("extra_info")
    index = extra.get("index") if isinstance(extra, Mapping) else None
    return f"row {position}" + ("" if index is None else f" (index {index})")


def verl_generator_for(
    cfg: RunConfig,
    model_dir: str | Path,
    eval_file: str | Path,
    train_file: str | Path,
    workdir: str | Path,
) -> VerlValidationGenerator:
    """The evaluation stage's generator under verl: `model_dir` (a local copy) judged on
    `eval_file`, verl's files under `workdir` (the job's stage dir), `evaluation_gpus` GPUs."""
    return VerlValidationGenerator(
        with_policy(cfg, model_dir),
        eval_file=str(eval_file),
        train_file=str(train_file),
        output_dir=str(workdir),
        n_gpus=evaluation_gpus(cfg),
    )


# ---------------------------------------------------------------------------- judging


#: Under the judging job's folder: the rows a verl run judges, and its (training) input.
JUDGE_ROWS_FILE = "judge.parquet"
JUDGE_TRAIN_FILE = "judge-train.parquet"
#: verl scores every validation completion against the row's ground truth. Unlabeled rows get
#: one the reward parses (so it neither warns nor fails); those scores mean nothing and are not
#: read: the verdicts are parsed from the completions, as the HF path does.
_PLACEHOLDER_TRUTH: dict[str, dict[str, Any]] = {
    "pointwise": {"helpfulness": 0},
    "pairwise": {"preference": "A"},
    "grrm": {label: 0 for label in LABELS},
}
JUDGE_DATA_SOURCE = "judgeflow-judge"


def judging_rows(mode: str, prompts: Sequence[Sequence[Mapping[str, str]]]) -> list[dict[str, Any]]:
    """verl RL rows holding `prompts` in order: what its dataset reads (prompt, data_source,
    reward_model, extra_info.index), with a placeholder ground truth."""
    truth = json.dumps(_PLACEHOLDER_TRUTH[mode])
    return [
        {
            "data_source": JUDGE_DATA_SOURCE,
            "prompt": [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt],
            "ability": "judge",
            "reward_model": {"style": "rule", "ground_truth": truth},
            "extra_info": {"index": i},
        }
        for i, prompt in enumerate(prompts)
    ]


def judging_config(cfg: RunConfig) -> RunConfig:
    """`cfg` as a judging run gives it to verl: greedy, one completion a row, every row."""
    e = cfg.evaluation.model_copy(update={"temperature": 0.0, "samples": 1, "limit": None})
    return cfg.model_copy(update={"evaluation": e})


@dataclass
class VerlJudgingGenerator:
    """A `Generator` for judging on GPUs: each call is one verl validation run (vLLM) over the
    prompts it is given, so `judge_file` hands it `evaluation.rows_per_verl_run` rows at a time
    and records each run's verdicts before the next (a killed job repeats one run at most).

    Judging is greedy with the run's `evaluation.max_new_tokens`; it says so when asked for
    anything else. verl needs a training file even in validation mode: the same rows, repeated
    up to a training batch (one row per GPU).
    """

    cfg: RunConfig  # model.path: the judge's weights; evaluation_gpus(cfg) GPUs
    output_dir: str
    python: str = sys.executable
    runner: Runner | None = None

    def generate(
        self,
        prompts: Sequence[Sequence[Mapping[str, str]]],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> list[str]:
        longest = self.cfg.evaluation.max_new_tokens
        if temperature != 0 or seed != 0 or max_new_tokens != longest:
            raise ValueError(
                f"verl judges greedily with evaluation.max_new_tokens={longest}, not with "
                f"max_new_tokens={max_new_tokens}, temperature={temperature}, seed={seed}"
            )
        if not prompts:
            return []
        import pyarrow as pa

        from judgeflow.data.io import write_parquet_atomic

        out = Path(self.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        rows = judging_rows(self.cfg.mode, prompts)
        val_file, train_file = out / JUDGE_ROWS_FILE, out / JUDGE_TRAIN_FILE
        write_parquet_atomic(pa.Table.from_pylist(rows), val_file)
        n_gpus = evaluation_gpus(self.cfg)  # verl asserts a non-empty training dataloader
        repeats = -(-n_gpus // len(rows))
        write_parquet_atomic(pa.Table.from_pylist(rows * repeats), train_file)
        command = judging_command(self.cfg, out, python=self.python)
        completions = _run_validation(judging_config(self.cfg), rows, command, out, self.runner)
        return [c[0] for c in completions]


def judging_command(
    cfg: RunConfig, output_dir: str | Path, *, python: str = sys.executable
) -> list[str]:
    """The verl command one judging run executes, its rows in `output_dir` (shown by
    `judgeflow render`; `VerlJudgingGenerator` runs exactly this)."""
    out = Path(output_dir)
    return validation_command(
        judging_config(cfg),
        python=python,
        eval_file=str(out / JUDGE_ROWS_FILE),
        train_file=str(out / JUDGE_TRAIN_FILE),
        output_dir=out,
        n_gpus=evaluation_gpus(cfg),
    )


def verl_judging_generator(
    cfg: RunConfig, model_dir: str | Path, workdir: str | Path
) -> VerlJudgingGenerator:
    """The judging stage's generator under verl: `model_dir` (a local copy) on
    `evaluation_gpus` GPUs, verl's files under `workdir` (the job's folder)."""
    return VerlJudgingGenerator(with_policy(cfg, model_dir), output_dir=str(workdir))
