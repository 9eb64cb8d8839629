"""open-instruct launch scripts as judgeflow recipes (`judgeflow import open-instruct`).

A ``grpo_fast.py`` script, as open-instruct's users write them: shell line continuations,
comments, ``export`` lines, and usually Beaker's ``mason.py`` wrapper (its flags, then ``--``,
then ``python open_instruct/grpo_fast.py`` and its flags). Every flag is either mapped onto
judgeflow keys (over a preset, ``rlvr`` by default) or listed with why it has none: nothing is
dropped silently. How each maps follows ``docs/design/presets.md``, where the Tulu 3.1 8B script
was mapped by hand. A flag the script leaves unset takes grpo_fast's default (open-instruct
e6c3044, :data:`OPEN_INSTRUCT_DEFAULTS`) where judgeflow maps it; every other key keeps the
preset's value (the rlvr preset's are the Tulu 3.1 8B run's, with the defaults of 686a521).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Flag", "Imported", "import_script", "parse_script", "recipe_yaml"]

_GRPO = re.compile(r"(^|/)grpo_fast\.py$|^open_instruct\.grpo_fast$")
#: What starts Python: not a command of the script's own.
_LAUNCHERS = {"python", "python3", "uv", "run", "-m", "accelerate", "launch", "&&"}
#: The name under which what runs before grpo_fast.py (`source …` and such) is listed.
BEFORE = "(run before grpo_fast.py)"


@dataclass(frozen=True)
class Flag:
    """One flag of the script as written: its name (no dashes), its values, where it came from."""

    name: str
    values: tuple[str, ...]
    wrapper: bool = False  # mason.py's, not grpo_fast's
    default: bool = False  # not in the script: grpo_fast's default

    @property
    def shown(self) -> str:
        words = [self.name if self.name == BEFORE else f"--{self.name}", *self.values]
        return " ".join(words) + (" (unset: open-instruct's default)" if self.default else "")


@dataclass
class Imported:
    """What the script becomes: the keys set (dotted), and per flag how it mapped."""

    keys: dict[str, Any] = field(default_factory=dict)
    #: (flag, the keys it set, a note) for each flag that maps
    mapped: list[tuple[Flag, dict[str, Any], str]] = field(default_factory=list)
    #: (flag, why it has no counterpart) for each that does not
    unmapped: list[tuple[Flag, str]] = field(default_factory=list)
    #: (flag, how the run differs) for each that maps, but not to the same behaviour
    differences: list[tuple[Flag, str]] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)  # `export` lines of the script


def parse_script(text: str) -> tuple[list[Flag], dict[str, str]]:
    """The mason.py and grpo_fast.py flags of a launch script, in order, and its variables
    (`export` lines, assignments, ones set before the command), substituted into the flags.
    The command ends at the first `;`, `&`, `|` or redirection, as the shell ends it."""
    joined = re.sub(r"\\\r?\n", " ", text)
    flags: list[Flag] = []
    variables: dict[str, str] = {}
    commands = 0
    for line in joined.splitlines():
        words = _words(line)
        if words[:1] == ["export"] or (words and all(_ASSIGNMENT.match(w) for w in words)):
            for word in words[words[:1] == ["export"] :]:
                name, _, value = word.partition("=")
                variables[name] = _substitute(value, variables)
            continue
        start = next((i for i, w in enumerate(words) if _GRPO.search(w)), None)
        if start is None:
            continue
        commands += 1
        if commands > 1:
            raise ValueError("the script runs grpo_fast.py more than once: import one at a time")
        end = next((i for i, w in enumerate(words[start:], start) if _OPERATOR.match(w)), None)
        words = [_substitute(w, variables) for w in words[: end or len(words)]]
        mason = next((i for i, w in enumerate(words[:start]) if w.endswith("mason.py")), None)
        before = words[:start]
        if mason is not None:
            stop = words.index("--", mason) if "--" in words[mason:start] else start
            flags += _flags(words[mason + 1 : stop], wrapper=True)
            before = words[stop + 1 : start]
        for word in before:  # `VAR=value python …`: set for the command
            if match := _ASSIGNMENT.match(word):
                variables[match.group(1)] = word.partition("=")[2]
        if commands_before := [
            w for w in before if w not in _LAUNCHERS and not _ASSIGNMENT.match(w)
        ]:
            flags.append(Flag(BEFORE, tuple(commands_before), wrapper=True))
        flags += _flags(words[start + 1 :], wrapper=False)
    if not flags:
        raise ValueError("no `grpo_fast.py` command in the script (judgeflow imports those)")
    return flags, variables


_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_OPERATOR = re.compile(r"^[;&|<>()]+$")
_REDIRECTION = re.compile(r"(?<!\S)\d*(?:>>|>&|&>|>|<)(?:&?\d+|\s*[^\s;&|]+)")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _words(line: str) -> list[str]:
    """A line's words as the shell splits them: a `#` that starts a word starts a comment,
    redirections are dropped, `;`, `&`, `|` are words of their own."""
    code = _without_comment(line)
    lexer = shlex.shlex(_REDIRECTION.sub(" ", code), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError as exc:
        raise ValueError(f"cannot read this line of the script ({exc}): {line[:120]}") from exc


def _without_comment(line: str) -> str:
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _substitute(word: str, variables: dict[str, str]) -> str:
    """`$NAME` and `${NAME}` replaced by the script's value; one it does not set is kept."""
    return _VARIABLE.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), word)


