"""What a model trained on, carried in the model directory, and the check that evaluation never
scores a model on a prompt it trained on.

Every stage that trains a model (SFT, GRPO / RLVR) writes `judgeflow-lineage.json` into the
model directory it produces: the prompt hashes (`judgeflow.data.prompt_hashes`) of the rows it
trained on, joined with those of the model it started from, and the list of training stages
behind it. The file travels with the model (artifact store, S3, a registered version), so the
check needs nothing but the model: `judgeflow evaluate some/dir`, `models:/NAME@champion` and the
pipeline's own evaluations all find the same lineage.

Every check ends in one of three statuses (`Overlap.status`), recorded beside the metrics:
`checked` (no scored row was trained on), `overlap-allowed` (some were, and
`evaluation.allow_overlap` scored them: the numbers are inflated) and `unchecked` (the model has
no lineage file: a base model from the Hub, the tiny random model, or weights stripped of it;
nothing is known, which must never read as "0 overlap"). Only checked numbers keep the evaluation
set's own key (`eval_set_for`): the others go under `<set>-overlap` and `<set>-unchecked`, so the
registry never compares them with checked ones.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judgeflow.data.errors import DataError
from judgeflow.data.io import atomic_write_text
from judgeflow.data.prompt_hashes import row_prompt_hash, text_prompt_hash
from judgeflow.modes import JUDGE_MODELS

__all__ = [
    "CHECKED",
    "LINEAGE_FILE",
    "OVERLAP_ALLOWED",
    "STATUSES",
    "UNCHECKED",
    "ContaminationError",
    "Lineage",
    "Overlap",
    "check_overlap",
    "eval_set_for",
    "file_prompt_hashes",
    "file_question_hashes",
    "judge_overlap",
    "overlap_set",
    "question_hash",
    "read_lineage",
    "unchecked_set",
    "write_lineage",
]

LINEAGE_FILE = "judgeflow-lineage.json"
LINEAGE_SCHEMA_VERSION = 1
#: Overlapping rows named in the error and the report (all are counted).
SHOWN = 5

#: What a check found (`Overlap.status`).
CHECKED = "checked"
OVERLAP_ALLOWED = "overlap-allowed"
UNCHECKED = "unchecked"
STATUSES = (CHECKED, OVERLAP_ALLOWED, UNCHECKED)
OVERLAP_SET_SUFFIX = "-overlap"
UNCHECKED_SET_SUFFIX = "-unchecked"


def overlap_set(eval_set: str) -> str:
    """The evaluation-set key of numbers measured with overlap allowed: never the clean set's,
    so the registry never compares them with clean numbers."""
    return eval_set if eval_set.endswith(OVERLAP_SET_SUFFIX) else eval_set + OVERLAP_SET_SUFFIX


def unchecked_set(eval_set: str) -> str:
    """The evaluation-set key of numbers measured on a model without lineage: it may have
    trained on those rows, so they are never compared with checked numbers either."""
    return eval_set if eval_set.endswith(UNCHECKED_SET_SUFFIX) else eval_set + UNCHECKED_SET_SUFFIX


def eval_set_for(eval_set: str, status: str) -> str:
    """Where numbers whose check found `status` are kept: `eval_set` itself only when checked."""
    if status == OVERLAP_ALLOWED:
        return overlap_set(eval_set)
    if status == UNCHECKED:
        return unchecked_set(eval_set)
    return eval_set


class ContaminationError(DataError):
    """The evaluation rows include prompts the model trained on; the message says how many,
    shows some, and names the switch that scores them anyway."""


@dataclass(frozen=True)
class Lineage:
    """The training behind a model: stages oldest first, and every prompt hash they trained on."""

    stages: list[dict[str, Any]]
    prompt_hashes: frozenset[str]
    #: A judge's: the questions it was trained to judge answers to (`question_hash`), so a
    #: policy it pays can be checked for being evaluated on them. None: not recorded (a model
    #: trained before judgeflow recorded them, or a policy).
    question_hashes: frozenset[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema_version": LINEAGE_SCHEMA_VERSION,
            "stages": self.stages,
            "prompt_hashes": sorted(self.prompt_hashes),
        }
        if self.question_hashes is not None:
            out["question_hashes"] = sorted(self.question_hashes)
        return out


def read_lineage(model_dir: str | Path) -> Lineage | None:
    """The lineage file of a local model directory; None when the model has none."""
    path = Path(model_dir) / LINEAGE_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    questions = data.get("question_hashes")
    return Lineage(
        stages=list(data["stages"]),
        prompt_hashes=frozenset(data["prompt_hashes"]),
        question_hashes=frozenset(questions) if questions is not None else None,
    )


def write_lineage(
    model_dir: str | Path,
    *,
    stage: str,
    mode: str,
    data_file: str | Path,
    data_uri: str | None = None,
    start_model: str | Path | None = None,
) -> Lineage:
    """Record in `model_dir` that it was trained by `stage` on `data_file`, starting from
    `start_model` (whose own lineage, if it has one, is carried over)."""
    hashes = file_prompt_hashes(data_file, mode)
    parent = read_lineage(start_model) if start_model and Path(start_model).is_dir() else None
    stages = [*(parent.stages if parent else [])]
    stages.append(
        {
            "stage": stage,
            "data": data_uri or str(data_file),
            "prompts": len(hashes),
            "start_model": str(start_model) if start_model else None,
        }
    )
    questions = None
    if mode in JUDGE_MODELS:  # a judge: the questions behind its prompts, for the policies it pays
        questions = file_question_hashes(data_file)
        if parent is not None and parent.question_hashes is not None:
            questions |= parent.question_hashes
    lineage = Lineage(
        stages,
        frozenset(hashes) | (parent.prompt_hashes if parent else set()),
        frozenset(questions) if questions is not None else None,
    )
    atomic_write_text(Path(model_dir) / LINEAGE_FILE, json.dumps(lineage.to_dict()) + "\n")
    return lineage


def file_prompt_hashes(path: str | Path, mode: str) -> set[str]:
    """The prompt hashes of a prepared file: verl RL rows (`extra_info.prompt_hash`) or an SFT
    `messages` file (`prompt_hash`); computed from the text for files written without them."""
    import pyarrow.parquet as pq

    table = pq.read_table(str(path))
    names = set(table.column_names)
    if "prompt_hash" in names:
        return {str(h) for h in table.column("prompt_hash").to_pylist() if h}
    if "messages" in names:  # an SFT conversation: its user turn is the prompt
        messages = table.column("messages").to_pylist()
        return {row_prompt_hash(mode, {"prompt": m or []}) for m in messages}
    if "prompt" in names:
        return {row_prompt_hash(mode, row) for row in table.select(_row_columns(names)).to_pylist()}
    raise DataError(
        f"{path}: neither verl RL rows (a `prompt` column) nor SFT rows (`messages`); "
        "cannot tell what a model trained on it saw"
    )


def _question(text: str) -> str:
    """The question behind a judge prompt (pointwise or pairwise query, GRRM source text), or
    the text itself."""
    from judgeflow.data.grrm_template import parse_source_text
    from judgeflow.data.templates import parse_pairwise, parse_pointwise

    parsed = parse_pointwise(text) or parse_pairwise(text)
    if parsed is not None:
        return parsed[0]
    return parse_source_text(text) or text


def file_question_hashes(path: str | Path) -> set[str]:
    """`question_hash` of every row of a judge's prepared file (verl RL rows or SFT rows)."""
    import pyarrow.parquet as pq

    table = pq.read_table(str(path))
    column = "prompt" if "prompt" in table.column_names else "messages"
    if column not in table.column_names:
        return set()
    hashes = set()
    for messages in table.column(column).to_pylist():
        users = [str(m.get("content") or "") for m in messages or [] if m.get("role") == "user"]
        if users:
            hashes.add(question_hash(_question(users[-1])))
    return hashes


