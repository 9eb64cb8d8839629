"""What verl 0.6.1 itself says about what we generate, on CPU.

- our overrides, composed by hydra into verl's own `ppo_trainer` config, pass
  `verl.utils.config.validate_config` and convert to verl's typed configs;
- the parquet `prepare` writes loads through verl's `create_rl_dataset` / `RLHFDataset` with the
  tiny tokenizer (prompt key, chat template, overlong filter agreeing with ours);
- verl's naive and dapo reward managers, loaded exactly as main_ppo loads them, score our rows
  with judgeflow's reward modules on a `DataProto` of hand-written responses.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl")

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from judgeflow.config import load_config
from judgeflow.data import prepare_judge
from judgeflow.engines.verl import compose_verl_config, merge_command, verl_overrides
from judgeflow.samples import sample_path

pytestmark = pytest.mark.usefixtures("datasets_cache")

RECIPES = ["grpo-pointwise", "grpo-pairwise", "grrm-rlvr", "rlvr"]


def composed(recipe: str, *, overrides: Sequence[str] = (), **kwargs: Any) -> DictConfig:
    cfg = load_config(recipe, overrides=overrides)
    params: dict[str, Any] = {
        "train_files": ["/data/train.parquet"],
        "val_files": ["/data/val.parquet"],
        "checkpoint_dir": "/ckpt",
        **kwargs,
    }
    return compose_verl_config(verl_overrides(cfg, **params))


def verl_validate(config: DictConfig) -> None:
    """verl's own checks, with the same arguments main_ppo's TaskRunner computes."""
    from verl.trainer.ppo.utils import need_critic
    from verl.utils.config import validate_config

    use_ref = bool(
        config.algorithm.use_kl_in_reward or config.actor_rollout_ref.actor.use_kl_loss
    )  # TaskRunner.add_ref_policy_worker
    validate_config(config, use_reference_policy=use_ref, use_critic=need_critic(config))


# ---------------------------------------------------------------------------- config


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_composes_and_passes_verls_validation(recipe: str) -> None:
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.utils.config import omega_conf_to_dataclass

    config = composed(recipe)
    OmegaConf.resolve(config)  # main_ppo resolves every interpolation first
    verl_validate(config)
    actor = config.actor_rollout_ref.actor
    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    omega_conf_to_dataclass(config.algorithm)
    omega_conf_to_dataclass(actor.optim)
    get_policy_loss_fn(actor.policy_loss.loss_mode)  # a registered loss mode
    assert config.actor_rollout_ref.ref.strategy == actor.strategy
    assert config.data.prompt_key == "prompt"
    assert Path(config.custom_reward_function.path).is_file()


def test_grpo_lora_reaches_verls_model_config_and_passes_its_checks() -> None:
    """grpo.lora renders verl's LoRA keys (and the safetensors load its LoRA guide asks of the
    rollout); verl's own validation and typed model config read them as meant. The evaluation
    of the merged model renders none."""
    from verl.workers.config import HFModelConfig

    lora = ["grpo.lora.rank=8", "grpo.lora.alpha=32", "grpo.lora.target=[q_proj,v_proj]"]
    config = composed("grpo-pointwise", overrides=lora)
    OmegaConf.resolve(config)
    verl_validate(config)
    model = config.actor_rollout_ref.model
    assert (model.lora_rank, model.lora_alpha) == (8, 32)
    assert list(model.target_modules) == ["q_proj", "v_proj"]
    assert config.actor_rollout_ref.rollout.load_format == "safetensors"
    # verl's typed model config (it loads the model's files, so only its fields are checked)
    assert {"lora_rank", "lora_alpha", "target_modules"} <= set(HFModelConfig.__dataclass_fields__)
    default = composed("grpo-pointwise", overrides=["grpo.lora.rank=8"])
    assert default.actor_rollout_ref.model.lora_alpha == 16  # unset: 2 x rank
    assert composed("grpo-pointwise").actor_rollout_ref.model.lora_rank == 0


def test_overrides_that_verl_rejects_are_caught_on_cpu() -> None:
    """A batch that does not divide over the GPUs fails here, not on the first GPU run."""
    config = composed("grpo-pointwise", overrides=["grpo.train_batch_size=95"])
    with pytest.raises(AssertionError, match="real_train_batch_size"):
        verl_validate(config)
    with pytest.raises(Exception, match="no_such_key"):
        composed("grpo-pointwise", overrides=["grpo.extra_overrides=[trainer.no_such_key=1]"])


def test_runtime_env_vars_reach_ray_init_kwargs() -> None:
    config = composed("grrm-rlvr", env_vars={"MLFLOW_RUN_ID": "r1"})
    env = config.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.MLFLOW_RUN_ID == "r1"  # main_ppo merges this into ray.init(runtime_env=…)


def test_merge_command_is_accepted_by_verls_model_merger(monkeypatch: pytest.MonkeyPatch) -> None:
    from verl.model_merger.base_model_merger import generate_config_from_args, parse_args

    cmd = merge_command("/ckpt", "/out", step=7)
    monkeypatch.setattr(sys, "argv", ["model_merger", *cmd[3:]])
    merger = generate_config_from_args(parse_args())
    assert (merger.operation, merger.backend) == ("merge", "fsdp")
    assert merger.local_dir == "/ckpt/global_step_7/actor"
    assert merger.target_dir == "/out"
    assert merger.hf_model_config_path == "/ckpt/global_step_7/actor/huggingface"


# ---------------------------------------------------------------------------- dataset


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> dict[str, Path]:
    """`prepare` output for both judge modes, without a length filter."""
    out: dict[str, Path] = {}
    for mode in ("pointwise", "pairwise"):
        path = tmp_path_factory.mktemp(mode) / f"{mode}.parquet"
        prepare_judge(mode, sample_path(f"openjudge_{mode}.jsonl"), path, tokenizer=str(tiny_model))
        out[mode] = path
    return out


def rl_dataset(files: list[str], config: DictConfig, tokenizer: Any) -> Any:
    from verl.trainer.main_ppo import create_rl_dataset

    return create_rl_dataset(files, config.data, tokenizer, None, is_train=True)


@pytest.mark.parametrize("mode", ["pointwise", "pairwise"])
def test_rlhf_dataset_reads_our_parquet(
    mode: str, prepared: dict[str, Path], tokenizer: Any, tiny_model: Path
) -> None:
    import pyarrow.parquet as pq

    recipe = f"grpo-{mode}"
    rows = pq.read_table(prepared[mode]).to_pylist()
    config = composed(recipe, overrides=["data.max_prompt_length=1024"])
    dataset = rl_dataset([str(prepared[mode])], config, tokenizer)
    assert type(dataset).__name__ == "RLHFDataset"
    assert len(dataset) == len(rows)
    item = dataset[0]
    assert item["input_ids"].shape == (1024,)  # left-padded to max_prompt_length
    prompt = tokenizer.decode(item["input_ids"][item["attention_mask"].bool()])
    expected = tokenizer.apply_chat_template(
        rows[0]["prompt"], add_generation_prompt=True, tokenize=False
    )
    assert prompt == expected  # verl applied the chat template to our `prompt` column
    assert item["reward_model"] == rows[0]["reward_model"]
    assert item["data_source"] == rows[0]["data_source"]
    assert item["index"] == rows[0]["extra_info"]["index"]


def test_overlong_filter_agrees_with_prepare(
    prepared: dict[str, Path], tokenizer: Any, tiny_model: Path, tmp_path: Path
) -> None:
    """verl's filter and ours measure the same tokens: what we keep, verl keeps, all of it."""
    import pyarrow.parquet as pq

    lengths = sorted(
        len(tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True))
        for r in pq.read_table(prepared["pointwise"]).to_pylist()
    )
    limit = lengths[len(lengths) // 2]  # about half the prompts are longer
    config = composed("grpo-pointwise", overrides=[f"data.max_prompt_length={limit}"])
    unfiltered = rl_dataset([str(prepared["pointwise"])], config, tokenizer)
    assert len(unfiltered) == sum(n <= limit for n in lengths) < len(lengths)
    ours = prepare_judge(
        "pointwise",
        sample_path("openjudge_pointwise.jsonl"),
        tmp_path / "filtered.parquet",
        tokenizer=str(tiny_model),
        max_prompt_length=limit,
    )
    filtered = rl_dataset([ours.train_path], config, tokenizer)
    assert len(filtered) == ours.report["counts"]["examples_written"]["train"] == len(unfiltered)


# ---------------------------------------------------------------------------- reward managers


@pytest.fixture
def fresh_reward_module() -> Iterator[None]:
    """verl caches the custom reward module as sys.modules['custom_module'] (one per process)."""
    sys.modules.pop("custom_module", None)
    yield
    sys.modules.pop("custom_module", None)


def reward_manager(config: DictConfig, tokenizer: Any) -> Any:
    from verl.trainer.ppo.reward import load_reward_manager

    kwargs = config.reward_model.get("reward_kwargs", {})
    return load_reward_manager(config, tokenizer, num_examine=0, **kwargs)  # as main_ppo does


def batch_of(dataset_items: list[dict[str, Any]], responses: list[str], tokenizer: Any) -> Any:
    """A DataProto as the trainer hands it to the reward manager: prompts, responses, mask."""
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import collate_fn

    batch = collate_fn(dataset_items)
    encoded = [
        [*tokenizer.encode(r, add_special_tokens=False), tokenizer.eos_token_id] for r in responses
    ]
    width = max(len(e) for e in encoded) + 3  # right padding after every response
    resp = torch.full((len(encoded), width), tokenizer.pad_token_id, dtype=torch.long)
    resp_mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for i, ids in enumerate(encoded):
        resp[i, : len(ids)] = torch.tensor(ids)
        resp_mask[i, : len(ids)] = 1
    tensors = {
        "prompts": batch.pop("input_ids"),
        "responses": resp,
        "attention_mask": torch.cat([batch.pop("attention_mask"), resp_mask], dim=1),
    }
    tensors["input_ids"] = torch.cat([tensors["prompts"], resp], dim=1)
    non_tensors = {k: v for k, v in batch.items() if isinstance(v, np.ndarray)}
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors), [len(e) for e in encoded]


