"""Policy RLVR data: open-instruct's rows to verl RL parquet, every row checked and accounted for.

A row (parquet, JSONL or JSON) has ``messages`` (the prompt as chat turns; a trailing assistant
turn, the reference answer of SFT-style data, is dropped as open-instruct drops it),
``ground_truth`` and ``dataset``. ``dataset`` names the verifier, case-insensitively and through
``remap_verifier`` (open-instruct's ``--remap_verifier old=new``); a list of datasets means
several verifiers for one row, paired with a list of ground truths of the same length. A label
the verifier could never match is refused here rather than paid 0 for ever in training: a math
or string label must be a string, a ``gsm8k`` label a string or a number, an ``ifeval_old``
label a JSON object naming one of its checks, an ``ifeval`` label open-instruct's stringified
list of instruction ids and their arguments, each buildable (none left to chance), a ``code`` label a non-empty list of test statements
and a ``code_stdio`` label a non-empty list of ``{"input", "output"}`` strings (either as a list,
its JSON, or open-instruct's compressed form; kept as JSON).

Invalid rows are collected across all inputs and raised together (file, row, field) unless
``skip_invalid``, in which case they are dropped and listed in the report. Rows are split into
train and validation by prompt (its user turns, normalised; a system turn does not make a
prompt new), so validation never shows a prompt that was trained on.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

import judgeflow
from judgeflow.data.errors import DataError, DataValidationError, RowIssue
from judgeflow.data.examples import Origin, with_system_prompt
from judgeflow.data.io import PathLike, atomic_write_many, exists, parquet_bytes, remove
from judgeflow.data.jsonl import not_an_object
from judgeflow.data.judge_parsers import _got, _Invalid
from judgeflow.data.prepare import PrepareResult, output_paths
from judgeflow.data.prompt_hashes import rlvr_prompt_hash
from judgeflow.data.prompt_tokens import load_tokenizer, prompt_lengths
from judgeflow.data.readers import DroppedRow, InputSummary, iter_records
from judgeflow.rewards.rlvr.code_tests import decode_tests
from judgeflow.rewards.rlvr.if_functions import IF_FUNCTIONS
from judgeflow.rewards.rlvr.ifevalg import DrawnAtRandom, check_label
from judgeflow.rewards.rlvr.verifiers import (
    CODE_VERIFIERS,
    LENGTH_VERIFIERS,
    VERIFIERS,
    UnknownVerifier,
    resolve,
)

__all__ = [
    "MixPart",
    "RlvrExample",
    "RlvrRead",
    "mixer_rows",
    "prepare_rlvr",
    "raw_query",
    "read_rlvr",
    "rlvr_prompt_hash",
]

REPORT_SCHEMA_VERSION = 1
MAX_LISTED_DROPS = 100
ROLES = ("system", "user", "assistant")
_STRING_LABELS = ("math", "strict_math", "string_matcher", "flan")


@dataclass(frozen=True)
class RlvrExample:
    """One prompt with the verifiers that pay for its responses."""

    messages: tuple[tuple[str, str], ...]  # (role, content), ending with a user turn
    verifiers: tuple[str, ...]  # resolved verifier names, one per label
    labels: tuple[str, ...]  # each as the verifier reads it (ifeval_old: JSON text)
    origin: Origin
    #: What a paying judge is shown, for a row a judge pays (its dataset is a judge dataset):
    #: the question (the row's `query`, else the prompt's last user turn) and, for a GRRM
    #: judge, the row's `source_lang` / `target_lang`. None for a row only verifiers pay.
    judge_input: tuple[str, str | None, str | None] | None = None
    #: The mixer source the row came from (`MixPart.name`); None outside a mixture.
    part: str | None = None

    @property
    def prompt_hash(self) -> str:
        return rlvr_prompt_hash(self.messages)


@dataclass(frozen=True)
class MixPart:
    """One source of a mixture (`data.mixer`): the files of its split, the amount taken of them
    (`mixer_rows`) and its own verifier remap, applied over the run's."""

    name: str  # how the report names it: the source, and its split when not train
    paths: tuple[str, ...]
    amount: int | float
    seed: int = 42
    remap_verifier: Mapping[str, str] = field(default_factory=dict)