def question_hash(question: str) -> str:
    """A question, whoever asks it: a policy's prompt or the query inside a judge's prompt."""
    return text_prompt_hash(question)


def judge_overlap(judge_dir: str | Path, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Which of a policy's evaluation `rows` (verl rows) ask a question the judge that pays the
    policy was trained on: flagged, not refused (the policy never trained on them; its judge's
    opinion of its answers there is the judge's training data speaking). `status` is `checked`,
    `overlap` or `unchecked` (the judge's lineage has no questions)."""
    lineage = read_lineage(judge_dir)
    if lineage is None or lineage.question_hashes is None:
        return {"status": UNCHECKED, "rows": len(rows), "overlapping_rows": None, "examples": []}
    found = []
    for i, row in enumerate(rows):
        extra = row.get("extra_info") if isinstance(row.get("extra_info"), Mapping) else {}
        users = [m.get("content", "") for m in row.get("prompt") or [] if m.get("role") == "user"]
        question = str((extra or {}).get("query") or (users[-1] if users else ""))
        if question_hash(question) in lineage.question_hashes:
            found.append({"row": i, "question": _query_start(" ".join(question.split()))})
    return {
        "status": "overlap" if found else CHECKED,
        "rows": len(rows),
        "overlapping_rows": len(found),
        "examples": found[:SHOWN],
    }


def _row_columns(names: set[str]) -> list[str]:
    return [c for c in ("prompt", "extra_info") if c in names]


@dataclass(frozen=True)
class Overlap:
    """Evaluation rows whose prompt is in the model's training data."""

    checked: bool  # False: the model has no lineage, so nothing could be checked
    rows: int  # evaluation rows looked at
    overlapping: list[int] = field(default_factory=list)  # their positions
    examples: list[dict[str, Any]] = field(default_factory=list)  # the first few, for people
    trained_on: list[str] = field(default_factory=list)  # the data behind the model

    @property
    def status(self) -> str:
        """`checked`, `overlap-allowed` (rows it trained on were scored) or `unchecked`."""
        if not self.checked:
            return UNCHECKED
        return OVERLAP_ALLOWED if self.overlapping else CHECKED

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "checked": self.checked,
            "rows": self.rows,
            "overlapping_rows": len(self.overlapping) if self.checked else None,  # unknown
            "examples": self.examples,
            "trained_on": self.trained_on,
        }


def check_overlap(
    model_dir: str | Path,
    rows: Sequence[Mapping[str, Any]],
    mode: str,
    *,
    allow_overlap: bool = False,
    what: str = "the evaluation data",
) -> Overlap:
    """Refuse (ContaminationError) when any of `rows` (verl rows) has a prompt `model_dir`
    trained on, unless `allow_overlap`; either way say which rows overlap."""
    lineage = read_lineage(model_dir)
    if lineage is None:
        return Overlap(checked=False, rows=len(rows))
    hashes = [row_prompt_hash(mode, row) for row in rows]
    overlapping = [i for i, h in enumerate(hashes) if h in lineage.prompt_hashes]
    overlap = Overlap(
        checked=True,
        rows=len(rows),
        overlapping=overlapping,
        examples=[_example(rows[i], i, hashes[i]) for i in overlapping[:SHOWN]],
        trained_on=[str(s.get("data")) for s in lineage.stages],
    )
    if overlapping and not allow_overlap:
        raise ContaminationError(_message(overlap, model_dir, what))
    return overlap


def _example(row: Mapping[str, Any], position: int, prompt_hash: str) -> dict[str, Any]:
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), Mapping) else {}
    users = [m.get("content", "") for m in row.get("prompt") or [] if m.get("role") == "user"]
    text = " ".join(str(users[-1]).split()) if users else ""
    return {
        "row": position,
        "prompt_hash": prompt_hash,
        "source_file": (extra or {}).get("source_file"),
        "source_row": (extra or {}).get("source_row"),
        "prompt_start": _query_start(text),
    }


def _query_start(text: str, chars: int = 80) -> str:
    """The start of the user's query, past the judge template's fixed preamble when present."""
    for marker in ("# Query ", "Source text: ```"):
        if marker in text:
            text = text.split(marker, 1)[1]
            break
    return text[:chars] + ("…" if len(text) > chars else "")


def _message(overlap: Overlap, model_dir: str | Path, what: str) -> str:
    n, total = len(overlap.overlapping), overlap.rows
    lines = [
        f"{n} of {total} rows of {what} have a prompt that {model_dir} trained on "
        f"(its lineage: {', '.join(overlap.trained_on) or 'unknown'}); scoring them would "
        "overstate the judge. First ones:"
    ]
    lines += [
        f"  row {e['row']} (prompt {e['prompt_hash']}"
        + (f", {e['source_file']} row {e['source_row']}" if e.get("source_file") else "")
        + f"): {e['prompt_start']}"
        for e in overlap.examples
    ]
    lines.append(
        "Evaluate on held-out data, or score them anyway with --allow-overlap "
        "(pipelines: --set evaluation.allow_overlap=true); the overlap is then reported, and "
        "the numbers are kept apart from clean ones and cannot promote a registered version."
    )
    return "\n".join(lines)
