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
- **GRRM**: the rollouts of one prompt ranked together in one call (at most ``MAX_CANDIDATES``
  a call; a rollout alone is ranked against the reference), each paid its score / 10 (a score
  off the 0-10 scale is a malformed reply). The source is the row's question
  (``extra_info.query``: a row's own ``query``, else its last user turn) and the languages
  ``extra_info.source_lang`` / ``target_lang``.

A reply that does not parse pays 0 and is counted (``judge_format_failure`` 1). With ``judge_unscored``
the judge is not called and its rows score as such a reply (verl's validation mode: judgeflow
discards those scores and scores the generations itself).

The judge runs in this process (``judge_weights``: HF generation, ``judge_batch_size`` rows a
call) or is served (``judge_url``: MLflow's scoring server's ``/invocations``, as ``mlflow models serve``
starts it; batches sent ``judge_concurrency`` at a time).
verl's ``batch`` reward manager calls :func:`compute_score` once per step with every rollout of
the step; judgeflow's TRL engine does the same.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from judgeflow.rewards.rlvr.compose import Rollout
from judgeflow.rewards.rlvr.score import sandbox_for, score_rollout, split_settings
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
    "judge_url",
    "judge_mode",
    "judge_datasets",
    "judge_batch_size",
    "judge_max_new_tokens",
    "judge_concurrency",
    "judge_unscored",
)
_GRRM_MAX = 10  # GRRM's scores are integers from 0 to 10
_POINTWISE_MAX = 4
#: How long a served judge may take for one request (and `mlflow models serve -t` in Slurm).
SERVED_JUDGE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class JudgedItem:
    """One rollout as the judge sees it."""

    query: str
    answer: str
    reference: str
    group: str  # rollouts of one prompt share it (GRRM ranks them together)
    source_lang: str | None = None
    target_lang: str | None = None


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
            from judgeflow.inference.pyfunc import local_weights

            weights = local_weights(self.weights)
            self.generator = HFGenerator(weights, batch_size=self.batch_size)
        out: list[dict[str, Any]] = []
        for start in range(0, len(rows), self.batch_size):
            batch = rows[start : start + self.batch_size]
            out += judge(self.generator, self.mode, batch, max_new_tokens=self.max_new_tokens)  # type: ignore[arg-type]
            self.calls += 1
        return out