def mixer_rows(available: int, amount: int | float, seed: int) -> list[int]:
    """Which of `available` rows a mixer amount takes, as open-instruct's `DatasetConfig` does:
    the target is `amount` rows (an int) or `int(amount * available)` (a float); every row once per
    whole multiple of `available`, in order, then the rest drawn without replacement by
    `numpy.random.RandomState(seed)`."""
    target = amount if isinstance(amount, int) else int(amount * available)
    if available == 0:
        return []
    whole, extra = divmod(target, available)
    rows = list(range(available)) * whole
    if extra:
        rows += np.random.RandomState(seed).choice(available, size=extra, replace=False).tolist()
    return rows


@dataclass
class RlvrRead:
    """Invariant: ``rows_read == len(examples) + len(dropped)``. ``unknown_verifiers``: each
    verifier name judgeflow lacks, with the rows (file, row) that named it."""

    examples: list[RlvrExample] = field(default_factory=list)
    rows_read: int = 0
    dropped: list[DroppedRow] = field(default_factory=list)
    inputs: list[InputSummary] = field(default_factory=list)
    unknown_verifiers: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    #: Per mixer source: its rows, the amount asked and the rows taken (`mixer_rows`).
    mixer: list[dict[str, Any]] = field(default_factory=list)


class _UnknownVerifier(_Invalid):
    """A row names a verifier judgeflow does not have (`name`, lowercased)."""

    def __init__(self, field: str | None, message: str, name: str) -> None:
        super().__init__(field, message)
        self.name = name


def _messages(value: Any) -> tuple[tuple[str, str], ...]:
    if value is None:
        raise _Invalid("messages", "missing messages (the prompt as chat turns)")
    if not isinstance(value, list) or not value:
        raise _Invalid("messages", f"expected a non-empty list of turns, got {_got(value)}")
    turns = []
    for i, turn in enumerate(value):
        if not isinstance(turn, dict):
            raise _Invalid(f"messages[{i}]", f"expected an object, got {_got(turn)}")
        role, content = turn.get("role"), turn.get("content")
        if role not in ROLES:
            raise _Invalid(
                f"messages[{i}].role", f"expected one of {list(ROLES)}, got {_got(role)}"
            )
        if not isinstance(content, str):
            raise _Invalid(f"messages[{i}].content", f"expected a string, got {_got(content)}")
        turns.append((role, content))
    if len(turns) > 1 and turns[-1][0] == "assistant":
        turns.pop()  # the reference answer: not part of the prompt (open-instruct drops it too)
    if turns[-1][0] != "user" or not turns[-1][1].strip():
        raise _Invalid(
            f"messages[{len(turns) - 1}]", "the prompt must end with a non-empty user turn"
        )
    return tuple(turns)


def _length_label(verifier: str, value: Any, where: str) -> str:
    """A length verifier's label: the length wanted, in tokens (open-instruct reads it with
    `float`, and raises, or pays NaN, on what is not a finite number)."""
    try:
        wanted = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        wanted = math.nan
    if not math.isfinite(wanted) or wanted < 0:
        raise _Invalid(
            where, f"{verifier}: expected a length in tokens (a number), got {_got(value)}"
        )
    return str(value).strip()


def _code_label(verifier: str, value: Any, where: str) -> str:
    """A code verifier's tests, read as open-instruct reads them, kept as JSON text."""
    try:
        tests = decode_tests(value)
    except ValueError as exc:
        raise _Invalid(where, f"{verifier}: {exc}") from exc
    if verifier == "code":
        ok = all(isinstance(t, str) and t.strip() for t in tests)
        kind = "test statements (strings, such as `assert f(1) == 2`)"
    else:
        ok = all(
            isinstance(t, dict) and isinstance(t.get("input"), str | list)
            and isinstance(t.get("output"), str) for t in tests
        )  # fmt: skip
        kind = 'objects {"input": …, "output": …} of strings'
    if not tests or not ok:
        raise _Invalid(where, f"{verifier}: expected a non-empty list of {kind}, got {_got(value)}")
    return json.dumps(tests, ensure_ascii=False)