def _flags(words: list[str], *, wrapper: bool) -> list[Flag]:
    out: list[Flag] = []
    for word in words:
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            out.append(Flag(name.replace("-", "_"), (value,) if eq else (), wrapper))
        elif out:
            last = out[-1]
            out[-1] = Flag(last.name, (*last.values, word), wrapper)
        # words before the first flag (the interpreter, `uv run`) are not flags
    return out


def _true(values: tuple[str, ...]) -> bool:
    if not values:
        return True
    word = values[0].lower()
    if word not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError(f"expected true or false, got {values[0]!r}")
    return word in ("true", "1", "yes")


def _one(values: tuple[str, ...]) -> str:
    if len(values) != 1:
        raise ValueError(f"expected one value, got {len(values)}")
    return values[0]


def _float(values: tuple[str, ...]) -> float:
    return float(_one(values))


def _number(values: tuple[str, ...]) -> int | float:
    word = _one(values)
    number = float(word)
    return int(number) if number.is_integer() and "." not in word and "e" not in word else number


def _source(name: str) -> str:
    """A dataset as `data.source` names it: a local file as it is, else a Hub dataset."""
    if name.startswith(("/", "./", "../", "s3://", "hf://", "http://", "https://")):
        return name
    if Path(name).suffix in (".jsonl", ".json", ".parquet"):
        return name
    return f"hf://datasets/{name}"


#: A mapper's note that starts so says how the run differs from open-instruct's.
DIFFERS = "differs: "