def assert_rewards_at_last_token(
    out: dict[str, Any], lengths: list[int], expected: list[float]
) -> None:
    rewards = out["reward_tensor"]
    for i, (n, want) in enumerate(zip(lengths, expected, strict=True)):
        assert rewards[i, n - 1].item() == pytest.approx(want), f"row {i}"
        others = torch.cat([rewards[i, : n - 1], rewards[i, n:]])
        assert torch.count_nonzero(others) == 0, f"row {i}: reward off the last token"


def pointwise_case(
    prepared: dict[str, Path], tokenizer: Any, config: DictConfig
) -> tuple[Any, list[int], list[float]]:
    """Three rows: a correct verdict, a wrong one, and a truncated (malformed) one."""
    dataset = rl_dataset([str(prepared["pointwise"])], config, tokenizer)
    items = [dataset[i] for i in range(3)]
    labels = [item["reward_model"]["ground_truth"]["helpfulness"] for item in items]
    wrong = 0 if labels[1] >= 2 else 4
    responses = [
        f"<think>Accurate and complete.</think><score>{labels[0]}</score>",
        f"<think>Looks weak.</think><score>{wrong}</score>",
        "<think>The response is long and I have not finished",
    ]
    for text in responses:  # byte-level BPE: decoding gives back the text the reward sees
        assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text
    expected_wrong = 0.0 if labels[1] <= 1 else 1 - abs(wrong - labels[1]) / 4
    data, lengths = batch_of(items, responses, tokenizer)
    return data, lengths, [1.0, expected_wrong, 0.0]