def _ifeval_label(value: Any, where: str) -> str:
    """An IFEvalG label as open-instruct's rows carry it (the text of a Python list); a list or
    an object in JSON data is kept as that text. Every instruction is built, so a label
    open-instruct would raise on, or score by a coin toss, is refused here."""
    if isinstance(value, dict):
        value = [value]
    text = repr(value) if isinstance(value, list) else value
    if "func_name" in str(text):
        raise _Invalid(
            where, "ifeval: a func_name label is Tulu 3's instruction check: remap this dataset "
            "to ifeval_old (remap_verifier)",
        )  # fmt: skip
    try:
        check_label(text)
    except (SyntaxError, TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        if isinstance(exc, KeyError) and exc.args and str(exc.args[0]).startswith("no ifeval"):
            message = str(exc.args[0])
        elif isinstance(exc, DrawnAtRandom | ValueError) and not isinstance(exc, SyntaxError):
            message = str(exc)
        else:
            message = f"{type(exc).__name__}: {exc}"
        raise _Invalid(
            where, f"ifeval: {message[:300]} (the label is open-instruct's stringified list "
            "[{'instruction_id': [...], 'kwargs': [...]}])",
        ) from exc  # fmt: skip
    return str(text)


def _label(verifier: str, value: Any, where: str) -> str:
    if verifier == "ifeval":
        return _ifeval_label(value, where)
    if verifier in CODE_VERIFIERS:
        return _code_label(verifier, value, where)
    if verifier == "ifeval_old":
        hint = (
            " (an instruction_id label is IFEvalG's, which the ifeval verifier scores: remap "
            "this dataset to ifeval, or clear the remap with rlvr.remap_verifier: {})"
            if "instruction_id" in str(value) else ""
        )  # fmt: skip
        constraint = value
        if isinstance(value, str):
            try:
                constraint = json.loads(value)
            except json.JSONDecodeError as exc:
                raise _Invalid(where, f"ifeval_old: not JSON ({exc.msg}){hint}") from exc
        check = constraint.get("func_name") if isinstance(constraint, dict) else None
        if not isinstance(check, str) or check not in IF_FUNCTIONS:
            raise _Invalid(
                where, f"ifeval_old: expected an object whose func_name is one of its checks, "
                f"got {_got(value)}{hint}",
            )  # fmt: skip
        return json.dumps(constraint, ensure_ascii=False, sort_keys=True)
    if verifier in LENGTH_VERIFIERS:
        return _length_label(verifier, value, where)
    if verifier == "gsm8k" and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # open-instruct compares str(label)
    if verifier in ("re_search", "re_search_f1") and isinstance(value, list):
        if not value or not all(isinstance(v, str) and v.strip() for v in value):
            raise _Invalid(where, f"{verifier}: expected non-empty strings, got {_got(value)}")
        return json.dumps(value, ensure_ascii=False)  # as its rows carry them: parsed back there
    if verifier == "re_search_f1" and isinstance(value, str) and value.strip() == "[]":
        raise _Invalid(where, f"{verifier}: an empty list of answers")  # open-instruct raises
    if not isinstance(value, str) or not value.strip():
        kind = {"gsm8k": "a string or a number", "re_search": "a string or a list of them",
                "re_search_f1": "a string or a list of them"}.get(verifier, "a non-empty string")  # fmt: skip
        raise _Invalid(where, f"{verifier}: expected {kind}, got {_got(value)}")
    return value


def _judge_input(
    record: dict[str, Any], messages: tuple[tuple[str, str], ...]
) -> tuple[str, str | None, str | None]:
    query = record.get("query")
    if query is not None and (not isinstance(query, str) or not query.strip()):
        raise _Invalid("query", f"expected the question the judge is shown, got {_got(query)}")
    langs = []
    for key in ("source_lang", "target_lang"):
        value = record.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise _Invalid(key, f"expected a language code, got {_got(value)}")
        langs.append(value)
    return (query or messages[-1][1], langs[0], langs[1])


def _judge_hint(dataset: str, judge_datasets: frozenset[str]) -> str:
    """What pays a row of an unknown verifier, where a judge could."""
    from judgeflow.rewards.rlvr.llm_judge import LLM_VERIFIERS, REFUSED

    if dataset in REFUSED:
        return f"; judgeflow does not pay {dataset}: {REFUSED[dataset]}"
    if dataset in LLM_VERIFIERS:
        return (
            f"; {dataset} is open-instruct's LM-judge verifier: an LLM pays it with "
            "reward.judge_mode=llm and reward.judge_url (OpenAI-compatible), or a judge "
            "judgeflow trained (reward.judge) with it in reward.judge_datasets"
        )
    if judge_datasets:
        return ""
    return (
        "; a row a trained judge pays needs reward.judge (or reward.judge_url) and its dataset "
        "in reward.judge_datasets"
    )


def _example(
    record: Any,
    origin: Origin,
    remap: Mapping[str, str] | None,
    judge_datasets: frozenset[str] = frozenset(),
    system_prompt: str | None = None,
    part: str | None = None,
) -> RlvrExample:
    if isinstance(record, RowIssue):
        raise _Invalid(record.field, record.message)
    if not isinstance(record, dict):
        raise _Invalid(None, not_an_object(record))
    messages = with_system_prompt(_messages(record.get("messages")), system_prompt)
    datasets, truths = record.get("dataset"), record.get("ground_truth")
    if isinstance(datasets, str):  # one verifier: its label is the whole ground truth, a list
        datasets, truths = [datasets], [truths]  # of tests included (open-instruct wraps it so)
    if not isinstance(datasets, list) or not datasets:
        raise _Invalid(
            "dataset", f"expected a verifier name or a list of them, got {_got(datasets)}"
        )
    if not isinstance(truths, list) or len(truths) != len(datasets):
        raise _Invalid(
            "ground_truth",
            f"{len(datasets)} dataset(s) need as many ground truths, got {_got(truths)}",
        )
    verifiers, labels = [], []
    for i, (dataset, truth) in enumerate(zip(datasets, truths, strict=True)):
        where = "dataset" if len(datasets) == 1 else f"dataset[{i}]"
        if not isinstance(dataset, str):
            raise _Invalid(where, f"expected a verifier name, got {_got(dataset)}")
        label_at = "ground_truth" if len(datasets) == 1 else f"ground_truth[{i}]"
        if dataset.lower() in judge_datasets:  # a judge pays it; the label is the reference
            verifiers.append(dataset.lower())
            labels.append(_label("judge", truth, label_at))
            continue
        try:
            name = resolve(dataset, remap)
        except UnknownVerifier as exc:
            hint = _judge_hint(dataset.lower(), judge_datasets)
            raise _UnknownVerifier(where, f"{exc}{hint}", dataset.lower()) from None
        verifiers.append(name)
        labels.append(_label(name, truth, label_at))
    judged = any(v in judge_datasets for v in verifiers)
    return RlvrExample(
        messages,
        tuple(verifiers),
        tuple(labels),
        origin,
        _judge_input(record, messages) if judged else None,
        part,
    )


def read_rlvr(
    inputs: PathLike | MixPart | Sequence[PathLike | MixPart],
    *,
    remap_verifier: Mapping[str, str] | None = None,
    skip_invalid: bool = False,
    judge_datasets: Sequence[str] = (),
    system_prompt: str | None = None,
) -> RlvrRead:
    """Read and check RLVR rows from one or more files, or mixer sources (`MixPart`: the rows
    `mixer_rows` takes, each as often as taken); a dataset in `judge_datasets` is paid by a trained
    judge (its ground truth is the reference answer); with `system_prompt` every prompt has it as
    its system turn (`with_system_prompt`)."""
    routed = frozenset(d.lower() for d in judge_datasets)
    paths = [inputs] if isinstance(inputs, str | os.PathLike | MixPart) else list(inputs)
    if not paths:
        raise DataError("no input files given")
    result = RlvrRead()
    issues: list[RowIssue] = []
    for path in paths:
        remap, part = remap_verifier, None
        if isinstance(path, MixPart):
            name, part = path.name, path.name
            remap = {**(remap_verifier or {}), **path.remap_verifier}
            records = [(os.fspath(f), row, rec) for f in path.paths for row, rec in iter_records(f)]
            taken = mixer_rows(len(records), path.amount, path.seed)
            result.mixer.append(
                {"source": path.name, "amount": path.amount, "rows_available": len(records),
                 "rows_taken": len(taken), "upsampled": len(taken) > len(records)}
            )  # fmt: skip
            selected: Any = (records[i] for i in taken)
        else:
            name = os.fspath(path)
            selected = ((name, row, rec) for row, rec in iter_records(name))
        rows_read = used = 0
        for file, row, record in selected:
            rows_read += 1
            try:
                example = _example(
                    record, Origin(file=file, row=row), remap, routed, system_prompt, part
                )
            except _Invalid as exc:
                if isinstance(exc, _UnknownVerifier):
                    result.unknown_verifiers.setdefault(exc.name, []).append((file, row))
                issues.append(RowIssue(file, row, exc.field, exc.message))
                result.dropped.append(DroppedRow(file, row, "invalid", exc.message, exc.field))
                continue
            result.examples.append(example)
            used += 1
        result.rows_read += rows_read
        result.inputs.append(InputSummary(name, None, rows_read, used, used))
    if issues and not skip_invalid:
        raise DataValidationError(issues, total=len(issues), summary=_unknown(result))
    _check_punkt(result)
    return result


def _check_punkt(read: RlvrRead) -> None:
    """ifeval rows need NLTK's English Punkt tables where they are scored: refuse them here,
    saying how to install them, rather than pay each one 0 in training."""
    from judgeflow.rewards.rlvr.ifevalg.text import punkt_available

    rows = sum("ifeval" in example.verifiers for example in read.examples)
    if rows and not punkt_available():
        raise DataError(
            f"{rows} row(s) are scored by ifeval, which counts sentences with NLTK's English "
            "Punkt tables, and NLTK finds none (tokenizers/punkt_tab/english): run "
            "`judgeflow dev nltk-punkt` (from the package index) or `python -m nltk.downloader "
            "punkt_tab` in the environment that trains (every node), or set NLTK_DATA"
        )


def _unknown(read: RlvrRead) -> str | None:
    """The verifiers judgeflow lacks, each with how many rows name it and the first of them,
    and the ones it has: one paragraph above the rows."""
    if not read.unknown_verifiers:
        return None
    named = "; ".join(
        f"{name}: {len(rows)} row(s), first {rows[0][0]} row {rows[0][1]}"
        for name, rows in sorted(read.unknown_verifiers.items())
    )
    return (
        f"{len(read.unknown_verifiers)} verifier(s) judgeflow does not have: {named}. "
        f"It has: {', '.join(sorted([*VERIFIERS, *LENGTH_VERIFIERS, *CODE_VERIFIERS]))} "
        "(remap a dataset to one of them with "
        "remap_verifier, or drop those rows with skip_invalid)"
    )


def _drop_overlong(
    read: RlvrRead, tokenizer: Any, limit: int, chat_template: str | None = None
) -> int:
    """Drop (and list) the examples whose templated prompt (`chat_template`, else the
    tokenizer's own) is over `limit` tokens."""
    conversations = [[{"role": r, "content": c} for r, c in ex.messages] for ex in read.examples]
    kwargs = {"chat_template": chat_template} if chat_template is not None else None
    lengths = prompt_lengths(tokenizer, conversations, chat_template_kwargs=kwargs)
    kept = []
    for example, length in zip(read.examples, lengths, strict=True):
        if length <= limit:
            kept.append(example)
            continue
        origin = example.origin
        why = f"prompt is {length} tokens, over max_prompt_length={limit}"
        read.dropped.append(DroppedRow(origin.file, origin.row, "prompt_too_long", why, "messages"))
    dropped = len(read.examples) - len(kept)
    read.examples = kept
    return dropped


def _mixer_report(read: RlvrRead) -> dict[str, Any]:
    """Per mixer source: rows available, asked, taken and kept; and the prompts that two sources
    share (trained on as often as each source gives them; validation never holds one)."""
    kept = Counter(ex.part for ex in read.examples)
    sources = [{**entry, "rows_kept": kept[entry["source"]]} for entry in read.mixer]
    by_prompt: dict[str, set[str]] = {}
    for ex in read.examples:
        by_prompt.setdefault(ex.prompt_hash, set()).add(str(ex.part))
    shared = Counter(" & ".join(sorted(parts)) for parts in by_prompt.values() if len(parts) > 1)
    return {
        "sources": sources,
        "shared_prompts": {
            "total": sum(shared.values()),
            "by_sources": dict(sorted(shared.items())),
        },
    }


def split_val(examples: Sequence[RlvrExample], val_fraction: float, seed: int) -> list[bool]:
    """Per example, True if it goes to validation: whole prompts, shuffled by ``seed``, the
    first ``floor(F * P + 0.5)`` of the ``P`` prompts (at least 1 and at most P - 1)."""
    if val_fraction <= 0:
        return [False] * len(examples)
    keys = [ex.prompt_hash for ex in examples]
    prompts = list(dict.fromkeys(keys))
    if len(prompts) < 2:
        raise DataError(f"val_fraction={val_fraction} needs at least 2 distinct prompts")
    n_val = min(max(1, math.floor(val_fraction * len(prompts) + 0.5)), len(prompts) - 1)
    random.Random(seed).shuffle(prompts)
    chosen = set(prompts[:n_val])
    return [key in chosen for key in keys]


_MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(_MESSAGE)),
        ("ability", pa.string()),
        (
            "reward_model",
            pa.struct([("style", pa.string()), ("ground_truth", pa.list_(pa.string()))]),
        ),
        (
            "extra_info",
            pa.struct(
                [
                    ("split", pa.string()),
                    ("index", pa.int64()),
                    ("dataset", pa.list_(pa.string())),
                    ("source_file", pa.string()),
                    ("source_row", pa.int64()),
                    ("prompt_hash", pa.string()),
                ]
            ),
        ),
    ]
)


