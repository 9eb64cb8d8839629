"""Evaluation through verl's validation mode, on CPU: what can be checked without vLLM or a GPU.

- the validation overrides compose into verl's own `ppo_trainer` config and pass its
  `validate_config` for every verl recipe (golden files show them in review);
- the dump reader on dumps written by verl's own `RayPPOTrainer._dump_generations`, from rows
  that went through verl's own dataset, dataloader and `DataProto.repeat` as `_validate` does
  (only generation stands in: vLLM cannot run here);
- `VerlValidationGenerator` with the process layer replaced by that writer gives
  `evaluate_judge` exactly the metrics a generator returning the same completions gives;
- `judgeflow render` shows the evaluation job and its verl command.

Regenerate the golden files after an intended change with
    JUDGEFLOW_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/engines/test_verl_eval.py
"""

from __future__ import annotations

import importlib
import json
import types
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl")

import pyarrow.parquet as pq
from omegaconf import OmegaConf
from test_verl_engine import GOLDEN_DIR, SHARED, UPDATE_GOLDEN, parse
from test_verl_validation import RECIPES, verl_validate

from judgeflow.config import RunConfig, load_config
from judgeflow.data import prepare_judge
from judgeflow.engines.verl import VerlStageError, compose_verl_config
from judgeflow.engines.verl_eval import (
    EVALUATION_KEYS,
    VerlEvaluationError,
    evaluation_gpus,
    read_validation_dump,
    validation_overrides,
    verl_generator_for,
)
from judgeflow.evaluation import evaluate_judge, evaluation_rows, params_from, read_rows
from judgeflow.samples import sample_path
from judgeflow.stages import PreparedData, evaluate_job_spec

pytestmark = pytest.mark.usefixtures("datasets_cache")

SLURM = ["cluster.backend=slurm"]
R = "actor_rollout_ref.rollout"
Answer = Callable[[int, int], str]  # (row's extra_info.index, sample) -> completion


def overrides_for(cfg: RunConfig, out: Path | str = "/jobs/run/evaluate-after") -> list[str]:
    return validation_overrides(
        cfg,
        eval_file="/data/val.parquet",
        train_file="/data/train.parquet",
        output_dir=out,
        n_gpus=evaluation_gpus(cfg),
    )


def with_extras(cfg: RunConfig, extras: list[str]) -> RunConfig:
    return cfg.model_copy(update={"grpo": cfg.grpo.model_copy(update={"extra_overrides": extras})})


