"""Judging on GPUs through verl's validation mode, on CPU: what can be checked without vLLM.

- the judging command composes into verl's own `ppo_trainer` config and passes its
  `validate_config` for every mode: greedy, one completion a row, every row, the job's GPUs;
- `judge_file` with `VerlJudgingGenerator`, whose process layer writes the dump verl's own
  dataset, `DataProto.repeat` and `_dump_generations` would (`test_verl_eval`), gives exactly the
  verdicts a generator handing over the same completions gives, one verl run per
  `evaluation.rows_per_verl_run` rows, and the training file verl asserts on is never empty;
- a verl run that fails halfway through a file loses only its own rows: the rerun judges the
  rest and never a recorded row again;
- `judgeflow render` shows the judging job on the Ray head with its verl command, and HF
  generation in one process without a GPU.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl")

import pyarrow.parquet as pq
from omegaconf import OmegaConf
from test_verl_engine import parse
from test_verl_eval import ANSWERS, SLURM, Answer, R, dump_as_verl_validates, eval_config
from test_verl_validation import verl_validate

from judgeflow.config import load_config
from judgeflow.engines.verl import VerlStageError, compose_verl_config
from judgeflow.engines.verl_eval import (
    JUDGE_ROWS_FILE,
    JUDGE_TRAIN_FILE,
    judging_command,
    verl_judging_generator,
)
from judgeflow.inference.batch import judge_file
from judgeflow.stages import judges_with_verl, judging_batch

pytestmark = pytest.mark.usefixtures("datasets_cache")


@pytest.mark.parametrize("recipe", ["grpo-pointwise", "grpo-pairwise", "grrm-rlvr"])
@pytest.mark.parametrize("gpus", [1, 4])
def test_judging_command_composes_and_passes_verls_validation(recipe: str, gpus: int) -> None:
    from verl.utils.config import omega_conf_to_dataclass

    cfg = load_config(
        recipe,
        overrides=[*SLURM, f"evaluation.gpus={gpus}", "cluster.gpus_per_node=8",
                   "evaluation.samples=4", "evaluation.temperature=1.0", "evaluation.limit=5"],
    )  # fmt: skip
    assert judges_with_verl(cfg) and judging_batch(cfg) == cfg.evaluation.rows_per_verl_run
    overrides = judging_command(cfg, "/jobs/run/judge")[3:]
    config = compose_verl_config(overrides)
    OmegaConf.resolve(config)
    verl_validate(config)
    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    t, val = config.trainer, config.actor_rollout_ref.rollout.val_kwargs
    assert (t.val_only, t.nnodes, t.n_gpus_per_node) == (True, 1, gpus)
    # judging is greedy, one completion a row, every row, whatever the evaluation samples
    assert (val.n, val.temperature, val.do_sample) == (1, 0.0, False)
    assert list(config.data.val_files) == [f"/jobs/run/judge/{JUDGE_ROWS_FILE}"]
    assert list(config.data.train_files) == [f"/jobs/run/judge/{JUDGE_TRAIN_FILE}"]
    assert config.data.validation_shuffle is False and config.data.filter_overlong_prompts
    assert t.validation_data_dir == "/jobs/run/judge/generations"


def test_without_a_gpu_or_under_trl_judging_is_hf_generation() -> None:
    for overrides in (["evaluation.gpus=0"], ["engine=trl"]):
        cfg = load_config("grpo-pointwise", overrides=[*SLURM, *overrides])
        assert not judges_with_verl(cfg)
        assert judging_batch(cfg) == cfg.evaluation.batch_size


class VerlStandIn:
    """main_ppo's place: writes the dump verl's validation would, and builds verl's training
    dataset from the training file, which verl asserts is at least a batch; `fail_on` makes
    that run exit 3 instead (a node lost mid-file)."""

    def __init__(self, tokenizer: Any, mode: str, fail_on: int | None = None) -> None:
        self.tokenizer, self.mode, self.fail_on = tokenizer, mode, fail_on
        self.commands: list[list[str]] = []
        self.judged: list[int] = []  # rows each run judged

    def __call__(self, command: list[str], env: Mapping[str, str], **_: Any) -> int:
        from verl.trainer.main_ppo import create_rl_dataset

        self.commands.append(command)
        if len(self.commands) == self.fail_on:
            return 3
        overrides = command[3:]
        config = compose_verl_config(overrides)
        OmegaConf.resolve(config)
        train = create_rl_dataset(
            config.data.train_files, config.data, self.tokenizer, None, is_train=True
        )
        assert len(train) >= config.data.train_batch_size
        dump = dump_as_verl_validates(overrides, self.tokenizer, ANSWERS[self.mode], self.mode)
        self.judged.append(len(dump.read_text().splitlines()))
        return 0


class Direct:
    """The same completions, handed over directly: the reply to a call's i-th prompt."""

    def __init__(self, reply: Answer) -> None:
        self.reply = reply

    def generate(self, prompts: Sequence[Any], **_: Any) -> list[str]:
        return [self.reply(i, 0) for i in range(len(prompts))]


