"""A trained judge pays a policy: judge-paid RLVR's reward, in verl's ``batch`` signature.

Rows whose ``dataset`` is one of ``judge_datasets`` are scored by a judgeflow judge, beside the
verifiers, and composed as open-instruct composes its LM-judge verifier (:func:`compose`):
``verification_reward × judge score``, behind the R1 format gate when it is on. The judge sees
the response's answer (the thinking and the answer tags removed, as open-instruct's judge sees
it) under the row's question (``extra_info.query``, the prompt's last user turn):

- **pointwise**: the answer alone; its ``<score>`` (0–4) pays score / 4;
- **pairwise**: the answer against the row's reference answer (its ground truth), judged in both
  orders; a consistent verdict for the answer pays 1, for the reference 0, an inconsistent one 0
  (counted);
- **GRRM**: the rollouts of one prompt ranked together in one call (a rollout alone is ranked
  against the reference), each paid its score / 10 (a score off the 0-10 scale is a malformed
  reply). The source is the row's question (``extra_info.query``: a row's own ``query``, else its
  last user turn) and the languages ``extra_info.source_lang`` / ``target_lang``. A call ranks at
  most ``MAX_CANDIDATES`` (8): a larger group (``rollout_n`` > 8) is split into near-equal calls
  in rollout order (``_grrm_chunks``: 12 as 6 + 6, 9 as 5 + 4, never a call of one). The scores
  of different calls are on the same absolute 0-10 scale, but their rollouts were never ranked
  against each other: the judge's consistency within a call does not hold across calls, so GRPO's
  advantages (each reward against the whole group's mean) mix two judgements; a group of at most
  8 is one call.

A reply that does not parse pays 0 and is counted (``judge_format_failure`` 1); a pairwise
verdict that changes with the order pays 0 and is counted (``judge_inconsistent`` 1). Each call's
counts, and the limit that stops a run whose judge keeps failing (``judge_max_failure_rate``), are
``judgeflow.inference.judge_failures``'s. With ``judge_unscored`` the judge is not called and its
rows score as such a reply (verl's validation mode: judgeflow discards those scores and scores the
generations itself).

The judge runs in this process (``judge_weights``: HF generation, ``judge_batch_size`` rows a
call) or is served (``judge_url``, ``judgeflow.inference.served_judge_client``): MLflow's scoring
server (``/invocations``, as ``mlflow models serve`` starts it; ``judge_batch_size`` rows a
request) or an OpenAI-compatible server (``/v1/chat/completions``: one prompt a request, parsed as
in this process), ``judge_concurrency`` requests in flight, each retried while the judge is
unreachable, for up to ``judge_retry_s`` seconds, before the call raises (never paying 0).
verl's ``batch`` reward manager calls :func:`compute_score` once per step with every rollout of
the step; judgeflow's TRL engine does the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from judgeflow.inference.judge_failures import FailureWindow, JudgeCounts, window_for
from judgeflow.inference.served_judge_client import (
    DEFAULT_RETRY_S,
    DEFAULT_TIMEOUT_S,
    ServedJudge,
)
from judgeflow.rewards.rlvr.compose import Rollout
from judgeflow.rewards.rlvr.score import (
    response_tokens,
    sandbox_for,
    score_rollout,
    split_settings,
)
from judgeflow.rewards.rlvr.verifiers import reference_f1, remove_thinking_section

__all__ = [
    "JUDGE_KEYS",
    "JudgeClient",
    "JudgedItem",
    "LocalJudge",
    "ServedJudge",
    "compute_score",
    "is_judge_paid",
    "judge_scores",
]

#: ``compute_score``'s keywords that say which judge pays and how it is called.
JUDGE_KEYS = (
    "judge_weights",
    "judge_panel_weights",  # more judges (reward.judge_panel): the lowest score pays
    "judge_url",
    "judge_mode",
    "judge_datasets",
    "judge_batch_size",
    "judge_max_new_tokens",
    "judge_concurrency",
    "judge_api",  # a served judge: its protocol, model, time limits (served_judge_client)
    "judge_model",
    "judge_timeout_s",
    "judge_retry_s",
    "judge_server_status",  # the judge served inside the job's allocation: why it exited
    "judge_unscored",
    "judge_max_failure_rate",  # the limit that stops a run whose judge keeps failing
    "judge_log_counts",  # print each call's counts (verl: its log follower reads them)
)
_GRRM_MAX = 10  # GRRM's scores are integers from 0 to 10
_POINTWISE_MAX = 4


@dataclass(frozen=True)
class JudgedItem:
    """One rollout as the judge sees it."""

    query: str
    answer: str
    reference: str
    group: str  # rollouts of one prompt share it (GRRM ranks them together)
    source_lang: str | None = None
    target_lang: str | None = None
    verifier: str = ""  # an LLM judge (mode llm): the row's LM-judge verifier, its prompt


class JudgeClient(Protocol):
    """Verdicts (``judgeflow.inference.verdicts.judge``'s) for judge input rows, in order."""

    mode: str

    def verdicts(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]: ...


@dataclass
class LocalJudge:
    """The judge in this process: HF generation over its weights, ``batch_size`` rows a call."""

    weights: str  # a local folder or a store URI (fetched on first use)
    mode: str
    max_new_tokens: int
    batch_size: int = 16
    generator: Any = None  # a judgeflow Generator; default: HFGenerator over `weights`
    calls: int = field(default=0, init=False)

    def verdicts(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        from judgeflow.inference.verdicts import judge

        if self.generator is None:  # the weights are fetched (a remote store) once, here
            from judgeflow.engines.generate import HFGenerator
            from judgeflow.storage import local_weights

            weights = local_weights(self.weights)
            self.generator = HFGenerator(weights, batch_size=self.batch_size)
        out: list[dict[str, Any]] = []
        for start in range(0, len(rows), self.batch_size):
            batch = rows[start : start + self.batch_size]
            out += judge(self.generator, self.mode, batch, max_new_tokens=self.max_new_tokens)  # type: ignore[arg-type]
            self.calls += 1
        return out


@dataclass
class JudgeScores:
    """Per item, the judge's score (0 to 1; None: its reply did not parse) and whether its
    pairwise verdicts changed with the order; the counts; a reply that did not parse (its
    `reasoning`, when the verdict kept one)."""

    scores: list[float | None]
    format_failures: int = 0
    inconsistent: int = 0
    flipped: list[bool] = field(default_factory=list)  # empty: none
    example: str | None = None


def _grrm_chunks(members: list[int]) -> list[list[int]]:
    """A prompt's rollouts in near-equal calls of at most MAX_CANDIDATES (each ≥ 2 when n ≥ 2)."""
    from judgeflow.data.grrm_template import MAX_CANDIDATES

    calls = math.ceil(len(members) / MAX_CANDIDATES)
    size, extra = divmod(len(members), calls)
    chunks, start = [], 0
    for k in range(calls):
        end = start + size + (k < extra)
        chunks.append(members[start:end])
        start = end
    return chunks


def judge_scores(client: JudgeClient, items: Sequence[JudgedItem]) -> JudgeScores:
    """The judge's score of each item, in as few calls as its batch size allows. An empty
    answer is not shown to a judgeflow judge (there is nothing to judge): it scores 0; an LLM
    judge (open-instruct's LM-judge verifiers) is asked about it, as open-instruct asks."""
    asked = [i for i, it in enumerate(items) if _shown(it, client)]
    found = _judge_scores(client, [items[i] for i in asked])
    scores: list[float | None] = [0.0] * len(items)
    flipped = [False] * len(items)
    for k, (i, score) in enumerate(zip(asked, found.scores, strict=True)):
        scores[i] = score
        flipped[i] = bool(found.flipped) and found.flipped[k]
    return JudgeScores(scores, found.format_failures, found.inconsistent, flipped, found.example)


def _shown(item: JudgedItem, client: JudgeClient | None) -> bool:
    """Whether the judge is asked about an item: any answer for an LLM judge, else a non-empty
    one."""
    return bool(item.answer.strip()) or (client is not None and client.mode == "llm")


def panel_scores(found: Sequence[JudgeScores]) -> JudgeScores:
    """A panel's verdict on each item: the lowest of its judges' scores (a wrong answer must
    fool every judge), None where any judge's reply did not parse, flipped where any judge's
    pairwise verdicts changed with the order; the counts over the combined scores."""
    first, *others = found
    if not others:
        return first
    scores: list[float | None] = []
    for each in zip(*(f.scores for f in found), strict=True):
        scores.append(None if any(x is None for x in each) else min(each))
    flipped = [
        any(each) for each in zip(*(f.flipped or [False] * len(scores) for f in found), strict=True)
    ]
    example = next((f.example for f in found if f.example), None)
    return JudgeScores(scores, scores.count(None), sum(flipped), flipped, example)


def _failed_example(verdicts: Sequence[Mapping[str, Any]]) -> str | None:
    """What a reply that did not parse said, where its verdict kept it (`reasoning`)."""
    failed = (str(v["reasoning"]) for v in verdicts if not v.get("valid") and v.get("reasoning"))
    return next(failed, None)


def _judge_scores(client: JudgeClient, items: Sequence[JudgedItem]) -> JudgeScores:
    mode = client.mode
    if mode == "pointwise":
        rows = [{"query": it.query, "response": it.answer} for it in items]
        verdicts = client.verdicts(rows) if rows else []
        scores = [
            None
            if not v.get("valid") or v.get("score") is None
            else float(v["score"]) / _POINTWISE_MAX
            for v in verdicts
        ]
        example = _failed_example(verdicts)
        return JudgeScores(scores, format_failures=scores.count(None), example=example)
    if mode == "pairwise":
        rows = [
            {"query": it.query, "response_a": it.answer, "response_b": it.reference} for it in items
        ]
        verdicts = client.verdicts(rows) if rows else []
        out = JudgeScores([], example=_failed_example(verdicts))
        for v in verdicts:
            flipped = bool(v.get("valid")) and not v.get("consistent")
            out.flipped.append(flipped)
            if not v.get("valid"):
                out.scores.append(None)
                out.format_failures += 1
            elif flipped:
                out.scores.append(0.0)
                out.inconsistent += 1
            else:
                out.scores.append(1.0 if v.get("better") == "A" else 0.0)
        return out
    if mode == "grrm":
        return _grrm_scores(client, items)
    if mode == "llm":  # open-instruct's LM-judge verifiers (judgeflow.rewards.rlvr.llm_judge)
        rows = [
            {"verifier": it.verifier, "query": it.query, "response": it.answer,
             "label": it.reference}
            for it in items
        ]  # fmt: skip
        verdicts = client.verdicts(rows) if rows else []
        scores = [float(v["score"]) if v.get("valid") else None for v in verdicts]
        return JudgeScores(scores, scores.count(None), example=_failed_example(verdicts))
    raise ValueError(f"judge_mode {mode!r}: a judge is pointwise, pairwise, grrm or llm")


def _grrm_scores(client: JudgeClient, items: Sequence[JudgedItem]) -> JudgeScores:
    groups: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(it.group, []).append(i)
    calls: list[tuple[list[int], dict[str, Any]]] = []
    for members in groups.values():
        for chunk in _grrm_chunks(members):
            first = items[chunk[0]]
            if not first.source_lang or not first.target_lang:
                raise ValueError(
                    "a GRRM judge ranks translations: the row needs source_lang and target_lang "
                    f"(row of question {first.query[:60]!r})"
                )
            texts = [items[i].answer for i in chunk]
            if len(texts) == 1:  # ranked against the reference
                texts.append(first.reference)
            row = {
                "source": first.query,
                "translations": texts,
                "source_lang": first.source_lang,
                "target_lang": first.target_lang,
            }
            calls.append((chunk, row))
    verdicts = client.verdicts([row for _, row in calls]) if calls else []
    out = JudgeScores([None] * len(items), example=_failed_example(verdicts))
    for (chunk, _), v in zip(calls, verdicts, strict=True):
        if not v.get("valid") or not v.get("scores"):
            out.format_failures += len(chunk)
            continue
        scores = [float(x) for x in v["scores"][: len(chunk)]]
        if any(not 0 <= x <= _GRRM_MAX for x in scores):  # off the 0-10 scale: not a verdict
            out.format_failures += len(chunk)
            continue
        for i, score in zip(chunk, scores, strict=True):
            out.scores[i] = score / _GRRM_MAX
    return out


_clients: dict[tuple[Any, ...], JudgeClient] = {}  # one per judge and settings, kept loaded


def client_for(settings: Mapping[str, Any]) -> JudgeClient:
    """The judge ``settings`` (``JUDGE_KEYS``) name, made once per process."""
    mode = str(settings.get("judge_mode") or "")
    tokens = int(settings.get("judge_max_new_tokens") or 0)
    if not mode or tokens < 1:
        raise ValueError("a judge-paid reward needs judge_mode and judge_max_new_tokens")
    batch = int(settings.get("judge_batch_size") or 16)
    url, weights = settings.get("judge_url"), settings.get("judge_weights")
    if not url and not weights:
        raise ValueError("a judge-paid reward needs judge_weights or judge_url")
    served = ("judge_concurrency", "judge_api", "judge_model", "judge_timeout_s", "judge_retry_s",
              "judge_server_status")  # fmt: skip
    key = (url, weights, mode, tokens, batch, *(settings.get(k) for k in served))
    retry = settings.get("judge_retry_s")
    if key not in _clients:
        _clients[key] = (
            ServedJudge(
                str(url),
                mode,
                tokens,
                batch,
                concurrency=int(settings.get("judge_concurrency") or 4),
                timeout_s=float(settings.get("judge_timeout_s") or DEFAULT_TIMEOUT_S),
                retry_s=float(DEFAULT_RETRY_S if retry is None else retry),  # 0: no retries
                api=str(settings.get("judge_api") or "auto"),
                model=settings.get("judge_model") or None,
                server_status=settings.get("judge_server_status") or None,
            )
            if url
            else LocalJudge(str(weights), mode, tokens, batch)
        )
    return _clients[key]


def compute_score(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    *,
    client: JudgeClient | None = None,
    panel: Sequence[JudgeClient] | None = None,
    failures: FailureWindow | None = None,
    **kwargs: Any,
) -> list[dict[str, float]]:
    """Every rollout's reward (``rlvr.score.compute_score``'s parts) plus ``judged`` (1 where
    the judge scored it), ``judge_reward`` (what the judge paid), ``judge_format_failure`` (its
    reply did not parse), ``judge_inconsistent`` (pairwise: its verdicts changed with the order)
    and ``reference_f1`` (the answer against the judge row's reference: open-instruct's
    F1, an independent measure of the same rows). With a panel (``judge_panel_weights``)
    every judge scores every item and the lowest score pays (:func:`panel_scores`).
    ``client`` and ``panel`` stand in for the judges the settings name (tests, benchmarks);
    ``failures`` is the window ``judge_max_failure_rate`` is
    checked over (default: this process's, per judge; see ``judge_failures``)."""
    n = len(solution_strs)
    given = [None] * n if extra_infos is None else list(extra_infos)  # verl: a numpy array
    extras = [dict(e or {}) for e in given]
    judge_settings = {k: kwargs.pop(k) for k in JUDGE_KEYS if k in kwargs}
    routed = {d.lower() for d in judge_settings.get("judge_datasets") or ()}
    llm = judge_settings.get("judge_mode") == "llm"
    rules, bounds, finish_default, count_tokens = split_settings(kwargs)
    box = sandbox_for(bounds)

    rollouts, items, where = [], [], []
    for i, (source, response, truth, extra) in enumerate(
        zip(data_sources, solution_strs, ground_truths, extras, strict=True)
    ):
        datasets = extra.get("dataset") or source
        rollout = Rollout(
            response, truth, datasets, str(extra.get("finish_reason") or finish_default),
            response_tokens(extra),
        )  # fmt: skip
        rollouts.append(rollout)
        names = [datasets] if isinstance(datasets, str) else list(datasets)
        labels = list(truth) if isinstance(truth, list | tuple) else [truth]
        paid = next(
            ((d.lower(), str(lab)) for d, lab in zip(names, labels, strict=False)
             if d.lower() in routed),
            None,
        )  # fmt: skip
        if paid is not None:
            where.append(i)
            items.append(_item(response, paid, extra, llm))
    judged: list[float | None] = [None] * n
    flipped = [False] * n
    if not judge_settings.get("judge_unscored"):
        found = JudgeScores([])
        if items:
            if client is None:
                client = client_for(judge_settings)
            if panel is None:
                panel = [
                    client_for({**judge_settings, "judge_weights": weights})
                    for weights in judge_settings.get("judge_panel_weights") or ()
                ]
            found = panel_scores([judge_scores(c, items) for c in (client, *panel)])
            for i, score, odd in zip(where, found.scores, found.flipped, strict=True):
                judged[i], flipped[i] = score, odd
        _count(found, items, judge_settings, client, failures)

    item_of = dict(zip(where, items, strict=True))  # rollout index -> what the judge saw
    results = []
    for i, rollout in enumerate(rollouts):
        item = item_of.get(i)
        row = score_rollout(
            rollout, rules, box, judged=judged[i], judge_datasets=routed, count_tokens=count_tokens
        )
        row |= {
            "judged": float(item is not None),
            "judge_format_failure": float(item is not None and judged[i] is None),
            "judge_inconsistent": float(flipped[i]),
            "reference_f1": reference_f1(rollout.response, item.reference) if item else 0.0,
        }
        results.append(row)
    return results


def _item(response: str, paid: tuple[str, str], extra: Mapping[str, Any], llm: bool) -> JudgedItem:
    """What the judge is shown of one rollout. A judgeflow judge: the row's question and the
    answer without its thinking and answer tags. An LLM judge (open-instruct's LM-judge
    verifiers): the whole prompt as open-instruct shows it (``extra.raw_query``) and the
    response, whose final answer its prompt takes (``llm_judge.final_answer``)."""
    verifier, reference = paid
    query = str(extra.get("query") or "")
    return JudgedItem(
        query=str(extra.get("raw_query") or query) if llm else query,
        answer=response if llm else remove_thinking_section(response),
        reference=reference,
        group=f"{extra.get('index', '')}\0{query}",
        source_lang=extra.get("source_lang"),
        target_lang=extra.get("target_lang"),
        verifier=verifier,
    )


def _count(
    found: JudgeScores,
    items: Sequence[JudgedItem],
    settings: Mapping[str, Any],
    client: JudgeClient | None,
    failures: FailureWindow | None,
) -> None:
    """One call's counts: printed as a line with ``judge_log_counts`` (verl's log follower
    reads it), and the judge's replies (to the answers it was shown) checked against
    ``judge_max_failure_rate``."""
    failed = [s is None for s, it in zip(found.scores, items, strict=True) if _shown(it, client)]
    if settings.get("judge_log_counts"):
        counts = JudgeCounts(len(items), len(failed), found.format_failures, found.inconsistent)
        print(counts.line(), flush=True)
    limit = settings.get("judge_max_failure_rate")
    if limit is None or client is None:
        return
    window = failures if failures is not None else window_for(client)
    tokens = settings.get("judge_max_new_tokens")
    judge = f"the {client.mode} judge paying this policy (max_new_tokens={tokens})"
    window.add(failed, float(limit), example=found.example, judge=judge)


def is_judge_paid(settings: Mapping[str, Any]) -> bool:
    """Whether reward settings name a paying judge (``judge_weights`` or ``judge_url``)."""
    return bool(settings.get("judge_weights") or settings.get("judge_url"))
