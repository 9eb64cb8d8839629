"""`judgeflow judge`: a trained judge over every row of an unlabeled file.

Rows come as plain columns (`INPUT_COLUMNS`), OpenJudge rows (labels ignored) or RewardBench2
rows; GRRM rows as plain columns or TowerBlocks-MT-Ranking rows (`src_text`, `src_lang`,
`trg_lang`, `mt_texts`; scores ignored); a bad row is named by file, row and field, like `prepare`, and dropped only when asked
(then counted). Verdicts are appended to a progress file as each batch finishes, so a run that
is killed resumes where it stopped and never judges a recorded row again; the output is written
whole at the end (a temporary name, then a rename) and the progress file removed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from judgeflow.data.errors import DataError, DataValidationError, OutputWriteError, RowIssue
from judgeflow.data.grrm_template import MAX_CANDIDATES, MIN_CANDIDATES, language_name
from judgeflow.data.io import atomic_write_bytes, parquet_bytes, sha256_file
from judgeflow.data.readers import iter_records
from judgeflow.engines.generate import Generator
from judgeflow.inference.claim import claim_output, progress_path
from judgeflow.inference.verdicts import INPUT_COLUMNS, judge
from judgeflow.modes import Mode

__all__ = ["JudgingSummary", "judge_file", "read_judge_rows", "summary_metrics"]


class _Bad(Exception):
    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def _string(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        got = "missing" if value is None else f"got {type(value).__name__} {str(value)[:40]!r}"
        raise _Bad(field, f"expected a non-empty string ({got})")
    return value


def _openjudge(record: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The first user message and the answers' contents; labels, if any, are not read."""
    messages, outputs = record.get("input"), record.get("output")
    if not isinstance(messages, list):
        raise _Bad("input", "expected a list of messages")
    users = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise _Bad("input", "no user message; the query is the first message with role 'user'")
    query = _string(messages[users[0]].get("content"), f"input[{users[0]}].content")
    if not isinstance(outputs, list) or not outputs:
        raise _Bad("output", "expected a list of answers")
    answers = []
    for i, item in enumerate(outputs):
        answer = item.get("answer") if isinstance(item, dict) else None
        if not isinstance(answer, dict):
            raise _Bad(f"output[{i}].answer", "expected an object with 'content'")
        answers.append(_string(answer.get("content"), f"output[{i}].answer.content"))
    return query, answers


#: TowerBlocks-MT-Ranking's columns (the GRRM recipe's `data.grrm` defaults) -> ours.
_TOWERBLOCKS = {
    "src_text": "source",
    "mt_texts": "translations",
    "src_lang": "source_lang",
    "trg_lang": "target_lang",
}


def _translations(value: Any, field: str) -> list[str]:
    if hasattr(value, "tolist"):  # a numpy array: a parquet list cell through pandas
        value = value.tolist()
    if not isinstance(value, list) or not MIN_CANDIDATES <= len(value) <= MAX_CANDIDATES:
        got = f"{len(value)} items" if isinstance(value, list) else type(value).__name__
        raise _Bad(
            field,
            f"expected a list of {MIN_CANDIDATES} to {MAX_CANDIDATES} translations (got {got})",
        )
    return [_string(text, f"{field}[{i}]") for i, text in enumerate(value)]


def _grrm_row(record: dict[str, Any], rid: str) -> dict[str, Any]:
    """A group to rank: plain columns, or a TowerBlocks row under its own names."""
    names = _TOWERBLOCKS if "src_text" in record else {c: c for c in INPUT_COLUMNS["grrm"]}
    out: dict[str, Any] = {"id": rid}
    for theirs, ours in names.items():
        if ours == "translations":
            out[ours] = _translations(record.get(theirs), theirs)
        else:
            out[ours] = _string(record.get(theirs), theirs)
            if ours.endswith("_lang"):
                try:
                    language_name(out[ours])
                except ValueError as exc:
                    raise _Bad(theirs, str(exc)) from None
    return out