def rows_file(mode: str, path: Path, n: int) -> Path:
    if mode == "pointwise":
        rows = [{"query": f"What is {i} + {i}?", "response": f"It is {2 * i}."} for i in range(n)]
    else:
        rows = [
            {"query": f"Name {i}.", "response_a": f"{i}", "response_b": f"not {i}"}
            for i in range(n)
        ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("mode", ["pointwise", "pairwise"])
def test_judge_file_gets_the_verdicts_of_the_same_completions_one_run_per_chunk(
    mode: str, tokenizer: Any, tiny_model: Path, tmp_path: Path
) -> None:
    cfg = eval_config("evaluation.rows_per_verl_run=6", "evaluation.gpus=2",
                      "cluster.gpus_per_node=2", recipe=f"grpo-{mode}")  # fmt: skip
    data = rows_file(mode, tmp_path / "rows.jsonl", 10)
    generator = verl_judging_generator(cfg, tiny_model, tmp_path / "job")
    generator.runner = stand_in = VerlStandIn(tokenizer, mode)
    e = cfg.evaluation
    settings = {"model": "m", "max_new_tokens": e.max_new_tokens, "batch_size": judging_batch(cfg)}
    via_verl = judge_file(generator, mode, data, str(tmp_path / "verl.jsonl"), **settings)
    direct = judge_file(Direct(ANSWERS[mode]), mode, data, str(tmp_path / "direct.jsonl"), **settings)  # fmt: skip
    assert via_verl.verdicts == direct.verdicts and via_verl.total == 10
    assert 0 < via_verl.format_failures < 10  # the replies mix verdicts and cut-off answers
    assert (tmp_path / "verl.jsonl").read_text() == (tmp_path / "direct.jsonl").read_text()
    prompts_per_row = 2 if mode == "pairwise" else 1  # both orders, in the same run
    assert stand_in.judged == [6 * prompts_per_row, 4 * prompts_per_row]
    given = parse(stand_in.commands[0][3:])
    assert given["actor_rollout_ref.model.path"] == str(tiny_model)
    assert given["trainer.n_gpus_per_node"] == 2 and given[f"{R}.val_kwargs.n"] == 1


def test_a_failed_verl_run_loses_only_its_rows(
    tokenizer: Any, tiny_model: Path, tmp_path: Path
) -> None:
    cfg = eval_config("evaluation.rows_per_verl_run=3")
    data = rows_file("pointwise", tmp_path / "rows.jsonl", 8)
    out = str(tmp_path / "verdicts.parquet")
    settings = {"model": "m", "max_new_tokens": cfg.evaluation.max_new_tokens, "batch_size": 3}
    generator = verl_judging_generator(cfg, tiny_model, tmp_path / "job")
    generator.runner = VerlStandIn(tokenizer, "pointwise", fail_on=2)
    with pytest.raises(VerlStageError, match="exited with code 3"):
        judge_file(generator, "pointwise", data, out, **settings)
    assert not Path(out).exists()  # never a half file
    generator.runner = again = VerlStandIn(tokenizer, "pointwise")
    summary = judge_file(generator, "pointwise", data, out, **settings)
    assert summary.resumed == 3 and again.judged == [3, 2]  # the first run's rows stand
    assert [v["id"] for v in pq.read_table(out).to_pylist()] == [str(i) for i in range(8)]


def test_the_generator_judges_greedily_with_the_runs_settings(
    tiny_model: Path, tmp_path: Path
) -> None:
    cfg = eval_config()
    generator = verl_judging_generator(cfg, tiny_model, tmp_path)
    generator.runner = lambda *a, **k: pytest.fail("nothing should run")
    prompt = [[{"role": "user", "content": "hi"}]]
    longest = cfg.evaluation.max_new_tokens
    with pytest.raises(ValueError, match="greedily"):
        generator.generate(prompt, max_new_tokens=longest, temperature=0.7)
    with pytest.raises(ValueError, match=f"max_new_tokens={longest}"):
        generator.generate(prompt, max_new_tokens=longest + 1)
    assert generator.generate([], max_new_tokens=longest) == []


@pytest.mark.parametrize("recipe", ["grpo-pairwise", "grrm-rlvr"])
def test_render_shows_the_judging_job_and_its_verl_command(
    recipe: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from judgeflow.cli.typer_app import app

    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path))
    runner = CliRunner()
    slurm = ["--set", "cluster.backend=slurm"]
    result = runner.invoke(app, ["render", recipe, *slurm, "--set", "evaluation.gpus=2"])
    assert result.exit_code == 0, result.output
    judging = result.output.partition(f"# recipe {recipe}: judging")[2]
    assert "#SBATCH --job-name=judgeflow-judge" in judging
    assert "#SBATCH --gpus-per-node=2" in judging and "on the Ray head" in judging
    assert "verl.trainer.main_ppo" in judging and "trainer.val_only=true" in judging
    assert f"judge/{JUDGE_ROWS_FILE}" in judging and f"{R}.val_kwargs.n=1" in judging
    assert "once per 4096 rows" in judging
    result = runner.invoke(app, ["render", recipe, *slurm, "--set", "evaluation.gpus=0"])
    judging = result.output.partition(f"# recipe {recipe}: judging")[2]
    assert "one process" in judging and "verl.trainer.main_ppo" not in judging
    assert not (tmp_path / "jobs").exists()  # a dry run writes nothing