#: Flags with no judgeflow counterpart, and why.
NO_COUNTERPART: dict[str, str] = {
    BEFORE: "the node's set-up before training (Ray, an environment); judgeflow starts Ray "
    "itself, and cluster.setup runs a node's own set-up lines",
    # mason.py (Beaker)
    "cluster": "Beaker cluster; judgeflow: cluster.backend and cluster.partition",
    "workspace": "Beaker workspace; no counterpart",
    "priority": "Beaker priority; closest: cluster.qos",
    "image": "Beaker image; judgeflow: cluster.python (an Apptainer image, say) and cluster.setup",
    "pure_docker_mode": "Beaker's docker mode; no counterpart",
    "preemptible": "judgeflow resubmits a stage killed from outside (cluster.retries) and "
    "resumes from its newest checkpoint",
    "budget": "Beaker budget; closest: cluster.account",
    "secret": "Beaker secrets; judgeflow: cluster.secrets",
    "env": "Beaker environment; judgeflow: cluster.env",
    "description": "Beaker experiment description; no counterpart",
    "max_retries": "Beaker retries; judgeflow: cluster.retries",
    # grpo_fast.py
    "try_launch_beaker_eval_jobs_on_weka": "oe-eval jobs on Beaker; judgeflow evaluates the "
    "policy itself before and after training (evaluation.*)",
    "oe_eval_tasks": "oe-eval tasks on Beaker; judgeflow's evaluation is its held-out rows",
    "oe_eval_max_length": "oe-eval on Beaker; judgeflow's evaluation: evaluation.max_new_tokens",
    "deepspeed_stage": "verl shards with FSDP (grpo.strategy), TRL trains on one device",
    "num_learners_per_node": "grpo_fast trains and generates on separate GPUs; verl colocates "
    "them on every GPU",
    "vllm_num_engines": "verl runs GPUs ÷ tensor parallel vLLM engines, colocated with training",
    "vllm_sync_backend": "how grpo_fast syncs weights to vLLM; verl's hybrid engine reshards in "
    "place",
    "vllm_enforce_eager": "no key; verl's rollout settings: grpo.extra_overrides",
    "gather_whole_model": "how grpo_fast broadcasts DeepSpeed weights to vLLM; no counterpart",
    "single_gpu_mode": "grpo_fast shares one GPU between learner and vLLM; verl always colocates",
    "with_tracking": "always on: every run is tracked in MLflow (tracking.*; W&B beside it with "
    "tracking.wandb.project)",
    "push_to_hub": "judgeflow registers models in MLflow's registry, not the Hub",
    "save_traces": "grpo_fast's rollout traces; judgeflow logs evaluation predictions to MLflow",
    "exp_name": "judgeflow names a run after its recipe; the MLflow experiment is "
    "tracking.experiment",
    "async_steps": "verl 0.6.1's main_ppo is synchronous (on-policy)",
    "inflight_updates": "verl 0.6.1's main_ppo is synchronous",
    "code_api_url": "judgeflow runs a code row's tests itself, confined (rlvr.code_*)",
    "checkpoint_state_freq": "judgeflow's checkpoints hold the whole training state, every "
    "grpo.save_freq steps",
    "task_name": "Beaker task name; judgeflow names a run after its recipe",
    "no_auto_dataset_cache": "Beaker's dataset cache; judgeflow caches prepared data itself",
    "timeout": "Beaker's time limit; judgeflow: cluster.timeout_min",
    "hostname": "Beaker host pinning; closest: cluster.constraint or cluster.extra_sbatch",
    "llm_judge_max_context_length": "judgeflow sends an LLM judge's prompt whole; open-instruct "
    "cuts the conversation to fit this context (a server that refuses a prompt too long stops "
    "judgeflow's run, resumable)",
}
#: litellm's provider prefix of an LLM judge's model → the variable that holds its base URL.
_LITELLM_BASES = {"hosted_vllm": "HOSTED_VLLM_API_BASE", "openai": "OPENAI_API_BASE"}
#: The LLM judge's flags that set a key only when the judge itself maps (a URL is known).
_LLM_JUDGE_KEYS = {
    "llm_judge_max_tokens": "reward.judge_max_new_tokens",
    "llm_judge_timeout": "reward.judge_timeout_s",
}
#: open-instruct's defaults for them (``--llm_judge_max_tokens``, ``--llm_judge_timeout``).
_LLM_JUDGE_DEFAULTS = {"reward.judge_max_new_tokens": 2048, "reward.judge_timeout_s": 60.0}

Mapper = Callable[[Flag, dict[str, Any]], tuple[dict[str, Any], str]]