@pytest.mark.usefixtures("fresh_reward_module")
@pytest.mark.parametrize("manager", ["naive", "dapo"])
def test_reward_managers_score_pointwise_rows(
    manager: str, prepared: dict[str, Path], tokenizer: Any
) -> None:
    config = composed(
        "grpo-pointwise",
        overrides=["data.max_prompt_length=1024", f"grpo.reward_manager={manager}"],
    )
    rm = reward_manager(config, tokenizer)
    assert (
        type(rm).__name__ == {"naive": "NaiveRewardManager", "dapo": "DAPORewardManager"}[manager]
    )
    data, lengths, expected = pointwise_case(prepared, tokenizer, config)
    out = rm(data, return_dict=True)
    assert_rewards_at_last_token(out, lengths, expected)
    info = out["reward_extra_info"]
    assert set(info) == {"score", "valid_answer", "pred"}
    assert list(info["valid_answer"]) == [1, 1, 0]
    assert all(len(v) == len(lengths) for v in info.values())  # verl asserts equal lengths


@pytest.mark.usefixtures("fresh_reward_module")
def test_dapo_overlong_buffer_penalises_near_limit_answers(
    prepared: dict[str, Path], tokenizer: Any
) -> None:
    config0 = composed("grpo-pointwise", overrides=["data.max_prompt_length=1024"])
    data, lengths, base = pointwise_case(prepared, tokenizer, config0)
    buffer, max_len = 4, min(lengths) + 2  # every answer ends inside the last 4 tokens or later
    config = composed(
        "grpo-pointwise",
        overrides=[
            "data.max_prompt_length=1024",
            "grpo.reward_manager=dapo",
            "grpo.overlong_buffer_enable=true",
            f"grpo.overlong_buffer_len={buffer}",
            "grpo.overlong_buffer_penalty_factor=1.0",
            "grpo.overlong_buffer_log=true",
            f"grpo.max_resp_len={max_len}",
        ],
    )
    sys.modules.pop("custom_module", None)
    out = reward_manager(config, tokenizer)(data, return_dict=True)
    penalties = [min(-(n - (max_len - buffer)) / buffer, 0.0) for n in lengths]
    assert all(p < 0 for p in penalties)
    assert_rewards_at_last_token(
        out, lengths, [b + p for b, p in zip(base, penalties, strict=True)]
    )
    info = out["reward_extra_info"]
    assert {"overlong_reward", "overlong"} <= set(info)
    assert list(info["overlong_reward"]) == pytest.approx(penalties)