def _rows_of(record: Any, row: int, mode: Mode) -> list[dict[str, Any]]:
    """The rows to judge in one record, each with its `id` (the record's, else its row)."""
    if not isinstance(record, dict):
        raise _Bad(None, f"expected a JSON object, got {type(record).__name__}")
    rid = record.get("id")
    rid = str(row) if rid is None or rid == "" else str(rid)
    if mode == "grrm":
        return [_grrm_row(record, rid)]
    if "input" in record and "output" in record:  # OpenJudge
        query, answers = _openjudge(record)
        if mode == "pairwise":
            if len(answers) != 2:
                raise _Bad("output", f"pairwise rows need exactly 2 answers, got {len(answers)}")
            return [{"id": rid, "query": query, "response_a": answers[0], "response_b": answers[1]}]
        if len(answers) == 1:
            return [{"id": rid, "query": query, "response": answers[0]}]
        return [{"id": f"{rid}/{i}", "query": query, "response": a} for i, a in enumerate(answers)]
    if {"prompt", "chosen", "rejected"} <= set(record):  # RewardBench2
        query = _string(record["prompt"], "prompt")
        sides = {}
        for side in ("chosen", "rejected"):
            items = record[side]
            if not isinstance(items, list) or not items:
                raise _Bad(side, "expected a non-empty list of responses")
            sides[side] = [_string(r, f"{side}[{i}]") for i, r in enumerate(items)]
        if mode == "pairwise":  # the first chosen response against each rejected one
            best = sides["chosen"][0]
            return [
                {"id": f"{rid}/{j}", "query": query, "response_a": best, "response_b": other}
                for j, other in enumerate(sides["rejected"])
            ]
        return [
            {"id": f"{rid}/{side}/{i}", "query": query, "response": response}
            for side, responses in sides.items()
            for i, response in enumerate(responses)
        ]
    return [{"id": rid, **{c: _string(record.get(c), c) for c in INPUT_COLUMNS[mode]}}]


def read_judge_rows(
    path: str | Path, mode: Mode, *, skip_invalid: bool = False
) -> tuple[list[dict[str, Any]], list[RowIssue]]:
    """Every row to judge in `path` (jsonl, json or parquet) and the rows found invalid.

    Invalid rows raise one `DataValidationError` naming each (file, row, field), unless
    `skip_invalid`, which drops them and returns them for the summary. Two rows with one id
    are an error: a verdict must name its row."""
    if mode not in INPUT_COLUMNS:
        raise DataError(f"mode {mode!r}: `judgeflow judge` judges pointwise, pairwise or grrm rows")
    name = os.fspath(path)
    rows: list[dict[str, Any]] = []
    issues: list[RowIssue] = []
    seen: dict[str, int] = {}
    for row, record in iter_records(name):
        if isinstance(record, RowIssue):
            issues.append(record)
            continue
        try:
            found = _rows_of(record, row, mode)
            for item in found:
                if item["id"] in seen:
                    raise _Bad("id", f"id {item['id']!r} is also row {seen[item['id']]}'s")
        except _Bad as bad:
            issues.append(RowIssue(name, row, bad.field, bad.message))
            continue
        seen.update({item["id"]: row for item in found})
        rows += found
    if issues and not skip_invalid:
        raise DataValidationError(issues)
    if not rows:
        raise DataError(f"{name}: no row to judge")
    return rows, issues


