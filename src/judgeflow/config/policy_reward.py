"""What pays a policy (mode=rlvr): the verifiers' reward, and a trained judge beside them."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from judgeflow.config.redaction import strip_credentials
from judgeflow.config.section import Section


class RlvrConfig(Section):
    """Policy RLVR's reward, as open-instruct's `grpo_fast` composes it (`judgeflow.rewards.rlvr`):
    each verifier's verdict x `verification_reward`, summed over a row's verifiers, then the R1
    format reward and the non-stop penalty. Read by both engines (TRL's reward functions, verl's
    `custom_reward_function.reward_kwargs`) and by the evaluation."""

    verification_reward: float = Field(
        10.0, description="what a correct verifier verdict pays (open-instruct's default: 10)"
    )
    r1_style_format: Literal["gated", "additive", "off"] = Field(
        "gated",
        description="the R1 format (`</think>` then `<answer>…</answer>`): `gated` pays the "
        "verifiable reward only when it holds, `additive` adds r1_style_format_reward, `off`",
    )
    r1_style_format_reward: float = Field(
        1.0, description="what the R1 format pays with r1_style_format=additive"
    )
    non_stop_penalty: bool = Field(
        False, description="a response cut off at the length limit scores non_stop_penalty_value"
    )
    non_stop_penalty_value: float = Field(-10.0, description="the truncated response's score")
    remap_verifier: dict[str, str] = Field(
        default_factory=dict,
        description="dataset name -> verifier (open-instruct's --remap_verifier), e.g. "
        "{math_ground_truth: math}; applied when the data is prepared",
    )
    verifier_timeout_s: float = Field(
        10.0, gt=0, description="one check's time limit; past it the response scores 0"
    )
    verifier_max_chars: int = Field(
        100_000, gt=0, description="longer responses are not checked and score 0"
    )
    verifier_memory_mb: int = Field(2048, gt=0, description="the verifier process's memory cap")
    max_length_verifier_max_length: int = Field(
        32768,
        gt=0,
        description="the length verifiers' scale (open-instruct's): `max_length` pays "
        "1 - |tokens - label| / this, `up_to_max_length` 1 up to the label, then "
        "1 - (tokens - label) / this; tokens in the policy's tokenizer",
    )
    code_max_execution_time: float = Field(
        1.0,
        gt=0,
        description="`code` / `code_stdio`: each test's time limit in seconds (open-instruct's; "
        "`code_stdio`: its alarm is this rounded up)",
    )
    code_pass_rate_reward_threshold: float = Field(
        0.0,
        ge=0,
        le=1,
        description="`code` / `code_stdio` pay the share of tests passed, 0 below this share",
    )
    code_apply_perf_penalty: bool = Field(
        False,
        description="`code` / `code_stdio`: a passed test counts (T - runtime) / T, "
        "T = code_max_execution_time",
    )
    code_memory_mb: int = Field(
        2048, gt=0, description="`code` / `code_stdio`: the memory cap of the tests' process"
    )

    @field_validator("r1_style_format", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        """YAML 1.1 reads a bare `off` as false: `--set rlvr.r1_style_format=off` means "off"."""
        return "off" if value is False else value

    def reward_kwargs(self) -> dict[str, Any]:
        """`judgeflow.rewards.rlvr.score.compute_score`'s keywords. Not `remap_verifier`: it is
        applied once, when the data is prepared (the prepared rows name their verifiers)."""
        return self.model_dump(mode="json", exclude={"remap_verifier"})


class RewardConfig(Section):
    """A trained judge as a policy's reward (mode=rlvr): rows whose `dataset` is one of
    `judge_datasets` are scored by it, beside the verifiers, and paid as a verifier is
    (`judgeflow.inference.judge_reward`): x `rlvr.verification_reward`, behind the R1 format gate."""

    judge: str | None = Field(
        None,
        description="the judge that pays: models:/NAME@alias, models:/NAME/VERSION or the store "
        "URI of its weights (then set judge_mode); a run records the version it resolved to",
    )
    judge_panel: list[str] = Field(
        default_factory=list,
        description="more judges of reward.judge's mode that pay with it: each rollout is paid "
        "the lowest of their scores, so a wrong answer must fool every one of them (judges "
        "trained apart have blind spots apart). Each as reward.judge is named (a registered one "
        "is pinned to its version; with reward.judge_recipe one with no champion yet is trained "
        "first, data.seed + its place in the panel); judged in the training process (TRL run "
        "locally), not where a judge is served",
    )
    judge_url: str | None = Field(
        None,
        description="an already-served judge instead: MLflow's scoring server (`mlflow models "
        "serve -m models:/…`: its /invocations URL) or an OpenAI-compatible server (vLLM, "
        "SGLang, TGI, llama.cpp, a hosted API: its /v1 URL; a key from the environment's "
        "JUDGEFLOW_JUDGE_API_KEY, sent over https or to a loopback address only); needs "
        "judge_mode and judge_max_new_tokens",
    )
    judge_mode: Literal["pointwise", "pairwise", "grrm", "llm"] | None = Field(
        None,
        description="the judge's mode; a registered judge's own is used when unset. `llm`: a "
        "general LLM at judge_url (OpenAI-compatible) asked with open-instruct's LM-judge "
        "prompts, scored by its extractors (judgeflow.rewards.rlvr.llm_judge), for rows of its "
        "LM-judge verifiers (general-quality, general-quality_ref, general-quality_rubric, "
        "general-web_instruct_general_verifier)",
    )
    judge_datasets: list[str] = Field(
        default_factory=lambda: ["judge", "general-quality", "general-quality_ref"],
        description="row `dataset` names the judge pays (open-instruct's LM-judge names too); "
        "with judge_mode llm, unset: every LM-judge verifier judgeflow pays",
    )
    judge_batch_size: int = Field(
        16,
        gt=0,
        description="judge rows per generation call (per request when served): a rollout "
        "pointwise, a rollout in both orders pairwise, a prompt's group for GRRM",
    )
    judge_max_new_tokens: int | None = Field(
        None, gt=0, description="the judge's reply length; unset: the registered judge's own"
    )
    judge_concurrency: int = Field(
        4, gt=0, description="a served judge (judge_url, or verl's): requests in flight at once"
    )
    judge_api: Literal["auto", "mlflow", "openai"] = Field(
        "auto",
        description="how judge_url is spoken to: `mlflow` (POST /invocations), `openai` "
        "(/v1/chat/completions, one prompt a request, parsed as the judge in process parses "
        "its replies); `auto`: a URL ending in /invocations is mlflow, one with /v1 openai",
    )
    judge_model: str | None = Field(
        None,
        description="the model served at judge_url: OpenAI's model name (unset: the only one "
        "GET /v1/models lists); a run pins it to what answers there (an MLflow judgeflow judge "
        "says which weights it serves), so the cache key and lineage name it",
    )
    judge_timeout_s: float = Field(
        600.0,
        gt=0,
        description="how long one request to a served judge may wait for its answer (and "
        "`mlflow models serve -t` of the judge served inside the allocation)",
    )
    judge_retry_s: float = Field(
        600.0,
        ge=0,
        description="how long a served judge's failures (no connection, a dropped one, a "
        "timeout, HTTP 429 or 5xx) are retried, with backoff, before the stage stops "
        "(resumable); a failed call is never paid 0",
    )
    judge_gpus: int = Field(
        1,
        ge=0,
        description="Slurm (and verl anywhere): GPUs of the training node set aside to serve "
        "the judge inside the allocation (the policy trains on the rest; a TRL job without "
        "GPUs serves it on CPU)",
    )
    judge_recipe: str | None = Field(
        None,
        description="the judge recipe that trains reward.judge (models:/NAME@ALIAS) when NAME "
        "has no version at ALIAS yet: the rlvr-judged flow runs it first, with this run's "
        "tracking server and store; its register.model_name must be NAME",
    )
    judge_profile: str | None = Field(
        None, description="the profile reward.judge_recipe runs with (e.g. tiny-verified)"
    )
    judge_max_failure_rate: float = Field(
        0.5,
        ge=0,
        le=1,
        description="stop the run (JudgeFailing) when more of the last 512 rollouts the judge "
        "was shown than this got a reply that did not parse, once it has been shown 64 "
        "(judgeflow.inference.judge_failures); 1 never stops",
    )

    @model_validator(mode="before")
    @classmethod
    def _llm_datasets(cls, data: Any) -> Any:
        """An LLM judge pays open-instruct's LM-judge rows unless told which."""
        if isinstance(data, dict) and data.get("judge_mode") == "llm":
            from judgeflow.rewards.rlvr.llm_judge import LLM_VERIFIERS

            data.setdefault("judge_datasets", list(LLM_VERIFIERS))
        return data

    @model_validator(mode="after")
    def _one_judge(self) -> RewardConfig:
        if self.judge and self.judge_url:
            raise ValueError("reward.judge and reward.judge_url both name a judge: set one")
        if self.judge_url and not (self.judge_mode and self.judge_max_new_tokens):
            raise ValueError(
                "reward.judge_url needs reward.judge_mode and reward.judge_max_new_tokens"
            )
        if self.judge_url:
            served_api(self.judge_url, self.judge_api)
        elif self.judge_api != "auto" or self.judge_model:
            raise ValueError(
                "reward.judge_api and reward.judge_model describe a judge served at "
                "reward.judge_url: set it, or unset them"
            )
        if self.judge and not self.judge.startswith("models:/") and not self.judge_mode:
            raise ValueError(
                f"reward.judge={self.judge} is not a registered version: say which judge it is "
                "with reward.judge_mode (pointwise, pairwise or grrm)"
            )
        if self.judge_mode == "llm":
            self._check_llm()
        if self.judge_panel:
            self._check_panel()
        if (self.judge_recipe or self.judge_profile) and "@" not in (self.judge or ""):
            raise ValueError(
                "reward.judge_recipe / reward.judge_profile train the judge that reward.judge "
                f"names when it has no version at its alias: reward.judge={self.judge} needs to "
                "be models:/NAME@ALIAS (e.g. models:/judge-tiny-verified@champion)"
            )
        if self.judge_profile and not self.judge_recipe:
            raise ValueError("reward.judge_profile needs reward.judge_recipe (the judge's recipe)")
        return self

    def _check_llm(self) -> None:
        from judgeflow.rewards.rlvr.llm_judge import LLM_VERIFIERS, REFUSED

        if not self.judge_url or served_api(self.judge_url, self.judge_api) != "openai":
            raise ValueError(
                "reward.judge_mode=llm asks a general LLM with open-instruct's LM-judge prompts "
                "at an OpenAI-compatible reward.judge_url (…/v1); a judge judgeflow trained "
                "(reward.judge) is pointwise, pairwise or grrm"
            )
        for name in self.judge_datasets:
            if name.lower() in REFUSED:
                raise ValueError(f"reward.judge_datasets: {name}: {REFUSED[name.lower()]}")
            if name.lower() not in LLM_VERIFIERS:
                raise ValueError(
                    f"reward.judge_datasets: {name} is no LM-judge verifier, so an LLM judge "
                    f"(reward.judge_mode=llm) has no prompt for it; it pays {', '.join(LLM_VERIFIERS)}"
                )

    def _check_panel(self) -> None:
        if not self.judge:
            raise ValueError(
                "reward.judge_panel pays beside reward.judge, in the training process: set "
                "reward.judge (a judge served at reward.judge_url cannot sit on a panel)"
            )
        named = [self.judge, *self.judge_panel]
        if len(set(named)) < len(named):
            raise ValueError(
                f"reward.judge_panel names a judge twice ({', '.join(named)}): the same judge "
                "again finds no blind spot the first missed"
            )
        if not self.judge_mode and any(not j.startswith("models:/") for j in named):
            raise ValueError(
                "reward.judge_panel names weights that are not a registered version: say which "
                "judges they are with reward.judge_mode (every judge of a panel has one mode)"
            )

    @property
    def paid_by_judge(self) -> bool:
        return bool(self.judge or self.judge_url)


def served_api(url: str, api: str = "auto") -> Literal["mlflow", "openai"]:
    """The protocol a served judge at `url` speaks: `api` itself, or (`auto`) what the URL's
    path says: MLflow's scoring server ends in /invocations, an OpenAI-compatible server has a
    /v1 (its base, or its /v1/chat/completions)."""
    if api in ("mlflow", "openai"):
        return api  # type: ignore[return-value]
    if api != "auto":
        raise ValueError(f"reward.judge_api={api!r}: auto, mlflow or openai")
    from urllib.parse import urlsplit

    path = urlsplit(url).path.rstrip("/")
    if path.endswith("/invocations"):
        return "mlflow"
    if re.search(r"/v1(/|$)", path):
        return "openai"
    raise ValueError(
        f"reward.judge_url={strip_credentials(url)}: its path says neither MLflow's scoring "
        "server (…/invocations) nor an OpenAI-compatible server (…/v1): set reward.judge_api "
        "to mlflow or openai"
    )