@pytest.mark.usefixtures("fresh_reward_module")
def test_naive_manager_scores_pairwise_rows(prepared: dict[str, Path], tokenizer: Any) -> None:
    config = composed("grpo-pairwise", overrides=["data.max_prompt_length=1024"])
    dataset = rl_dataset([str(prepared["pairwise"])], config, tokenizer)
    items = [dataset[i] for i in range(3)]
    truth = [item["reward_model"]["ground_truth"]["preference"] for item in items]
    responses = [
        f"<think>Compared both.</think><better>{truth[0]}</better>",
        f"<think>Compared both.</think><better>{'B' if truth[1] == 'A' else 'A'}</better>",
        "<think>Compared both.</think><better>A or B</better>",
    ]
    data, lengths = batch_of(items, responses, tokenizer)
    out = reward_manager(config, tokenizer)(data, return_dict=True)
    assert_rewards_at_last_token(out, lengths, [1.0, 0.0, 0.0])
    assert list(out["reward_extra_info"]["valid_answer"]) == [1, 1, 0]


@pytest.mark.usefixtures("fresh_reward_module")
def test_dapo_manager_scores_grrm_rows(tmp_path: Path, tokenizer: Any) -> None:
    """GRRM rows (hand-written: `prepare` has no GRRM writer yet) through the grrm-rlvr preset."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    truth = {"A": 8, "B": 5, "C": 5}
    row = {
        "data_source": "grrm/towerblocks",
        "prompt": [{"role": "user", "content": "Rank the translations A, B and C."}],
        "ability": "judge/grrm",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(truth)},
        "extra_info": {"split": "train", "index": 0},
    }
    path = tmp_path / "grrm.parquet"
    pq.write_table(
        pa.Table.from_pylist([row, {**row, "extra_info": {"split": "train", "index": 1}}, row]),
        path,
    )
    config = composed("grrm-rlvr", overrides=["data.max_prompt_length=256"])
    dataset = rl_dataset([str(path)], config, tokenizer)
    tail = "\n\n### Final Ranking:\n\n{rank}\n\n### Scores:\n\n{scores}\n"
    responses = [
        "A is fluent and exact; B and C share one error."
        + tail.format(rank="A > B = C", scores="A: 8, B: 5, C: 5"),
        "A is best, then B, then C." + tail.format(rank="A > B > C", scores="A: 8, B: 5, C: 4"),
        "I cannot decide.",
    ]
    data, lengths = batch_of([dataset[i] for i in range(3)], responses, tokenizer)
    out = reward_manager(config, tokenizer)(data, return_dict=True)
    # row 2: pairs (A,B) and (A,C) agree, (B,C) does not -> 2/3; margin errors 0, 1, 1 -> (1 + .6 + .6) / 3
    assert_rewards_at_last_token(out, lengths, [2.0, 2 / 3 + 2.2 / 3, 0.0])
    info = out["reward_extra_info"]
    assert set(info) == {"score", "valid_answer", "ranking_reward", "score_reward"}
    assert list(info["valid_answer"]) == [1, 1, 0]


@pytest.mark.usefixtures("fresh_reward_module")
@pytest.mark.parametrize("r1_style_format", ["gated", "additive", "off"])
def test_naive_manager_pays_a_policy_with_the_rlvr_recipes_reward_settings(
    r1_style_format: str, tmp_path: Path, tokenizer: Any
) -> None:
    """Policy rows from `prepare_rlvr` (the tiny task's held-out file) through the rlvr preset:
    the reward settings reach `compute_score` as verl's `custom_reward_function.reward_kwargs`."""
    from judgeflow.data.rlvr import prepare_rlvr

    path = tmp_path / "rlvr.parquet"
    prepare_rlvr([sample_path("rlvr/tinyrlvr_val.jsonl")], path)
    config = composed(
        "rlvr",
        overrides=[
            "data.max_prompt_length=256",
            "rlvr.verification_reward=3",
            f"rlvr.r1_style_format={r1_style_format}",
            "rlvr.r1_style_format_reward=0.5",
        ],
    )
    assert config.custom_reward_function.path.endswith("rewards/rlvr/score.py")
    dataset = rl_dataset([str(path)], config, tokenizer)
    items = [dataset[i] for i in range(3)]
    truth = [item["reward_model"]["ground_truth"][0] for item in items]
    responses = [
        f"<think>sure</think><answer>{truth[0]}</answer>",  # right, in the R1 format
        f"<answer>{truth[1]}</answer> {truth[1]}",  # right, no </think>: not the R1 format
        "<think>sure</think><answer>nothing</answer> 0.5",  # wrong, in the format
    ]
    data, lengths = batch_of(items, responses, tokenizer)
    out = reward_manager(config, tokenizer)(data, return_dict=True)
    expected = {
        "gated": [3.0, 0.0, 0.0],
        "additive": [3.5, 3.0, 0.5],
        "off": [3.0, 3.0, 0.0],
    }[r1_style_format]
    assert_rewards_at_last_token(out, lengths, expected)
    info = out["reward_extra_info"]
    assert list(info["verifiable_reward"]) == [3.0, 3.0, 0.0]
    assert all(len(v) == len(lengths) for v in info.values())  # verl asserts equal lengths


@pytest.mark.usefixtures("fresh_reward_module")
def test_naive_manager_pays_the_length_verifiers_in_the_policys_tokens(
    tmp_path: Path, tokenizer: Any, tiny_model: Path
) -> None:
    """verl's reward function sees the decoded response only (its end-of-sequence token
    dropped): `length_tokenizer`, the policy's model, counts it again; open-instruct's formulas."""
    from judgeflow.data.rlvr import prepare_rlvr

    rows = [
        {"messages": [{"role": "user", "content": f"Say {w} words."}], "dataset": d,
         "ground_truth": str(w)}
        for w, d in ((4, "max_length"), (2, "up_to_max_length"), (40, "up_to_max_length"))
    ]  # fmt: skip
    source = tmp_path / "lengths.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "lengths.parquet"
    prepare_rlvr([str(source)], path)
    config = composed(
        "rlvr",
        overrides=[
            f"model.path={tiny_model}", "data.max_prompt_length=256", "rlvr.r1_style_format=off",
            "rlvr.verification_reward=1", "rlvr.max_length_verifier_max_length=10",
        ],
    )  # fmt: skip
    assert config.custom_reward_function.reward_kwargs.length_tokenizer == str(tiny_model)
    dataset = rl_dataset([str(path)], config, tokenizer)
    items = [dataset[i] for i in range(3)]
    wanted = [int(item["reward_model"]["ground_truth"][0]) for item in items]
    responses = ["one two three four five six", "one two three", "one"]
    data, lengths = batch_of(items, responses, tokenizer)
    counts = [n - 1 for n in lengths]  # what the reward sees: the text, without the EOS token
    sources = [item["data_source"] for item in items]
    assert sources == ["max_length", "up_to_max_length", "up_to_max_length"], sources
    assert wanted == [4, 2, 40] and counts[1] > 2 and counts[2] < 40
    expected = [
        1 - abs(counts[0] - 4) / 10,  # max_length: as far off either way
        1 - (counts[1] - 2) / 10,  # up_to_max_length: over by counts[1] - 2
        1.0,  # under the length: whole
    ]
    out = reward_manager(config, tokenizer)(data, return_dict=True)
    assert_rewards_at_last_token(out, lengths, expected)


@pytest.mark.usefixtures("fresh_reward_module")
def test_naive_manager_runs_the_code_rows_tests_with_the_runs_code_settings(
    tmp_path: Path, tokenizer: Any, tiny_model: Path
) -> None:
    """open-instruct's code rows (asserts; stdin/stdout cases), prepared, then paid by verl's own
    naive reward manager: the pass rate, 0 under `rlvr.code_pass_rate_reward_threshold`."""
    from judgeflow.data.rlvr import prepare_rlvr

    asserts = ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(0, 0) == 1"]
    rows = [
        {"messages": [{"role": "user", "content": "Write add(a, b)."}], "dataset": "code",
         "ground_truth": asserts},
        {"messages": [{"role": "user", "content": "Print n + 1."}], "dataset": "code_stdio",
         "ground_truth": [{"input": "1\n", "output": "2\n"}, {"input": "5\n", "output": "7\n"}]},
    ]  # fmt: skip
    source = tmp_path / "code.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "code.parquet"
    prepare_rlvr([str(source)], path)
    responses = ["def add(a, b):\n    return a + b", "print(int(input()) + 1)"]
    for threshold, expected in ((0.0, [2 / 3, 0.5]), (0.6, [2 / 3, 0.0])):
        config = composed(
            "rlvr",
            overrides=[
                f"model.path={tiny_model}", "data.max_prompt_length=256",
                "rlvr.r1_style_format=off", "rlvr.verification_reward=1",
                f"rlvr.code_pass_rate_reward_threshold={threshold}",
            ],
        )  # fmt: skip
        assert config.custom_reward_function.reward_kwargs.code_max_execution_time == 1.0
        dataset = rl_dataset([str(path)], config, tokenizer)
        items = [dataset[i] for i in range(2)]
        assert [item["data_source"] for item in items] == ["code", "code_stdio"]
        data, lengths = batch_of(items, responses, tokenizer)
        out = reward_manager(config, tokenizer)(data, return_dict=True)
        assert_rewards_at_last_token(out, lengths, expected)


def test_verls_rollout_config_refuses_stop_strings_so_judgeflow_says_so() -> None:
    """Why `grpo.stop_strings` is TRL's only: verl 0.6.1's vLLM rollout would pass a `stop` key
    of its rollout config to vLLM's SamplingParams, but its typed RolloutConfig refuses one; a
    run on verl that sets it is told it is ignored. (If verl starts to accept it, this fails:
    render it then.)"""
    import warnings

    from verl.utils.config import omega_conf_to_dataclass

    from judgeflow.config import IgnoredKeyWarning, load_config

    config = composed(
        "rlvr",
        overrides=[
            "engine=verl",
            "grpo.extra_overrides=['+actor_rollout_ref.rollout.stop=[\"</answer>\"]']",
        ],
    )
    assert list(config.actor_rollout_ref.rollout.stop) == ["</answer>"]
    with pytest.raises(Exception, match="unexpected keyword argument 'stop'"):
        omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_config("rlvr", overrides=["engine=verl", "grpo.stop_strings=['</answer>']"])
    said = [str(w.message) for w in caught if issubclass(w.category, IgnoredKeyWarning)]
    assert any("grpo.stop_strings is read only by the trl engine" in m for m in said), said


# ---------------------------------------------------------------------------- a judge pays


def test_the_judge_paid_recipe_on_slurm_serves_the_judge_beside_verl() -> None:
    """rlvr-judged rendered for a cluster: verl's batch reward manager, judgeflow's batched
    reward module, the judge's URL in the allocation and one GPU of the node set aside for it;
    verl's own validation passes."""
    config = composed(
        "rlvr-judged",
        overrides=[
            "reward.judge=/models/judge",  # a store URI: no registry needed to render
            "reward.judge_mode=pairwise",
            "reward.judge_max_new_tokens=64",
            "cluster.backend=slurm",
        ],
    )
    OmegaConf.resolve(config)
    verl_validate(config)
    assert config.reward_model.reward_manager == "batch"
    assert config.custom_reward_function.path.endswith("inference/judge_reward.py")
    kwargs = config.custom_reward_function.reward_kwargs
    # the port is the one the job picks when it starts (a free one); the rendering says so
    assert kwargs.judge_url == "http://127.0.0.1:<free-port>/invocations"
    assert kwargs.judge_mode == "pairwise" and kwargs.judge_max_new_tokens == 64
    assert "judge_weights" not in kwargs
    assert config.trainer.n_gpus_per_node == 7  # 8 on the node, 1 serving the judge


@pytest.mark.usefixtures("fresh_reward_module")
def test_verls_batch_manager_pays_through_a_served_judge(
    tmp_path: Path, tokenizer: Any, tiny_model: Path
) -> None:
    """The judge served as users serve it (`mlflow models serve` of a judge's MLflow model; the
    tiny untrained model, whose replies never parse), called by verl's batch reward manager
    through judgeflow's module: every rollout reaches the judge, none is paid, all are counted."""
    from servers import Service, free_port

    from judgeflow.data.rlvr import prepare_rlvr
    from judgeflow.inference.pyfunc import save_judge_model

    model = save_judge_model(
        tmp_path / "judge", {"model_uri": str(tiny_model), "mode": "pointwise", "max_new_tokens": 8}
    )
    port = free_port()
    mlflow = str(Path(sys.executable).parent / "mlflow")
    path_env = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    command = [mlflow, "models", "serve", "-m", str(model), "--env-manager", "local",
               "-h", "127.0.0.1", "-p", str(port), "-w", "1"]  # fmt: skip
    service = Service(
        command,
        f"http://127.0.0.1:{port}/ping",
        tmp_path / "serve.log",
        {**os.environ, "PATH": path_env, "TMPDIR": str(tmp_path)},
    )
    service.start(timeout=240)
    try:
        path = tmp_path / "judged.parquet"
        prepare_rlvr(
            [sample_path("rlvr_judged/tinyjudged_val.jsonl")], path, judge_datasets=["judge"]
        )
        config = composed(
            "rlvr-judged",
            overrides=[
                "data.max_prompt_length=256",
                "reward.judge=null",
                f"reward.judge_url=http://127.0.0.1:{port}/invocations",
                "reward.judge_mode=pointwise",
                "reward.judge_max_new_tokens=8",
                "reward.judge_batch_size=2",
                "rlvr.r1_style_format=off",
            ],
        )
        dataset = rl_dataset([str(path)], config, tokenizer)
        items = [dataset[i] for i in range(3)]
        responses = ["The capital is Paris.", "Sorry, no idea.", "Maybe."]
        data, lengths = batch_of(items, responses, tokenizer)
        out = reward_manager(config, tokenizer)(data, return_dict=True)
    finally:
        service.stop()
    assert_rewards_at_last_token(out, lengths, [0.0, 0.0, 0.0])
    info = out["reward_extra_info"]
    assert list(info["judged"]) == [1.0, 1.0, 1.0]
    assert list(info["judge_format_failure"]) == [1.0, 1.0, 1.0]
    # the server was asked, not skipped: 3 rows in requests of 2 (verl loaded the module by path)
    clients = list(sys.modules["custom_module"]._clients.values())
    assert [(type(c).__name__, c.calls) for c in clients] == [("ServedJudge", 2)]