def key_of(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


# ---------------------------------------------------------------------------- config


@pytest.mark.parametrize("recipe", [*RECIPES, "grrm-full"])  # grrm-full: 4 samples at T=1
def test_validation_overrides_compose_and_pass_verls_validation(recipe: str) -> None:
    from verl.utils.config import omega_conf_to_dataclass

    cfg = load_config(recipe, overrides=SLURM)
    overrides = overrides_for(cfg)
    keys = [key_of(o) for o in overrides]
    assert len(keys) == len(set(keys))  # hydra would keep the last of a repeated key silently
    config = compose_verl_config(overrides)
    OmegaConf.resolve(config)
    verl_validate(config)
    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    e, t, rollout = cfg.evaluation, config.trainer, config.actor_rollout_ref.rollout
    assert (t.val_only, t.val_before_train) == (True, True)  # fit returns after validating
    assert t.validation_data_dir == "/jobs/run/evaluate-after/generations"
    assert t.default_local_dir == "/jobs/run/evaluate-after/checkpoints"
    assert list(t.logger) == ["console"] and t.resume_mode == "disable"
    assert (t.nnodes, t.n_gpus_per_node) == (1, e.gpus)
    assert list(config.data.val_files) == ["/data/val.parquet"]
    assert list(config.data.train_files) == ["/data/train.parquet"]
    assert config.data.validation_shuffle is False and config.data.filter_overlong_prompts
    assert config.data.max_response_length == rollout.response_length == e.max_new_tokens
    val = rollout.val_kwargs
    assert (val.n, val.temperature, val.top_p) == (e.samples, e.temperature, e.top_p)
    assert val.do_sample == (e.temperature > 0) and val.top_k == -1
    assert not config.actor_rollout_ref.actor.use_kl_loss  # no reference worker
    assert not config.algorithm.use_kl_in_reward
    assert config.actor_rollout_ref.model.path == cfg.model.path
    assert Path(config.custom_reward_function.path).is_file()


@pytest.mark.parametrize("gpus", [1, 3, 5])
def test_any_evaluation_gpu_count_passes_verls_batch_checks(gpus: int) -> None:
    """The training batch (96 x 4 over 8 GPUs) does not divide over 5; nothing trains here."""
    cfg = load_config("grpo-pointwise", overrides=[*SLURM, f"evaluation.gpus={gpus}"])
    config = compose_verl_config(overrides_for(cfg))
    OmegaConf.resolve(config)
    verl_validate(config)
    assert config.trainer.n_gpus_per_node == gpus
    assert config.actor_rollout_ref.rollout.tensor_model_parallel_size == gpus


def test_tensor_parallelism_that_does_not_fit_the_evaluation_gpus_falls_back() -> None:
    cfg = load_config(
        "grpo-pointwise", overrides=[*SLURM, "grpo.rollout_tensor_model_parallel_size=2"]
    )
    for gpus, tp in [(1, 1), (4, 2), (3, 3)]:
        job = cfg.model_copy(
            update={"evaluation": cfg.evaluation.model_copy(update={"gpus": gpus})}
        )
        assert parse(overrides_for(job))[f"{R}.tensor_model_parallel_size"] == tp


def test_extra_overrides_apply_except_to_what_the_evaluation_decides() -> None:
    cfg = with_extras(
        load_config("grpo-pointwise", overrides=SLURM),
        [
            "trainer.val_only=false",
            "trainer.logger=['console','mlflow']",
            f"{R}.val_kwargs.n=8",
            f"{R}.gpu_memory_utilization=0.4",
            "trainer.balance_batch=false",
        ],
    )
    overrides = overrides_for(cfg)
    assert [key_of(o) for o in overrides].count(f"{R}.gpu_memory_utilization") == 1
    config = compose_verl_config(overrides)
    assert config.trainer.val_only is True and list(config.trainer.logger) == ["console"]
    assert config.actor_rollout_ref.rollout.val_kwargs.n == 1
    assert config.actor_rollout_ref.rollout.gpu_memory_utilization == 0.4
    assert config.trainer.balance_batch is False
    assert {"trainer.val_only", "trainer.logger", f"{R}.val_kwargs.n"} <= EVALUATION_KEYS
    with pytest.raises(ValueError, match="trainer.balance_batch more than once"):
        overrides_for(
            with_extras(cfg, ["trainer.balance_batch=false", "trainer.balance_batch=true"])
        )


def test_no_gpu_is_refused_before_anything_is_submitted() -> None:
    cfg = load_config("grpo-pointwise", overrides=[*SLURM, "evaluation.gpus=0"])
    with pytest.raises(ValueError, match="needs a GPU"):
        overrides_for(cfg)
    data = PreparedData("/t.parquet", "/v.parquet", "/r.json", {})
    with pytest.raises(ValueError, match="evaluation.gpus"):
        evaluate_job_spec(cfg, "/model", data, "run", "after", dry_run=True)


def test_evaluation_job_runs_under_ray_only_with_verl() -> None:
    data = PreparedData("/t.parquet", "/v.parquet", "/r.json", {})
    verl = load_config("grrm-rlvr", overrides=["evaluation.gpus=2"])
    spec = evaluate_job_spec(verl, "/model", data, "run", "after", dry_run=True)
    assert spec.ray and spec.gpus_per_node == 2 and spec.name == "evaluate-after"
    trl = load_config("grpo-pointwise", overrides=[*SLURM, "engine=trl"])
    assert not evaluate_job_spec(trl, "/model", data, "run", "after", dry_run=True).ray


def test_a_limit_evaluates_rows_written_beside_the_dump(tmp_path: Path) -> None:
    cfg = load_config("grpo-pointwise", overrides=[*SLURM, "evaluation.limit=5"])
    assert parse(overrides_for(cfg, tmp_path))["data.val_files"] == [str(tmp_path / "eval.parquet")]
    unlimited = load_config("grpo-pointwise", overrides=SLURM)
    assert parse(overrides_for(unlimited, tmp_path))["data.val_files"] == ["/data/val.parquet"]


# ---------------------------------------------------------------------------- golden files


@pytest.mark.parametrize("recipe", RECIPES)
def test_validation_overrides_match_golden_file(recipe: str) -> None:
    cfg = load_config(recipe, overrides=SLURM)
    overrides = validation_overrides(
        cfg,
        eval_file=f"{SHARED}/prepared/{cfg.mode}.val.parquet",
        train_file=f"{SHARED}/prepared/{cfg.mode}.parquet",
        output_dir=f"{SHARED}/jobs/RUN_ID/evaluate-after",
        n_gpus=evaluation_gpus(cfg),
        reward_path=f"/opt/judgeflow/rewards/{cfg.mode}.py",
    )
    text = "\n".join(overrides) + "\n"
    golden = GOLDEN_DIR / f"eval-{recipe}.txt"
    if UPDATE_GOLDEN:
        golden.write_text(text)
    assert golden.is_file(), f"{golden} missing; run with JUDGEFLOW_UPDATE_GOLDEN=1"
    assert text == golden.read_text(), f"{recipe}: overrides changed; review, then regenerate"


# ---------------------------------------------------------------------------- verl's dump


def prepared(mode: str, tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    """40 rows as `prepare` writes them, without a length filter (pairwise: one A/B order)."""
    path = tmp_path_factory.mktemp(mode) / f"{mode}.parquet"
    source = sample_path(f"openjudge_{mode}.jsonl")
    return Path(prepare_judge(mode, source, path, tokenizer=str(tiny_model)).train_path)


@pytest.fixture(scope="module")
def eval_file(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    return prepared("pointwise", tmp_path_factory, tiny_model)


@pytest.fixture(scope="module")
def pairwise_file(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    return prepared("pairwise", tmp_path_factory, tiny_model)


def answer(index: int, sample: int) -> str:
    """Verdicts that differ by row and sample; one in six is cut off (a format failure)."""
    verdict = (index + 2 * sample) % 6
    return "<think>cut off" if verdict == 5 else f"<think>fine</think><score>{verdict}</score>"


def pairwise_answer(index: int, sample: int) -> str:
    verdict = "AB-"[(index + sample) % 3]
    return "<think>cut off" if verdict == "-" else f"<think>fine</think><better>{verdict}</better>"


ANSWERS: dict[str, Answer] = {"pointwise": answer, "pairwise": pairwise_answer}


def dump_as_verl_validates(
    overrides: Sequence[str], tokenizer: Any, reply: Answer, mode: str = "pointwise"
) -> Path:
    """What `RayPPOTrainer._validate` dumps for these overrides, with `reply` for vLLM.

    verl's own pieces: the composed config, the val dataset and dataloader as `_create_dataloader`
    builds them, `DataProto.repeat(interleave=True)`, the prompt decoding, and `_dump_generations`.
    """
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl import DataProto
    from verl.trainer.main_ppo import create_rl_dataset
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.utils.dataset.rl_dataset import collate_fn

    reward = importlib.import_module(f"judgeflow.rewards.{mode}").compute_score
    config = compose_verl_config(overrides)
    OmegaConf.resolve(config)
    dataset = create_rl_dataset(
        config.data.val_files, config.data, tokenizer, None, is_train=False, max_samples=-1
    )
    loader = StatefulDataLoader(
        dataset=dataset,
        batch_size=config.data.val_batch_size or len(dataset),
        num_workers=0,
        shuffle=config.data.get("validation_shuffle", True),
        drop_last=False,
        collate_fn=collate_fn,
    )
    n = config.actor_rollout_ref.rollout.val_kwargs.n
    inputs: list[str] = []
    outputs: list[str] = []
    gts: list[Any] = []
    extra: dict[str, list[Any]] = defaultdict(list)
    for batch in loader:
        repeated = DataProto.from_single_dict(batch).repeat(repeat_times=n, interleave=True)
        inputs += [
            tokenizer.decode(ids, skip_special_tokens=True) for ids in repeated.batch["input_ids"]
        ]
        for j, index in enumerate(repeated.non_tensor_batch["index"]):
            truth = repeated.non_tensor_batch["reward_model"][j]["ground_truth"]
            outputs.append(reply(int(index), j % n))
            gts.append(truth)
            scored = reward("openjudge", outputs[-1], truth)
            extra["reward"].append(scored["score"])
            for key, value in scored.items():
                extra[key].append(value)
    trainer = types.SimpleNamespace(global_steps=0)  # all `_dump_generations` reads of self
    RayPPOTrainer._dump_generations(
        trainer,
        inputs=inputs,
        outputs=outputs,
        gts=gts,
        scores=extra["reward"],
        reward_extra_infos_dict=extra,
        dump_path=config.trainer.validation_data_dir,
    )
    return Path(config.trainer.validation_data_dir) / "0.jsonl"


def eval_config(*overrides: str, recipe: str = "grpo-pointwise") -> RunConfig:
    """A judge recipe on a cluster, on the tiny model's prompt budget, 7 rows a val batch."""
    return load_config(
        recipe,
        overrides=[*SLURM, "data.max_prompt_length=1024", "grpo.val_batch_size=7", *overrides],
    )


def overrides_on(cfg: RunConfig, eval_file: Path, out: Path) -> list[str]:
    return validation_overrides(
        cfg, eval_file=str(eval_file), train_file=str(eval_file), output_dir=out, n_gpus=1
    )


@pytest.mark.parametrize("samples", [1, 3])
def test_reader_gives_each_rows_samples_from_verls_own_dump(
    samples: int, eval_file: Path, tokenizer: Any, tmp_path: Path
) -> None:
    cfg = eval_config(f"evaluation.samples={samples}", "evaluation.temperature=0.7")
    dump = dump_as_verl_validates(overrides_on(cfg, eval_file, tmp_path), tokenizer, answer)
    assert dump == tmp_path / "generations" / "0.jsonl"
    rows = pq.read_table(eval_file).to_pylist()
    lines = dump.read_text().splitlines()
    assert len(lines) == samples * len(rows)
    assert {"input", "output", "gts", "score", "step", "valid_answer"} <= set(json.loads(lines[0]))
    completions = read_validation_dump(dump.parent, rows, samples)
    expected = [[answer(r["extra_info"]["index"], k) for k in range(samples)] for r in rows]
    assert completions == expected


def prompt_lengths(rows: list[dict[str, Any]], tokenizer: Any) -> list[int]:
    return [
        len(tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True)) for r in rows
    ]


def test_rows_verl_dropped_are_reported_empty(
    eval_file: Path, tokenizer: Any, tmp_path: Path
) -> None:
    rows = pq.read_table(eval_file).to_pylist()
    lengths = prompt_lengths(rows, tokenizer)
    limit = sorted(lengths)[len(lengths) // 2]  # verl's filter drops the longer half
    cfg = eval_config(
        f"data.max_prompt_length={limit}", "evaluation.samples=2", "evaluation.temperature=1.0"
    )
    dump = dump_as_verl_validates(overrides_on(cfg, eval_file, tmp_path), tokenizer, answer)
    completions = read_validation_dump(dump.parent, rows, 2)
    dropped = [i for i, c in enumerate(completions) if not c]
    assert dropped == [i for i, n in enumerate(lengths) if n > limit] != []
    kept = [r for r, n in zip(rows, lengths, strict=True) if n <= limit]
    assert [c for c in completions if c] == [
        [answer(r["extra_info"]["index"], k) for k in range(2)] for r in kept
    ]


def rewrite(dump: Path, reorder: Callable[[list[str]], list[str]]) -> None:
    dump.write_text("\n".join(reorder(dump.read_text().splitlines())) + "\n")


@pytest.mark.parametrize(
    ("reorder", "samples", "error"),
    [
        (
            lambda ls: [ls[0], ls[2], ls[1], *ls[3:]],
            1,
            r"0\.jsonl:3: .*not that of any eval row after eval row 2",
        ),
        (lambda ls: ls, 3, r"0\.jsonl:2: expected completion 2 of 3 of eval row 0"),
        (lambda ls: [*ls, ls[0]], 1, r"0\.jsonl:41: .*not that of any eval row after eval row 39"),
        (lambda ls: [*ls[:-1], '{"output": "x"}'], 1, r"0\.jsonl:40: not a verl generation line"),
    ],
    ids=["swapped", "fewer-samples", "extra-line", "no-input"],
)
def test_a_dump_that_does_not_line_up_names_file_and_line(
    reorder: Callable[[list[str]], list[str]],
    samples: int,
    error: str,
    eval_file: Path,
    tokenizer: Any,
    tmp_path: Path,
) -> None:
    dump = dump_as_verl_validates(
        overrides_on(eval_config(), eval_file, tmp_path), tokenizer, answer
    )
    rewrite(dump, reorder)
    rows = pq.read_table(eval_file).to_pylist()
    with pytest.raises(VerlEvaluationError, match=error):
        read_validation_dump(dump.parent, rows, samples)


def test_no_dump_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(VerlEvaluationError, match="no generation dump"):
        read_validation_dump(tmp_path, [], 1)


# ---------------------------------------------------------------------------- the generator


class VerlStandIn:
    """The process layer: records the command and, instead of main_ppo, writes verl's dump."""

    def __init__(self, tokenizer: Any, code: int = 0, mode: str = "pointwise") -> None:
        self.tokenizer, self.code, self.mode = tokenizer, code, mode
        self.reply = ANSWERS[mode]
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], env: Mapping[str, str], **_: Any) -> int:
        self.commands.append(command)
        assert command[1:3] == ["-m", "verl.trainer.main_ppo"]
        if self.code == 0:
            dump_as_verl_validates(command[3:], self.tokenizer, self.reply, self.mode)
        return self.code


class Direct:
    """The same completions, handed over directly (as the HF generator would)."""

    def __init__(self, rows: list[dict[str, Any]], reply: Answer) -> None:
        self.indices, self.reply = [r["extra_info"]["index"] for r in rows], reply

    def generate(self, prompts: Sequence[Any], *, seed: int = 0, **_: Any) -> list[str]:
        return [self.reply(self.indices[i], seed) for i in range(len(prompts))]


@pytest.mark.parametrize(
    ("recipe", "settings", "verl_reads"),
    [
        ("grpo-pointwise", [], "the eval file"),
        (
            "grpo-pointwise",
            ["evaluation.samples=3", "evaluation.temperature=0.7", "evaluation.limit=11"],
            "its first 11 rows",
        ),
        ("grpo-pairwise", ["evaluation.limit=11"], "11 rows and their twins"),
    ],
    ids=["greedy", "3-samples-limit-11", "pairwise-twins"],
)
def test_generator_gives_evaluate_judge_the_metrics_of_the_same_completions(
    recipe: str,
    settings: list[str],
    verl_reads: str,
    eval_file: Path,
    pairwise_file: Path,
    tokenizer: Any,
    tiny_model: Path,
    tmp_path: Path,
) -> None:
    cfg = eval_config(*settings, recipe=recipe)
    data = pairwise_file if cfg.mode == "pairwise" else eval_file
    stand_in = VerlStandIn(tokenizer, mode=cfg.mode)
    generator = verl_generator_for(cfg, tiny_model, data, data, tmp_path / "stage")
    generator.runner = stand_in
    via_verl = evaluate_judge(tiny_model, data, generator=generator, **params_from(cfg))
    rows = evaluation_rows(cfg.mode, read_rows(data, cfg.evaluation.limit))
    direct = evaluate_judge(
        tiny_model, data, generator=Direct(rows, ANSWERS[cfg.mode]), **params_from(cfg)
    )
    assert via_verl.metrics == direct.metrics
    assert via_verl.predictions == direct.predictions
    assert 0 < via_verl.metrics["eval/format_failure_rate"] < 1
    assert len(stand_in.commands) == 1  # one verl run for every sample
    given = parse(stand_in.commands[0][3:])
    assert given["actor_rollout_ref.model.path"] == str(tiny_model)
    assert given[f"{R}.val_kwargs.n"] == cfg.evaluation.samples
    assert given["trainer.validation_data_dir"] == str(tmp_path / "stage" / "generations")
    (val_file,) = given["data.val_files"]
    file_rows = pq.read_table(data).to_pylist()
    if verl_reads == "the eval file":
        assert val_file == str(data)
    elif verl_reads == "its first 11 rows":
        assert pq.read_table(val_file).to_pylist() == file_rows[:11]
    else:  # pairwise rows alone in their pair are judged in both orders
        assert val_file == str(tmp_path / "stage" / "eval.parquet")
        assert len(rows) == 22 and len(pq.read_table(val_file)) == 22


def test_generator_refuses_rows_verl_dropped(
    eval_file: Path, tokenizer: Any, tiny_model: Path, tmp_path: Path
) -> None:
    lengths = prompt_lengths(pq.read_table(eval_file).to_pylist(), tokenizer)
    limit = sorted(lengths)[-3]  # the two longest prompts go
    first = next(i for i, n in enumerate(lengths) if n > limit)
    cfg = eval_config(f"data.max_prompt_length={limit}")
    generator = verl_generator_for(cfg, tiny_model, eval_file, eval_file, tmp_path)
    generator.runner = VerlStandIn(tokenizer)
    dropped = rf"verl dropped 2 of 40 rows .*: row {first} \(index {first}\)"
    with pytest.raises(VerlEvaluationError, match=dropped):
        evaluate_judge(tiny_model, eval_file, generator=generator, **params_from(cfg))


def test_generator_answers_only_the_eval_rows_with_the_runs_settings(
    eval_file: Path, tokenizer: Any, tiny_model: Path, tmp_path: Path
) -> None:
    cfg = eval_config()
    generator = verl_generator_for(cfg, tiny_model, eval_file, eval_file, tmp_path)
    generator.runner = stand_in = VerlStandIn(tokenizer)
    prompts = [r["prompt"] for r in pq.read_table(eval_file).to_pylist()]
    e = cfg.evaluation
    sampling = {"max_new_tokens": e.max_new_tokens, "temperature": e.temperature, "top_p": e.top_p}
    with pytest.raises(ValueError, match="prompt 0 is not evaluation row 0"):
        generator.generate(prompts[::-1], **sampling)
    with pytest.raises(ValueError, match="39 prompts"):
        generator.generate(prompts[1:], **sampling)
    with pytest.raises(ValueError, match="evaluation settings"):
        generator.generate(prompts, **{**sampling, "max_new_tokens": 7})
    with pytest.raises(ValueError, match="seed 1"):
        generator.generate(prompts, **sampling, seed=1)
    assert stand_in.commands == []  # nothing ran for a wrong request
    assert len(generator.generate(prompts, **sampling)) == 40


def test_a_failed_verl_run_fails_the_evaluation(
    eval_file: Path, tokenizer: Any, tiny_model: Path, tmp_path: Path
) -> None:
    cfg = eval_config()
    generator = verl_generator_for(cfg, tiny_model, eval_file, eval_file, tmp_path)
    generator.runner = VerlStandIn(tokenizer, code=3)
    with pytest.raises(VerlStageError, match="exited with code 3"):
        evaluate_judge(tiny_model, eval_file, generator=generator, **params_from(cfg))


# ---------------------------------------------------------------------------- render


def test_render_shows_the_evaluation_job_and_its_verl_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from judgeflow.cli.typer_app import app

    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path))
    result = CliRunner().invoke(
        app, ["render", "grrm-rlvr", "--set", "evaluation.gpus=2", "--set", "evaluation.samples=4",
              "--set", "evaluation.temperature=1.0"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    train, _, evaluation = result.output.partition("stage evaluate")
    assert "trainer.val_only" not in train
    assert "#SBATCH --job-name=judgeflow-evaluate-after" in evaluation
    assert "#SBATCH --nodes=1" in evaluation and "#SBATCH --gpus-per-node=2" in evaluation
    assert "verl.trainer.main_ppo" in evaluation and "trainer.val_only=true" in evaluation
    assert f"{R}.val_kwargs.n=4" in evaluation and "trainer.n_gpus_per_node=2" in evaluation
    assert "<model-dir>" in evaluation and "evaluate-after/generations" in evaluation
    assert not (tmp_path / "jobs").exists()  # a dry run writes nothing


def test_a_local_trl_recipe_renders_no_validation_command() -> None:
    from judgeflow.cli.dry_run import render_recipe

    text = render_recipe(load_config("grpo-pairwise", profile="tiny"))
    assert "stage evaluate (engine trl, backend local" in text
    assert "val_only" not in text
