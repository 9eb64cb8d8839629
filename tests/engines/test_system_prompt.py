"""`data.system_prompt` (issue 36 part 4, in part): a policy's system turn, set once when the data
is prepared, and the prompt each consumer renders from the prepared rows is the same text:
LLaMA-Factory's SFT (its own sharegpt converter and `chatml` template), TRL's GRPO (its
`maybe_apply_chat_template`), verl's (`RLHFDataset`) and the evaluation (`render_prompts`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from judgeflow.config import load_config
from judgeflow.data.rlvr import prepare_rlvr
from judgeflow.data.sft import prepare_sft_messages
from judgeflow.engines.generate import render_prompts
from judgeflow.evaluation import params_from as evaluation_params

SYSTEM = "Answer in one word, inside <answer></answer>."
QUESTION = "Which animal says moo?"


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _prepared(tmp_path: Path, system_prompt: str | None) -> tuple[list[Any], list[Any]]:
    """The RLVR rows' prompts and the SFT rows' messages, prepared with `system_prompt`."""
    own_system = {"role": "system", "content": "You are a helpful assistant."}
    rlvr = _jsonl(tmp_path / "rlvr.jsonl", [
        {"messages": [{"role": "user", "content": QUESTION}], "dataset": "string_f1",
         "ground_truth": "cow"},
        {"messages": [own_system, {"role": "user", "content": "Which animal barks?"}],
         "dataset": "string_f1", "ground_truth": "dog"},
    ])  # fmt: skip
    sft = _jsonl(tmp_path / "sft.jsonl", [
        {"messages": [own_system, {"role": "user", "content": QUESTION},
                      {"role": "assistant", "content": "<answer>cow</answer>"}]},
    ])  # fmt: skip
    out = tmp_path / ("with" if system_prompt else "without")
    result = prepare_rlvr([str(rlvr)], out / "rlvr.parquet", system_prompt=system_prompt)
    assert result.report["parameters"].get("system_prompt") == system_prompt
    sft_result = prepare_sft_messages([str(sft)], out / "sft.parquet", system_prompt=system_prompt)
    prompts = [r["prompt"] for r in pq.read_table(result.train_path).to_pylist()]
    messages = [r["messages"] for r in pq.read_table(sft_result.output_path).to_pylist()]
    return prompts, messages


def test_every_prompt_gets_the_system_turn_in_place_of_its_own(tmp_path: Path) -> None:
    prompts, messages = _prepared(tmp_path, SYSTEM)
    for turns in [*prompts, *messages]:
        assert turns[0] == {"role": "system", "content": SYSTEM}
        assert [t["role"] for t in turns[1:]].count("system") == 0
    assert prompts[1][1] == {"role": "user", "content": "Which animal barks?"}
    assert messages[0][-1] == {"role": "assistant", "content": "<answer>cow</answer>"}
    # unset, the rows are as they came (the second keeps its own system turn)
    plain, plain_sft = _prepared(tmp_path, None)
    assert plain[0] == [{"role": "user", "content": QUESTION}]
    assert plain[1][0]["content"] == plain_sft[0][0]["content"] == "You are a helpful assistant."


@pytest.mark.parametrize("chat_template", ["tokenizer", "tulu", "r1_simple_chat_postpend_think"])
def test_sft_grpo_on_both_engines_and_the_evaluation_render_the_same_prompt(
    tmp_path: Path, tiny_model: Path, chat_template: str
) -> None:
    """With the tokenizer's own template (`tokenizer`) and with two of open-instruct's (one whose
    prompt ends inside the assistant's turn), each consumer's own code renders the same text."""
    pytest.importorskip("verl")
    from llamafactory.data import get_template_and_fix_tokenizer
    from llamafactory.data.converter import SharegptDatasetConverter
    from llamafactory.data.parser import get_dataset_list
    from llamafactory.hparams import DataArguments
    from transformers import AutoTokenizer
    from trl.data_utils import maybe_apply_chat_template
    from verl.trainer.main_ppo import create_rl_dataset

    from judgeflow.engines.generate import HFGenerator
    from judgeflow.engines.llamafactory import params_from as sft_params
    from judgeflow.engines.llamafactory import write_dataset_info
    from judgeflow.engines.templated_sft import IGNORE_INDEX, tokenize_rows
    from judgeflow.engines.trl import params_from as trl_params
    from judgeflow.engines.trl.training import policy_tokenizer
    from judgeflow.engines.verl import compose_verl_config, verl_overrides

    prompts, messages = _prepared(tmp_path, SYSTEM)
    cfg = load_config("rlvr", overrides=[
        f"model.path={tiny_model}", "data.max_prompt_length=256",
        f"data.chat_template={chat_template}"])  # fmt: skip
    template = cfg.data.chat_template_jinja
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)

    _, generator_tokenizer = HFGenerator(
        tiny_model, **{k: v for k, v in evaluation_params(cfg).items() if k == "chat_template"}
    )._model_and_tokenizer()
    evaluation = render_prompts(generator_tokenizer, [prompts[0]])[0]
    grpo = trl_params(cfg, tmp_path / "trl")
    trl = maybe_apply_chat_template(
        {"prompt": prompts[0]}, policy_tokenizer(grpo.model_path, grpo.chat_template)
    )["prompt"]

    config = compose_verl_config(verl_overrides(
        cfg, train_files=["/d/t.parquet"], val_files=["/d/v.parquet"], checkpoint_dir="/c",
    ))  # fmt: skip
    train = str(tmp_path / "with" / "rlvr.parquet")
    verl_row = create_rl_dataset([train], config.data, tokenizer, None, is_train=True)[0]
    ids = verl_row["input_ids"][verl_row["attention_mask"].bool()].tolist()
    verl = tokenizer.decode(ids)
    assert tokenizer.decode(verl_row["raw_prompt_ids"]) == verl  # what the rollout is given

    sft_parquet = tmp_path / "with" / "sft.parquet"
    if template is None:  # LLaMA-Factory's own: the dataset as judgeflow registers it, read by
        # its parser, through its sharegpt converter, then its template
        write_dataset_info(tmp_path / "lf", "sft", sft_parquet)
        [attr] = get_dataset_list(["sft"], str(tmp_path / "lf"))
        data_args = DataArguments(template=cfg.sft.template)
        converted = SharegptDatasetConverter(attr, data_args)({"messages": messages[0]})
        assert converted["_system"] == SYSTEM
        lf_template = get_template_and_fix_tokenizer(tokenizer, data_args)
        prompt_ids, _ = lf_template.encode_oneturn(
            tokenizer, converted["_prompt"] + converted["_response"], system=converted["_system"]
        )
        sft = tokenizer.decode(prompt_ids)
    else:  # rendered by judgeflow with the template, trained on by LLaMA-Factory as they are
        params = sft_params(cfg, tmp_path / "sft")
        assert params.chat_template == template
        done = tokenize_rows(sft_parquet, params.model_path, template, 512, tmp_path / "tok")
        from datasets import load_from_disk

        [row] = load_from_disk(str(done.path))["train"]
        masked = sum(label == IGNORE_INDEX for label in row["labels"])
        sft = tokenizer.decode(row["input_ids"][:masked])
        reply = tokenizer.decode(row["input_ids"][masked:])
        assert "<answer>cow</answer>" in reply and reply.endswith(tokenizer.eos_token)

    assert SYSTEM in evaluation and QUESTION in evaluation
    assert evaluation == trl == verl == sft, (evaluation, trl, verl, sft)
    if template is not None:
        assert evaluation == tokenizer.apply_chat_template(
            prompts[0], chat_template=template, add_generation_prompt=True, tokenize=False
        )


def test_judgeflow_evaluate_prepares_a_policys_data_with_its_system_prompt(
    tmp_path: Path, tiny_model: Path
) -> None:
    """`judgeflow evaluate --data rows.jsonl` asks the policy as its training did."""
    from judgeflow.cli.evaluate import evaluation_file

    rows = _jsonl(tmp_path / "rows.jsonl", [
        {"messages": [{"role": "user", "content": QUESTION}], "dataset": "string_f1",
         "ground_truth": "cow"},
    ])  # fmt: skip
    cfg = load_config(
        "rlvr", overrides=[f"model.path={tiny_model}", f"data.system_prompt={SYSTEM}"]
    )
    prepared = evaluation_file(cfg, str(rows), tmp_path / "work")
    [row] = pq.read_table(prepared).to_pylist()
    assert row["prompt"][0] == {"role": "system", "content": SYSTEM}


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_system_prompt_is_refused(empty: str) -> None:
    from judgeflow.config import ConfigError

    with pytest.raises(ConfigError, match="system_prompt"):
        load_config("rlvr", overrides=[f"data.system_prompt='{empty}'"])