@dataclass
class JudgingSummary:
    """What a judging run did: rows judged now and before (resumed), dropped, the verdicts."""

    mode: str
    output: str
    total: int
    resumed: int
    dropped: list[RowIssue] = field(default_factory=list)
    verdicts: dict[str, int] = field(default_factory=dict)  # "0".."4" or "A"/"B" -> count
    format_failures: int = 0
    inconsistent: int = 0  # pairwise: both orders well-formed, naming different responses

    @property
    def format_failure_rate(self) -> float:
        return self.format_failures / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain values (a job's result file, an MLflow artifact); dropped rows as messages."""
        return {
            "mode": self.mode, "output": self.output, "total": self.total,
            "resumed": self.resumed, "dropped": [str(issue) for issue in self.dropped],
            "verdicts": self.verdicts, "format_failures": self.format_failures,
            "format_failure_rate": self.format_failure_rate, "inconsistent": self.inconsistent,
        }  # fmt: skip


def summary_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """`judge/…` numbers of a summary (`JudgingSummary.to_dict`) for MLflow: rows, format
    failures, each verdict's share, and for pairs how often the order changed the verdict."""
    n = max(int(summary["total"]), 1)
    out = {"judge/n": float(summary["total"]), "judge/format_failure_rate": summary["format_failure_rate"]}  # fmt: skip
    out |= {f"judge/verdict_{v}": count / n for v, count in summary["verdicts"].items()}
    if summary["mode"] == "pairwise":
        out["judge/inconsistent_rate"] = summary["inconsistent"] / n
    return out


def _recorded(progress: Path, fingerprint: str) -> dict[str, dict[str, Any]]:
    """The verdicts a killed run recorded; a torn last line (killed mid-write) is dropped."""
    if not progress.exists():
        return {}
    raw = progress.read_bytes()
    whole = raw[: raw.rfind(b"\n") + 1]
    if len(whole) != len(raw):
        progress.write_bytes(whole)
    lines = whole.decode().splitlines()
    if not lines:  # killed before its first line
        return {}
    if json.loads(lines[0]).get("judging") != fingerprint:
        raise DataError(
            f"{progress} holds an unfinished judging of other data, another model or other "
            "settings: delete it to start again, or write to another --output"
        )
    return {v["id"]: v for v in map(json.loads, lines[1:])}


def judge_file(
    generator: Generator,
    mode: Mode,
    data: str | Path,
    output: str,
    *,
    model: str,
    max_new_tokens: int,
    batch_size: int,
    skip_invalid: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> JudgingSummary:
    """Judge every row of `data` into `output` (.parquet, else JSON lines), resuming the
    progress file a killed run left for the same data, model and settings."""
    with claim_output(output, os.fspath(data)):
        rows, dropped = read_judge_rows(data, mode, skip_invalid=skip_invalid)
        about = [os.fspath(data), sha256_file(data), model, mode, str(max_new_tokens)]
        fingerprint = hashlib.sha256("\0".join(about).encode()).hexdigest()
        progress = progress_path(output)
        done = _recorded(progress, fingerprint)
        resumed = len(done)
        try:
            _judge_rows(generator, mode, rows, done, progress, fingerprint,
                        max_new_tokens=max_new_tokens, batch_size=batch_size,
                        on_progress=on_progress)  # fmt: skip
        except BaseException:
            if not done:  # nothing was judged: leave nothing behind
                progress.unlink(missing_ok=True)
            raise  # verdicts recorded: kept, and the rerun resumes from them
        ordered = [done[row["id"]] for row in rows]
        try:
            _write(ordered, output)
        except OSError as exc:
            kept = f"it resumes from the {len(done)} verdicts kept in {progress}"
            raise OutputWriteError(output, exc, kept=kept) from None
        progress.unlink()
    return _summary(mode, output, ordered, resumed, dropped)


def _judge_rows(
    generator: Generator,
    mode: Mode,
    rows: Sequence[dict[str, Any]],
    done: dict[str, dict[str, Any]],
    progress: Path,
    fingerprint: str,
    *,
    max_new_tokens: int,
    batch_size: int,
    on_progress: Callable[[int, int], None] | None,
) -> None:
    """Judge the rows not in `done`, a batch at a time, each batch's verdicts appended to the
    progress file (and synced) before the next starts; `done` grows with them."""
    todo = [row for row in rows if row["id"] not in done]
    progress.parent.mkdir(parents=True, exist_ok=True)
    with progress.open("a", encoding="utf-8") as log:
        if not done:
            log.write(json.dumps({"judging": fingerprint}) + "\n")
        if on_progress:
            on_progress(len(done), len(rows))
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            verdicts = judge(generator, mode, batch, max_new_tokens=max_new_tokens)
            lines = [{"id": row["id"], **v} for row, v in zip(batch, verdicts, strict=True)]
            log.write("".join(json.dumps(line) + "\n" for line in lines))
            log.flush()
            os.fsync(log.fileno())
            done.update((line["id"], line) for line in lines)
            if on_progress:
                on_progress(len(done), len(rows))


def _write(verdicts: Sequence[Mapping[str, Any]], output: str) -> None:
    if output.lower().endswith(".parquet"):
        atomic_write_bytes(output, parquet_bytes(pa.Table.from_pylist(list(verdicts))))
    else:
        text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in verdicts)
        atomic_write_bytes(output, text.encode("utf-8"))


def _verdict(mode: str, verdict: Mapping[str, Any]) -> str:
    """What the summary counts: the score, the letter, or GRRM's top-ranked translation(s)."""
    if mode == "grrm":
        return str(verdict["ranking"]).split(">")[0].strip()
    return str(verdict["score"] if mode == "pointwise" else verdict["better"])


def _summary(
    mode: str,
    output: str,
    verdicts: Sequence[Mapping[str, Any]],
    resumed: int,
    dropped: list[RowIssue],
) -> JudgingSummary:
    counts = Counter(_verdict(mode, v) for v in verdicts if v["valid"])
    return JudgingSummary(
        mode=mode,
        output=output,
        total=len(verdicts),
        resumed=resumed,
        dropped=dropped,
        verdicts=dict(sorted(counts.items())),
        format_failures=sum(1 for v in verdicts if not v["valid"]),
        inconsistent=sum(  # a format failure is counted once, as such
            1 for v in verdicts if mode == "pairwise" and v["valid"] and not v["consistent"]
        ),
    )