def _set(*keys: str, note: str = "", convert: Callable[[tuple[str, ...]], Any] = _number) -> Mapper:
    def mapper(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
        value = convert(flag.values)
        return {key: value for key in keys}, note

    return mapper


def _beta(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    beta = _float(flag.values)
    note = "KL to the reference in the per-token loss, as grpo_fast adds it"
    return {"grpo.use_kl_loss": beta > 0, "grpo.kl_loss_coef": beta}, note


_KL = {"0": "kl", "kl1": "kl", "1": "mse", "kl2": "mse", "2": "low_var_kl", "kl3": "low_var_kl"}


def _kl(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    word = _one(flag.values).lower()
    if word not in _KL:
        raise ValueError(f"no verl KL estimator for kl_estimator {word!r} (known: 0-2, kl1-kl3)")
    return {"grpo.kl_loss_type": _KL[word]}, "verl's name for the same estimator"


def _pairs(flag: Flag) -> list[tuple[str, int | float]]:
    """`name amount name amount …`, each amount as open-instruct reads it: with a `.` a share,
    else a row count."""
    if not flag.values or len(flag.values) % 2:
        raise ValueError("expected dataset and amount pairs")
    pairs = []
    for name, amount in zip(flag.values[::2], flag.values[1::2], strict=True):
        try:
            pairs.append((name, float(amount) if "." in amount else int(amount)))
        except ValueError:
            raise ValueError(f"{name}: amount {amount!r} is not a number") from None
    return pairs


def _mixer(flag: Flag, seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    seen[flag.name] = _pairs(flag)
    return {}, ("data.mixer: each dataset its amount (a float a share, an integer rows) and split")


def _eval_mixer(flag: Flag, seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    seen[flag.name] = _pairs(flag)
    return {}, "data.eval_mixer: the validation rows, each dataset its amount and split"


def _splits(flag: Flag, seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    seen[flag.name] = flag.values
    return {}, "each dataset's split (data.mixer / data.eval_mixer)"


def _mixture(pairs: list[tuple[str, int | float]], splits: tuple[str, ...]) -> list[dict[str, Any]]:
    """`data.mixer` entries: one split names every dataset's, else one split per dataset."""
    if len(splits) != 1 and len(splits) != len(pairs):
        raise ValueError(
            f"{len(pairs)} dataset(s) need one split or {len(pairs)}, got {len(splits)}"
        )
    return [
        {"source": _source(name), "amount": amount, "split": split}
        for (name, amount), split in zip(
            pairs, splits * len(pairs) if len(splits) == 1 else splits, strict=True
        )
    ]


def _chat_template(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    from judgeflow.config.chat_templates import CHAT_TEMPLATES

    name = _one(flag.values)
    if name not in CHAT_TEMPLATES and name != "tokenizer":
        raise ValueError(
            f"judgeflow has no template {name!r} (it has {', '.join(sorted(CHAT_TEMPLATES))}): "
            "save open-instruct's as a .jinja file and set data.chat_template to its path"
        )
    return {"data.chat_template": name}, "rendered alike by SFT, GRPO on both engines, evaluation"


def _format(flag: Flag, seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    seen["r1_format"] = _true(flag.values)
    return {}, "rlvr.r1_style_format (with additive_format_reward)"


def _additive(flag: Flag, seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    seen["additive"] = _true(flag.values)
    return {}, "rlvr.r1_style_format (with apply_r1_style_format_reward)"


def _verifiable(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    if not _true(flag.values):
        raise ValueError("judgeflow's rlvr always pays the verifiers")
    return {}, "always on in mode rlvr"


def _llm_judge(flag: Flag, seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """open-instruct's LM-judge verifiers ask a model through litellm (``hosted_vllm/NAME`` at
    ``$HOSTED_VLLM_API_BASE``): judgeflow asks the same OpenAI-compatible server with the same
    prompts (``reward.judge_mode: llm``), scored by verl's batch reward manager."""
    model = _one(flag.values)
    provider, _, name = model.partition("/")
    variable = _LITELLM_BASES.get(provider)
    url = seen["environment"].get(variable) if variable else None
    if provider == "openai" and not url:
        url = "https://api.openai.com/v1"
    if not url or not name:
        raise ValueError(
            f"{model}: open-instruct reaches it through litellm"
            + (f" at ${variable}, which the script does not set" if variable else "")
            + "; judgeflow asks an OpenAI-compatible server: set reward.judge_url=<its /v1 URL>, "
            f"reward.judge_mode=llm and reward.judge_model={name or model}"
        )
    keys = {"reward.judge_url": url, "reward.judge_api": "openai", "reward.judge_mode": "llm",
            "reward.judge_model": name, "grpo.reward_manager": "batch"}  # fmt: skip
    seen["llm_judge"] = True
    return keys, (
        DIFFERS + f"the LM-judge rows are asked of {name} at {url} with open-instruct's prompts "
        "and scored by its extractors (judgeflow.rewards.rlvr.llm_judge), greedy: open-instruct "
        "samples its judge at --llm_judge_temperature (1.0 by default)"
    )


def _remap(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    pairs = dict(v.split("=", 1) for v in flag.values if "=" in v)
    if len(pairs) != len(flag.values):
        raise ValueError("expected old=new pairs")
    return {"rlvr.remap_verifier": pairs}, ""


def _mini_batches(flag: Flag, seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    seen["num_mini_batches"] = int(_one(flag.values))
    return {}, "grpo.ppo_mini_batch_size: prompts per step ÷ this"


def _episodes(flag: Flag, seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    seen["total_episodes"] = int(float(_one(flag.values)))
    return {}, "grpo.max_steps: episodes ÷ (prompts × samples per prompt)"


def _scheduler(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    name = _one(flag.values)
    if name not in ("constant", "cosine"):
        raise ValueError(f"judgeflow's GRPO schedules are constant and cosine, not {name!r}")
    return {"grpo.lr_scheduler_type": name}, ""


def _ground_truths_key(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    if _one(flag.values) != "ground_truth":
        raise ValueError("judgeflow reads a row's labels from its ground_truth column")
    return {}, "judgeflow reads ground_truth"


def _system_prompt_file(flag: Flag, seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    path = Path(_one(flag.values))
    where = [path, seen["script_dir"] / path] if not path.is_absolute() else [path]
    found = next((p for p in where if p.is_file()), None)
    if found is None:
        raise ValueError(f"{path} not found next to the script: copy its text into "
                         "data.system_prompt")  # fmt: skip
    return {"data.system_prompt": found.read_text(encoding="utf-8").strip()}, f"the text of {path}"


def _epochs(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    if _one(flag.values) != "1":
        raise ValueError("no judgeflow key: verl's actor.ppo_epochs, through grpo.extra_overrides")
    return {}, "one pass over each batch: verl's actor.ppo_epochs default"


def _positive(values: tuple[str, ...]) -> int:
    number = int(_one(values))
    if number <= 0:
        raise ValueError(f"{number} turns it off in open-instruct; judgeflow has no off switch "
                         "for it, so the preset's value is kept")  # fmt: skip
    return number


def _reference(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    if _true(flag.values):
        return {}, "the reference model is kept for the KL term (--beta)"
    return {"grpo.use_kl_loss": False}, "no reference model: no KL term"


def _advantages(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    kind = _one(flag.values)
    if kind not in ("standard", "centered"):
        raise ValueError(f"no judgeflow counterpart for advantage normalisation {kind!r}")
    return {"grpo.norm_adv_by_std_in_grpo": kind == "standard"}, (
        "standard: (r - mean) / std; centered: r - mean"
    )


def _eval_length(flag: Flag, seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    seen["eval_response_length"] = int(_one(flag.values))
    return {}, "evaluation.max_new_tokens"


def _not_filtered(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    return {"grpo.filter_zero_std_samples": not _true(flag.values)}, "TRL only: verl ignores it"


def _cluster_gpus(flag: Flag, _seen: dict[str, Any]) -> tuple[dict[str, Any], str]:
    return {"cluster.gpus_per_node": int(_one(flag.values))}, ""


def _strings(values: tuple[str, ...]) -> list[str]:
    return list(values)


MAPPERS: dict[str, Mapper] = {
    "beta": _beta,
    "num_unique_prompts_rollout": _set("grpo.train_batch_size"),
    "num_samples_per_prompt_rollout": _set("grpo.rollout_n"),
    "kl_estimator": _kl,
    "learning_rate": _set("grpo.learning_rate", convert=_float),
    "dataset_mixer_list": _mixer,
    "dataset_mixer_list_splits": _splits,
    "dataset_mixer_eval_list": _eval_mixer,
    "dataset_mixer_eval_list_splits": _splits,
    "dataset_config_seed": _set("data.mixer_seed"),
    "chat_template_name": _chat_template,
    "max_token_length": _set(
        "data.filter_overlong_prompts",
        convert=lambda v: True,
        note="rows hold only the prompt: longer prompts are dropped, as rlvr_filter_v1 does",
    ),
    "max_prompt_token_length": _set("data.max_prompt_length"),
    "response_length": _set(
        "data.max_response_length",
        "evaluation.max_new_tokens",
        note="also the length of the evaluation's replies",
    ),
    "pack_length": _set(
        "grpo.ppo_max_token_len_per_gpu",
        note="verl packs micro-batches up to this many tokens (grpo.use_dynamic_bsz)",
    ),
    "model_name_or_path": _set("model.path", convert=_one),
    "apply_verifiable_reward": _verifiable,
    "non_stop_penalty": _set("rlvr.non_stop_penalty", convert=_true),
    "non_stop_penalty_value": _set("rlvr.non_stop_penalty_value", convert=_float),
    "temperature": _set("grpo.temperature", convert=_float),
    "vllm_top_p": _set("grpo.top_p", convert=_float),
    "total_episodes": _episodes,
    "per_device_train_batch_size": _set("grpo.ppo_micro_batch_size_per_gpu"),
    "num_mini_batches": _mini_batches,
    "num_epochs": _epochs,
    "vllm_tensor_parallel_size": _set("grpo.rollout_tensor_model_parallel_size"),
    "vllm_gpu_memory_utilization": _set(
        "grpo.gpu_memory_utilization",
        convert=_float,
        note=DIFFERS + "open-instruct's vLLM has GPUs of its own; verl's shares each GPU with "
        "training, so a high share can leave training too little memory",
    ),
    "lr_scheduler_type": _scheduler,
    "warmup_ratio": _set("grpo.lr_warmup_steps_ratio", convert=_float),
    "seed": _set("data.seed", note="seeds the validation split, data order and the trainers"),
    "local_eval_every": _set("grpo.test_freq", convert=_positive),
    "save_freq": _set("grpo.save_freq", convert=_positive),
    "load_ref_policy": _reference,
    "advantage_normalization_type": _advantages,
    "eval_response_length": _eval_length,
    "eval_on_step_0": _set("grpo.val_before_train", convert=_true),
    "keep_last_n_checkpoints": _set("grpo.max_actor_ckpt_to_keep", convert=_positive),
    "no_filter_zero_std_samples": _not_filtered,
    "gradient_checkpointing": _set("grpo.gradient_checkpointing", convert=_true),
    "stop_strings": _set(
        "grpo.stop_strings",
        convert=_strings,
        note=DIFFERS + "TRL only: verl 0.6.1 cannot stop at strings",
    ),
    "apply_r1_style_format_reward": _format,
    "additive_format_reward": _additive,
    "r1_style_format_reward": _set("rlvr.r1_style_format_reward", convert=_float),
    "verification_reward": _set("rlvr.verification_reward", convert=_float),
    "remap_verifier": _remap,
    "llm_judge_model": _llm_judge,
    "llm_judge_max_tokens": _set(_LLM_JUDGE_KEYS["llm_judge_max_tokens"]),
    "llm_judge_timeout": _set(_LLM_JUDGE_KEYS["llm_judge_timeout"], convert=_float),
    "max_length_verifier_max_length": _set("rlvr.max_length_verifier_max_length"),
    "code_max_execution_time": _set("rlvr.code_max_execution_time", convert=_float),
    "code_pass_rate_reward_threshold": _set("rlvr.code_pass_rate_reward_threshold", convert=_float),
    "code_apply_perf_penalty": _set("rlvr.code_apply_perf_penalty", convert=_true),
    "filter_zero_std_samples": _set(
        "grpo.filter_zero_std_samples",
        convert=_true,
        note="TRL only: verl 0.6.1's main_ppo cannot filter (those groups get no advantage)",
    ),
    "clip_lower": _set("grpo.clip_ratio_low", convert=_float),
    "clip_higher": _set("grpo.clip_ratio_high", convert=_float),
    "ground_truths_key": _ground_truths_key,
    "system_prompt_override_file": _system_prompt_file,
    # mason.py
    "num_nodes": _set("cluster.nodes"),
    "gpus": _cluster_gpus,
}


#: grpo_fast's defaults at open-instruct e6c3044 (grpo_utils.py, data_loader.py) for the flags
#: judgeflow maps: a script that leaves one unset gets it, not the preset's value.
OPEN_INSTRUCT_DEFAULTS: dict[str, tuple[str, ...]] = {
    "beta": ("0.05",),
    "kl_estimator": ("2",),
    "load_ref_policy": ("true",),
    "clip_lower": ("0.2",),
    "clip_higher": ("0.272",),
    "advantage_normalization_type": ("centered",),
    "num_mini_batches": ("1",),
    "total_episodes": ("100000",),
    "num_unique_prompts_rollout": ("16",),
    "num_samples_per_prompt_rollout": ("4",),
    "max_prompt_token_length": ("256",),
    "response_length": ("256",),
    "pack_length": ("512",),
    "temperature": ("1.0",),
    "vllm_top_p": ("1.0",),
    "local_eval_every": ("100",),
    "save_freq": ("200",),
    "filter_zero_std_samples": ("true",),
    "apply_r1_style_format_reward": ("false",),
    "r1_style_format_reward": ("1.0",),
    "additive_format_reward": ("false",),
    "dataset_mixer_list": ("ai2-adapt-dev/rlvr_gsm8k_zs", "1.0"),
    "dataset_mixer_list_splits": ("train",),
    "dataset_mixer_eval_list_splits": ("test",),
    "verification_reward": ("10.0",),
    "non_stop_penalty": ("false",),
    "non_stop_penalty_value": ("0.0",),
    "remap_verifier": (),  # none: `ifeval` rows are IFEvalG's (the rlvr preset remaps them)
}
#: Flags that set another's default when given (an unset twin must not undo them).
_TWINS = {"no_filter_zero_std_samples": "filter_zero_std_samples"}


def import_script(text: str, *, script_dir: Path = Path(".")) -> Imported:
    """Map a launch script's flags onto judgeflow keys (see the module)."""
    flags, exports = parse_script(text)
    out = Imported(environment=exports)
    seen: dict[str, Any] = {"script_dir": script_dir, "environment": exports}
    given = {f.name for f in flags} | {_TWINS[f.name] for f in flags if f.name in _TWINS}
    unset = [Flag(name, values, default=True)
             for name, values in OPEN_INSTRUCT_DEFAULTS.items() if name not in given]  # fmt: skip
    for flag in [*unset, *flags]:  # the script's own flags last: they win
        if unresolved := [v for v in flag.values if "$" in v]:
            out.unmapped.append((flag, f"{unresolved[0]} is not set in the script: set the key "
                                       "in the recipe"))  # fmt: skip
            continue
        mapper = MAPPERS.get(flag.name)
        if mapper is None:
            why = NO_COUNTERPART.get(flag.name) or (
                "not a flag judgeflow's importer knows"
                + (" (mason.py's)" if flag.wrapper else " (grpo_fast.py's)")
                + ": not mapped"
            )
            out.unmapped.append((flag, why))
            continue
        try:
            keys, note = mapper(flag, seen)
        except ValueError as exc:
            out.unmapped.append((flag, str(exc)))
            continue
        if flag.name == "pack_length":
            keys["grpo.use_dynamic_bsz"] = True
        out.keys.update(keys)
        out.mapped.append((flag, keys, note))
        if note.startswith(DIFFERS):
            out.differences.append((flag, note.removeprefix(DIFFERS)))
    _derived(out, seen)
    return out


def _derived(out: Imported, seen: dict[str, Any]) -> None:
    """Keys that need several flags: the format switch, mini-batches, steps."""
    if "r1_format" in seen or "additive" in seen:
        on, additive = seen.get("r1_format", False), seen.get("additive", False)
        out.keys["rlvr.r1_style_format"] = ("additive" if additive else "gated") if on else "off"
    prompts = out.keys.get("grpo.train_batch_size")
    if "num_mini_batches" in seen and prompts:
        out.keys["grpo.ppo_mini_batch_size"] = max(1, prompts // seen["num_mini_batches"])
    samples = out.keys.get("grpo.rollout_n")
    if "total_episodes" in seen and prompts and samples:
        out.keys["grpo.max_steps"] = max(1, seen["total_episodes"] // (prompts * samples))
    if "eval_response_length" in seen:
        out.keys["evaluation.max_new_tokens"] = seen["eval_response_length"]
    _llm_judge_keys(out, seen)
    _data_keys(out, seen)


def _llm_judge_keys(out: Imported, seen: dict[str, Any]) -> None:
    """An LLM judge's settings stand only beside the judge: open-instruct's defaults where the
    script leaves them; with no judge mapped, said and not set (they would set nothing)."""
    if seen.get("llm_judge"):
        for key, value in _LLM_JUDGE_DEFAULTS.items():
            out.keys.setdefault(key, value)
        return
    for flag, keys, _ in [m for m in out.mapped if m[0].name in _LLM_JUDGE_KEYS]:
        out.mapped.remove((flag, keys, _))
        for key in keys:
            out.keys.pop(key, None)
        out.unmapped.append((flag, "no LLM judge was mapped (see llm_judge_model)"))


#: Tulu 3's RLVR mix, whose `ifeval` rows carry the `func_name` labels of `ifeval_old`.
_TULU_IF_DATA = "hf://datasets/allenai/RLVR-GSM-MATH-IF-Mixed-Constraints"


def _tulu_if_rows(out: Imported, train: list[dict[str, Any]]) -> None:
    """Tulu 3's mix, where the script remaps nothing: its `ifeval` rows to `ifeval_old`, that
    source only (open-instruct at e6c3044 routes them to IFEvalG, which raises on them)."""
    if any(flag.name == "remap_verifier" and not flag.default for flag, _, _ in out.mapped):
        return
    for entry in train:
        if entry["source"] == _TULU_IF_DATA:
            entry["remap_verifier"] = {"ifeval": "ifeval_old"}
            flag = next(f for f, _, _ in out.mapped if f.name == "dataset_mixer_list")
            out.differences.append((flag, (
                f"{_TULU_IF_DATA.removeprefix('hf://datasets/')}: its ifeval rows are Tulu 3's "
                "func_name checks, which open-instruct (e6c3044) scores with IFEvalG and raises "
                "on; judgeflow remaps them to ifeval_old for that source"
            )))  # fmt: skip


def _data_keys(out: Imported, seen: dict[str, Any]) -> None:
    """The data keys of the mixer flags: `data.mixer` (a split of a Hub dataset is some of its
    files, where `data.source` would be all of them); an eval mixer of the training data itself
    leaves validation held out."""
    if "dataset_mixer_list" not in seen or "dataset_mixer_list_splits" not in seen:
        return  # a flag's variable is unset: said, and the preset's data kept
    try:
        train = _mixture(seen["dataset_mixer_list"], seen["dataset_mixer_list_splits"])
        evals = None
        if "dataset_mixer_eval_list" in seen and "dataset_mixer_eval_list_splits" in seen:
            evals = _mixture(
                seen["dataset_mixer_eval_list"], seen["dataset_mixer_eval_list_splits"]
            )
    except ValueError as exc:  # the splits do not pair with the datasets
        for i, (flag, _, _) in reversed(list(enumerate(out.mapped))):
            if flag.name.startswith("dataset_mixer"):
                out.unmapped.append((flag, str(exc)))
                del out.mapped[i]
        return
    _tulu_if_rows(out, train)
    keys: dict[str, Any] = {"data.source": None, "data.mixer": train}
    differs = ""
    if evals is not None:
        trained_on = {(p["source"], p["split"]) for p in train}
        if {(p["source"], p["split"]) for p in evals} <= trained_on:
            differs = (
                "open-instruct evaluates on rows it also trains on (its eval mixer names the "
                "training data); judgeflow holds validation out by prompt instead "
                "(data.val_fraction)"
            )
        else:
            keys |= {"data.val_source": None, "data.eval_mixer": evals}
    out.keys.update(keys)
    validation = ("data.val_source", "data.eval_mixer")
    for i, (flag, _, note) in enumerate(out.mapped):  # the mixer flags show the keys they made
        if flag.name == "dataset_mixer_list":
            made = {k: v for k, v in keys.items() if k not in validation}
            out.mapped[i] = (flag, made, note)
        elif flag.name == "dataset_mixer_eval_list":
            made = {k: v for k, v in keys.items() if k in validation}
            out.mapped[i] = (flag, made, DIFFERS + differs if differs else note)
            if differs:
                out.differences.append((flag, differs))


def recipe_yaml(imported: Imported, *, base: str, source: str) -> str:
    """The recipe: `base:` the preset, then every key the script set, nested."""
    import yaml

    nested: dict[str, Any] = {}
    for dotted, value in sorted(imported.keys.items()):
        *parents, leaf = dotted.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    header = [
        f"# Imported from {source} by `judgeflow import open-instruct`, over the {base} preset.",
        "# Flags the script leaves unset take grpo_fast's defaults (open-instruct e6c3044) where",
        f"# judgeflow maps them; every other key keeps the {base} preset's value.",
        "# Flags with no counterpart, and why:",
        *(f"#   {flag.shown[:100]}: {why}" for flag, why in imported.unmapped),
    ]
    if imported.differences:
        header.append("# Mapped, but the run differs:")
        header += [f"#   {flag.shown[:100]}: {how}" for flag, how in imported.differences]
    if imported.environment:
        header.append(f"# The script's variables (not imported): {', '.join(imported.environment)}")
    body = yaml.safe_dump({"base": base, **nested}, sort_keys=False, allow_unicode=True)
    return "\n".join(header) + "\n" + body
