"""What a run starts from: the policy model and the training data, with how it is prepared."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from judgeflow.config.section import Section

#: Settings that name data to download (`judgeflow.storage.download`); a URL there may hold the
#: credentials its server wants (`judgeflow.config.secrets.keep_url_credentials`).
DATA_URL_KEYS = ("data.source", "data.val_source", "sft.source")


class ModelConfig(Section):
    """The policy model that training starts from."""

    path: str = Field("Qwen/Qwen3-8B", description="HF model id or local directory of the policy")


class GrrmDataConfig(Section):
    """TowerBlocks-MT-Ranking-style columns and the RL augmentation of the GRRM recipe."""

    src_key: str = Field("src_text", description="column with the source texts")
    src_lang_key: str = Field("src_lang", description="column with the source languages")
    trg_lang_key: str = Field("trg_lang", description="column with the target languages")
    mt_key: str = Field("mt_texts", description="column with the candidate translations")
    score_key: str = Field("scores", description="column with the integer scores")
    analysis_key: str = Field(
        "analysis", description="column with the analysis text (the SFT target)"
    )
    subgroup_augment: int = Field(4, ge=0, description="subgroups sampled per group of n > 2")
    shuffle_augment: int = Field(4, ge=0, description="extra candidate orders per (sub)group")


class DataConfig(Section):
    """Where the training data comes from and how it is prepared."""

    source: str = Field(..., description="file://, hf://, s3://, sample:// URI or a local path")
    revision: str | None = Field(None, description="dataset revision (hf:// commit or tag)")
    val_source: str | None = Field(None, description="separate validation source; else split")
    format: Literal["auto", "openjudge", "rewardbench2"] = Field(
        "auto",
        description="judge data format: `openjudge`, `rewardbench2`, or `auto` (from the columns)",
    )
    val_fraction: float = Field(
        0.1,
        ge=0.0,
        lt=1.0,
        description="share of data.source held out for validation when data.val_source is unset",
    )
    balance_positions: bool = Field(
        False, description="pairwise: swap A/B in half the rows so position is no shortcut"
    )
    seed: int = Field(
        0,
        description="seed of the validation split, the A/B swaps, the augmentation and the trainers",
    )
    max_prompt_length: int = Field(4096, gt=0, description="longest prompt, in tokens")
    max_response_length: int = Field(2048, gt=0, description="longest completion, in tokens")
    filter_overlong_prompts: bool = Field(
        True, description="drop prompts longer than max_prompt_length (the model's tokenizer)"
    )
    skip_invalid: bool = Field(False, description="drop invalid rows (reported) instead of failing")
    system_prompt: str | None = Field(
        None,
        min_length=1,
        pattern=r"\S",
        description="a policy's system turn: every prompt (RLVR rows and the run's SFT rows) gets "
        "it in place of its own system turns, when the data is prepared, so SFT, GRPO on either "
        "engine and the evaluation all render the same conversation",
    )
    chosen_label: int = Field(4, ge=0, le=4, description="pointwise label of a RewardBench2 chosen")
    rejected_label: int = Field(0, ge=0, le=4, description="pointwise label of a rejected")
    grrm: GrrmDataConfig = Field(
        default_factory=GrrmDataConfig, description="GRRM columns and augmentation"
    )
    shards: int = Field(1, ge=1, description="fan preparation out over this many Ray tasks")
    ray_address: str | None = Field(
        None, description="Ray cluster for sharded preparation; local if unset"
    )
