"""What a run starts from: the policy model and the training data, with how it is prepared."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

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


class MixerSource(Section):
    """One dataset of a mixture, as open-instruct's `--dataset_mixer_list` names it (a name and an
    amount) with its `--dataset_mixer_list_splits` split."""

    source: str = Field(
        ..., min_length=1, description="file://, hf://, s3://, sample:// URI or a local path"
    )
    amount: int | float = Field(
        1.0,
        gt=0,
        description="a float is a share of the split's rows (1.0 all of them, 0.5 half, 3.0 each "
        "row three times), an integer a row count (1 is one row): open-instruct's rule",
    )
    split: str = Field(
        "train",
        min_length=1,
        pattern=r"^[A-Za-z0-9_]+$",
        description="the files of this split (`train`, `test`, …: named by their file or folder "
        "names, as the Hub names them); a source whose files name no split is all `train`",
    )
    revision: str | None = Field(None, description="dataset revision (hf:// commit or tag)")
    remap_verifier: dict[str, str] = Field(
        default_factory=dict,
        description="this source's rows only: `dataset` name -> verifier, before rlvr.remap_verifier",
    )


class DataConfig(Section):
    """Where the training data comes from and how it is prepared."""

    source: str | None = Field(
        None,
        description="file://, hf://, s3://, sample:// URI or a local path (or data.mixer)",
    )
    mixer: list[MixerSource] | None = Field(
        None,
        min_length=1,
        description="rlvr: several sources, each an amount of one split, trained on together "
        "(open-instruct's --dataset_mixer_list); in place of data.source",
    )
    eval_mixer: list[MixerSource] | None = Field(
        None,
        min_length=1,
        description="rlvr: the validation rows as a mixture (open-instruct's "
        "--dataset_mixer_eval_list); in place of data.val_source",
    )
    mixer_seed: int = Field(
        42,
        description="which rows a mixer amount below a whole copy takes (open-instruct's "
        "--dataset_config_seed)",
    )
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
    chat_template: str | None = Field(
        None,
        min_length=1,
        description="a policy's chat template: one of open-instruct's names (`tulu`, "
        "`r1_simple_chat_postpend_think`, … its --chat_template_name), a .jinja file or Jinja "
        "text; GRPO on either engine, the evaluation, SFT and the prompt-length filter all render "
        "with it. Unset or `tokenizer`: the tokenizer's own",
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

    @model_validator(mode="after")
    def _one_source(self) -> DataConfig:
        if (self.source is None) == (self.mixer is None):
            raise ValueError(
                "data.mixer is in place of data.source, and both are set in one place: set "
                "data.source: null with a mixer"
                if self.mixer
                else "set data.source (or data.mixer): the data to train on"
            )
        if self.val_source is not None and self.eval_mixer is not None:
            raise ValueError(
                "data.eval_mixer is in place of data.val_source: set data.val_source: null"
            )
        from judgeflow.config.redaction import has_url_credentials

        for name, mix in (("mixer", self.mixer), ("eval_mixer", self.eval_mixer)):
            for i, part in enumerate(mix or ()):
                if has_url_credentials(part.source):
                    raise ValueError(
                        f"data.{name}[{i}].source holds credentials, which a mixer does not "
                        "keep out of logs: give the URL without them and the credentials in "
                        "the environment (AWS_* for s3://, HF_TOKEN for hf://)"
                    )
        return self

    @field_validator("chat_template")
    @classmethod
    def _known_template(cls, value: str | None) -> str | None:
        if value is None:
            return value
        from judgeflow.config.chat_templates import ChatTemplateError, chat_template_text

        try:
            chat_template_text(value)
        except (ChatTemplateError, OSError) as exc:
            raise ValueError(str(exc)) from None
        return value

    @property
    def chat_template_jinja(self) -> str | None:
        """The Jinja `chat_template` stands for (None: the tokenizer's own)."""
        from judgeflow.config.chat_templates import chat_template_text

        return chat_template_text(self.chat_template)

    @property
    def has_val_data(self) -> bool:
        """Validation rows come from data.val_source or data.eval_mixer, not a split."""
        return self.val_source is not None or self.eval_mixer is not None

    @property
    def label(self) -> str:
        """The data as runs and tasks name it: the source, or the mixture's sources."""
        return self.source or mixer_label(self.mixer or [])


def mixer_label(mixer: list[MixerSource]) -> str:
    """`a 1.0 + b 64`: each source with its amount (and its split when not train)."""
    from judgeflow.config.redaction import strip_credentials

    return " + ".join(
        f"{strip_credentials(p.source)} {p.amount}"
        + (f" [{p.split}]" if p.split != "train" else "")
        for p in mixer
    )