_JUDGE_FIELDS = ("query", "source_lang", "target_lang")
_EXTRA = SCHEMA.field("extra_info").type
#: The schema of judge-paid data: `extra_info` also carries what the judge is shown.
JUDGED_SCHEMA = SCHEMA.set(
    SCHEMA.get_field_index("extra_info"),
    pa.field(
        "extra_info",
        pa.struct(
            [*_EXTRA, *(pa.field(name, pa.string()) for name in (*_JUDGE_FIELDS, "raw_query"))]
        ),
    ),
)


def raw_query(messages: Sequence[Mapping[str, Any]]) -> str:
    """The prompt as open-instruct shows it to an LM judge: each turn ``role: content``, one a
    line (its ``raw_prompt``)."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


def to_verl_row(example: RlvrExample, split: str, index: int) -> dict[str, Any]:
    """One verl RL row: ``data_source`` is the first verifier (verl groups metrics by it), the
    labels a list (``reward_model.ground_truth``) paired with ``extra_info.dataset``; a row a
    judge pays also what the judge is shown (``extra_info.query``, ``source_lang``,
    ``target_lang``)."""
    row: dict[str, Any] = {
        "data_source": example.verifiers[0],
        "prompt": [{"role": r, "content": c} for r, c in example.messages],
        "ability": "rlvr",
        "reward_model": {"style": "rule", "ground_truth": list(example.labels)},
        "extra_info": {
            "split": split,
            "index": index,
            "dataset": list(example.verifiers),
            "source_file": example.origin.file,
            "source_row": example.origin.row,
            "prompt_hash": example.prompt_hash,
        },
    }
    if example.judge_input is not None:
        row["extra_info"].update(zip(_JUDGE_FIELDS, example.judge_input, strict=True))
        # an LLM judge (reward.judge_mode llm) is shown the prompt as open-instruct shows it
        row["extra_info"]["raw_query"] = raw_query(row["prompt"])
    return row


def prepare_rlvr(
    inputs: PathLike | MixPart | Sequence[PathLike | MixPart],
    output: PathLike,
    *,
    val_fraction: float = 0.0,
    seed: int = 0,
    remap_verifier: Mapping[str, str] | None = None,
    skip_invalid: bool = False,
    tokenizer: Any = None,
    max_prompt_length: int | None = None,
    judge_datasets: Sequence[str] = (),
    system_prompt: str | None = None,
    chat_template: str | None = None,
) -> PrepareResult:
    """Read, check and split RLVR rows; write verl RL parquet (train, val) and a report, together.

    With `tokenizer` and `max_prompt_length`, prompts longer than that (chat-templated, counted as
    verl counts them) are dropped, counted and listed as `prompt_too_long`; with `system_prompt`,
    every prompt's system turn is it (counted in that length too); `chat_template` (Jinja) is what
    the lengths are counted with, in place of the tokenizer's own."""
    if not 0 <= val_fraction < 1:
        raise DataError(f"val_fraction must be in [0, 1), got {val_fraction}")
    if (tokenizer is None) != (max_prompt_length is None):
        raise DataError("tokenizer and max_prompt_length go together")
    train_path, val_path, report_path = output_paths(output)
    read = read_rlvr(
        inputs,
        remap_verifier=remap_verifier,
        skip_invalid=skip_invalid,
        judge_datasets=judge_datasets,
        system_prompt=system_prompt,
    )
    too_long = 0
    if tokenizer is not None and max_prompt_length is not None and read.examples:
        too_long = _drop_overlong(read, load_tokenizer(tokenizer), max_prompt_length, chat_template)
    if not read.examples:
        raise DataError(
            f"no rows left to write: read {read.rows_read}, {len(read.dropped)} dropped "
            f"({too_long} longer than max_prompt_length={max_prompt_length})"
        )
    in_val = split_val(read.examples, val_fraction, seed)
    splits = {
        "train": [ex for ex, v in zip(read.examples, in_val, strict=True) if not v],
        "val": [ex for ex, v in zip(read.examples, in_val, strict=True) if v],
    }
    judged = any(ex.judge_input is not None for ex in read.examples)
    schema = JUDGED_SCHEMA if judged else SCHEMA
    payloads: list[tuple[str, bytes]] = []
    split_reports: dict[str, Any] = {}
    for split, members in splits.items():
        if split == "val" and val_fraction <= 0:
            continue
        rows = [to_verl_row(ex, split, i) for i, ex in enumerate(members)]
        path = train_path if split == "train" else val_path
        payloads.append((path, parquet_bytes(pa.Table.from_pylist(rows, schema=schema))))
        split_reports[split] = {
            "path": path,
            "rows": len(rows),
            "prompts": len({ex.prompt_hash for ex in members}),
            "verifiers": dict(sorted(Counter(v for ex in members for v in ex.verifiers).items())),
            "sha256": hashlib.sha256(payloads[-1][1]).hexdigest(),
        }
        if read.mixer:
            split_reports[split]["sources"] = dict(Counter(ex.part for ex in members))
    reasons = Counter(d.reason for d in read.dropped)
    report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "judgeflow_version": judgeflow.__version__,
        "kind": "rlvr",
        "inputs": [
            {"path": s.path, "rows_read": s.rows_read, "rows_used": s.rows_used}
            for s in read.inputs
        ],
        "parameters": {
            "val_fraction": val_fraction,
            "seed": seed,
            "remap_verifier": dict(remap_verifier or {}),
            "skip_invalid": skip_invalid,
            "max_prompt_length": max_prompt_length,
            **({"system_prompt": system_prompt} if system_prompt is not None else {}),
            **({"chat_template": chat_template} if chat_template is not None else {}),
            **(
                {"judge_datasets": sorted({d.lower() for d in judge_datasets})}
                if judge_datasets
                else {}
            ),
        },
        "counts": {
            "rows_read": read.rows_read,
            "rows_dropped": {reason: reasons[reason] for reason in ("invalid", "prompt_too_long")},
            "rows_written": {s: r["rows"] for s, r in split_reports.items()},
            "examples_written": {s: r["rows"] for s, r in split_reports.items()},
        },
        "dropped": {
            "total": len(read.dropped),
            "by_reason": dict(sorted(reasons.items())),
            "unknown_verifiers": {
                name: len(rows) for name, rows in sorted(read.unknown_verifiers.items())
            },
            "listed_limit": MAX_LISTED_DROPS,
            "listed": [d.to_dict() for d in read.dropped[:MAX_LISTED_DROPS]],
        },
        "splits": {"train": split_reports["train"], "val": split_reports.get("val")},
    }
    if read.mixer:
        report["mixer"] = _mixer_report(read)
    stale_val = "val" not in split_reports and exists(val_path)
    report["removed_stale_files"] = [val_path] if stale_val else []
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    atomic_write_many([*payloads, (report_path, text.encode("utf-8"))])  # the report last
    if stale_val:  # an earlier run's validation split must not pass for this one's
        remove(val_path)
    return PrepareResult(
        train_path=train_path,
        val_path=val_path if "val" in split_reports else None,
        report_path=report_path,
        report=report,
    )