@dataclass
class ServedJudge:
    """A served judge (MLflow's scoring server): ``batch_size`` rows a request, ``concurrency``
    requests at a time."""

    url: str
    mode: str
    max_new_tokens: int
    batch_size: int = 16
    concurrency: int = 4
    timeout_s: float = SERVED_JUDGE_TIMEOUT_S
    calls: int = field(default=0, init=False)

    @property
    def _shown(self) -> str:  # what messages say: no user:password@ or ?token=
        from judgeflow.config.redaction import strip_credentials

        return strip_credentials(self.url)

    def _post(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        body = {"dataframe_records": list(rows), "params": {"max_new_tokens": self.max_new_tokens}}
        request = urllib.request.Request(
            self.url,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                answer = json.loads(reply.read())
        except urllib.error.HTTPError as exc:  # it answered, and refused: say what it said
            text = exc.read().decode(errors="replace")
            said = text if len(text) < 1200 else f"{text[:300]} … {text[-900:]}"  # the cause last
            raise ValueError(
                f"the judge at {self._shown} refused the rows ({exc}): {said}"
            ) from exc
        except OSError as exc:
            raise ConnectionError(
                f"the judge at {self._shown} did not answer ({exc}): is it served there "
                "(`mlflow models serve -m models:/NAME@champion --env-manager local`), or set "
                "reward.judge to judge in process?"
            ) from exc
        predictions = answer.get("predictions", answer) if isinstance(answer, dict) else answer
        if not isinstance(predictions, list) or len(predictions) != len(rows):
            raise ValueError(
                f"the judge at {self.url} answered {len(rows)} rows with {answer!r:.200}"
            )
        return [dict(p) for p in predictions]

    def verdicts(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        batches = [rows[i : i + self.batch_size] for i in range(0, len(rows), self.batch_size)]
        self.calls += len(batches)
        with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
            return [v for done in pool.map(self._post, batches) for v in done]


@dataclass
class JudgeScores:
    """Per item, the judge's score (0 to 1; None: its reply did not parse), and the counts."""

    scores: list[float | None]
    format_failures: int = 0
    inconsistent: int = 0


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
    answer is not shown to the judge (there is nothing to judge): it scores 0."""
    asked = [i for i, it in enumerate(items) if it.answer.strip()]
    found = _judge_scores(client, [items[i] for i in asked])
    scores: list[float | None] = [0.0] * len(items)
    for i, score in zip(asked, found.scores, strict=True):
        scores[i] = score
    return JudgeScores(scores, found.format_failures, found.inconsistent)


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
        return JudgeScores(scores, format_failures=scores.count(None))
    if mode == "pairwise":
        rows = [
            {"query": it.query, "response_a": it.answer, "response_b": it.reference} for it in items
        ]
        verdicts = client.verdicts(rows) if rows else []
        out = JudgeScores([])
        for v in verdicts:
            if not v.get("valid"):
                out.scores.append(None)
                out.format_failures += 1
            elif not v.get("consistent"):
                out.scores.append(0.0)
                out.inconsistent += 1
            else:
                out.scores.append(1.0 if v.get("better") == "A" else 0.0)
        return out
    if mode == "grrm":
        return _grrm_scores(client, items)
    raise ValueError(f"judge_mode {mode!r}: a judge is pointwise, pairwise or grrm")


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
    out = JudgeScores([None] * len(items))
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
    key = (url, weights, mode, tokens, batch, settings.get("judge_concurrency"))
    if key not in _clients:
        _clients[key] = (
            ServedJudge(str(url), mode, tokens, batch, int(settings.get("judge_concurrency") or 4))
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
    **kwargs: Any,
) -> list[dict[str, float]]:
    """Every rollout's reward (``rlvr.score.compute_score``'s parts) plus ``judged`` (1 where
    the judge scored it), ``judge_reward`` (what the judge paid), ``judge_format_failure`` (its
    reply did not parse) and ``reference_f1`` (the answer against the judge row's reference: open-instruct's
    F1, an independent measure of the same rows). ``client`` stands in for the judge the
    settings name (tests, benchmarks)."""
    n = len(solution_strs)
    given = [None] * n if extra_infos is None else list(extra_infos)  # verl: a numpy array
    extras = [dict(e or {}) for e in given]
    judge_settings = {k: kwargs.pop(k) for k in JUDGE_KEYS if k in kwargs}
    routed = {d.lower() for d in judge_settings.get("judge_datasets") or ()}
    rules, bounds, finish_default = split_settings(kwargs)
    box = sandbox_for(bounds)

    rollouts, items, where = [], [], []
    for i, (source, response, truth, extra) in enumerate(
        zip(data_sources, solution_strs, ground_truths, extras, strict=True)
    ):
        datasets = extra.get("dataset") or source
        rollout = Rollout(
            response, truth, datasets, str(extra.get("finish_reason") or finish_default)
        )
        rollouts.append(rollout)
        names = [datasets] if isinstance(datasets, str) else list(datasets)
        labels = list(truth) if isinstance(truth, list | tuple) else [truth]
        reference = next(
            (str(lab) for d, lab in zip(names, labels, strict=False) if d.lower() in routed), None
        )
        if reference is not None:
            where.append(i)
            items.append(
                JudgedItem(
                    query=(query := str(extra.get("query") or "")),
                    answer=remove_thinking_section(response),
                    reference=reference,
                    group=f"{extra.get('index', '')}\0{query}",
                    source_lang=extra.get("source_lang"),
                    target_lang=extra.get("target_lang"),
                )
            )
    judged: list[float | None] = [None] * n
    if items and not judge_settings.get("judge_unscored"):
        if client is None:
            client = client_for(judge_settings)
        found = judge_scores(client, items)
        for i, score in zip(where, found.scores, strict=True):
            judged[i] = score

    item_of = dict(zip(where, items, strict=True))  # rollout index -> what the judge saw
    results = []
    for i, rollout in enumerate(rollouts):
        item = item_of.get(i)
        row = score_rollout(rollout, rules, box, judged=judged[i], judge_datasets=routed)
        row |= {
            "judged": float(item is not None),
            "judge_format_failure": float(item is not None and judged[i] is None),
            "reference_f1": reference_f1(rollout.response, item.reference) if item else 0.0,
        }
        results.append(row)
    return results


def is_judge_paid(settings: Mapping[str, Any]) -> bool:
    """Whether reward settings name a paying judge (``judge_weights`` or ``judge_url``)."""
    return bool(settings.get("judge_weights") or settings.get("judge_url"))
