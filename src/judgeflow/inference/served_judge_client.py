"""A judge served over HTTP, as a judge-paid reward calls it (``reward.judge_url``).

Two protocols (``reward.judge_api``):

- **mlflow**: MLflow's scoring server (``mlflow models serve`` of a judgeflow judge): a batch of
  rows POSTed to ``/invocations`` (``{"dataframe_records": rows, "params": {"max_new_tokens":
  n}}``), one verdict per row in ``predictions``;
- **openai**: an OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, a hosted API): each
  prompt of ``verdicts.judge_prompts`` one ``/v1/chat/completions`` request, greedy, its reply
  parsed by ``verdicts.judge`` as the judge in this process parses its own.

A key, where the server wants one, comes from ``JUDGEFLOW_JUDGE_API_KEY`` only (never another
tool's key, such as ``OPENAI_API_KEY``, to a judge it was not meant for) and goes in the
``Authorization`` header only; it is sent over https, or plain http to a loopback address, and
a judge at a plain http URL elsewhere is refused (:class:`JudgeRefused`) before anything is sent.

One pooled ``httpx.Client`` per judge, at most ``concurrency`` requests in flight. A transient
failure (no connection, a dropped or reset one, a timeout, HTTP 429 or 5xx) is tried again after
an exponential backoff with jitter, or the server's ``Retry-After`` where that is longer (never
sooner: ``0`` or a date past must not make a tight loop), for up to ``retry_s`` seconds in all,
each retry a warning of the ``judgeflow.judge`` logger; then :class:`JudgeUnavailable`. A
refusal (another 4xx) is not retried: :class:`JudgeRefused` says what the server said. A call
that fails raises: a rollout is never paid 0 for it.

Which model answers (``served_model``): an OpenAI server's model (``reward.judge_model``, else
the only one ``GET /v1/models`` lists); a judgeflow MLflow judge says which weights it serves
when asked (``params: {"identify": true}``, ``judgeflow.inference.pyfunc``). A run pins it
(``registry.paying_judge.pin_judge``), and a pinned MLflow judge is checked before it pays.
"""

from __future__ import annotations

import email.utils
import ipaddress
import json
import logging
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from judgeflow.config.policy_reward import served_api
from judgeflow.config.redaction import strip_credentials

__all__ = [
    "API_KEY_VARIABLE",
    "DEFAULT_RETRY_S",
    "DEFAULT_TIMEOUT_S",
    "JudgeRefused",
    "JudgeUnavailable",
    "OpenAIChat",
    "ServedJudge",
    "served_model",
]

DEFAULT_TIMEOUT_S = 600.0  # one request (`reward.judge_timeout_s`)
DEFAULT_RETRY_S = 600.0  # retries of one request, in all (`reward.judge_retry_s`)
#: Where the judge's API key comes from (either protocol).
API_KEY_VARIABLE = "JUDGEFLOW_JUDGE_API_KEY"
_BACKOFF_CAP_S = 60.0
_CONNECT_TIMEOUT_S = 30.0
#: Failures of the connection worth another try: the server may be restarting or overloaded.
#: Not `UnsupportedProtocol` or `LocalProtocolError`: those are ours, the same every time.
_TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
#: Rows an MLflow judge's signature accepts, sent when it is asked which model it serves.
_IDENTIFY_ROWS: dict[str, dict[str, Any]] = {
    "pointwise": {"query": "?", "response": "?"},
    "pairwise": {"query": "?", "response_a": "?", "response_b": "?"},
    "grrm": {"source": "?", "translations": ["?", "?"], "source_lang": "en", "target_lang": "de"},
}
logger = logging.getLogger("judgeflow.judge")


class JudgeUnavailable(RuntimeError):
    """A served judge did not answer in the time its retries were given."""


class JudgeRefused(ValueError):
    """A served judge answered, and refused (HTTP 4xx but 429) or answered what is no verdict;
    or it was not asked at all: its key would go over plain http to another machine."""


def _said(reply: httpx.Response) -> str:
    """What a server said, short (its end kept: the cause is last), without credentials."""
    text = reply.text
    said = text if len(text) < 1200 else f"{text[:300]} … {text[-900:]}"
    return strip_credentials(said.strip())


def _retry_after(reply: httpx.Response) -> float | None:
    """The server's ``Retry-After``, in seconds from now (delta-seconds or an HTTP date)."""
    value = reply.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Http:
    """One pooled client for one judge: ``concurrency`` requests in flight, each retried while it
    fails transiently, for ``retry_s`` seconds in all."""

    def __init__(
        self,
        url: str,
        *,
        concurrency: int,
        timeout_s: float,
        retry_s: float,
        backoff_s: float,
        api_key: str | None,
        server_status: str | None = None,
    ) -> None:
        self.shown = strip_credentials(url)  # what messages and logs say
        self.server_status = server_status
        if api_key and not _key_safe_to(url):
            raise JudgeRefused(
                f"not sending {API_KEY_VARIABLE} to the judge at {self.shown}: plain http to a "
                "host that is not this machine shows the key to anyone on the way (and to the "
                "logs of any proxy). Serve the judge over https, or reach it at a loopback "
                "address (127.0.0.1, localhost; an SSH tunnel, for one), or unset "
                f"{API_KEY_VARIABLE} if it needs no key."
            )
        self.retry_s, self.backoff_s = retry_s, backoff_s
        self.retries = 0  # requests sent again, in all
        self._slots = threading.BoundedSemaphore(max(1, concurrency))
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, _CONNECT_TIMEOUT_S)),
            limits=httpx.Limits(
                max_connections=max(1, concurrency), max_keepalive_connections=max(1, concurrency)
            ),
            headers=headers,
        )

    def close(self) -> None:
        self._client.close()

    def send(self, method: str, url: str, body: Any = None) -> httpx.Response:
        """The server's successful answer to one request, retried while it fails transiently."""
        started, tries = time.monotonic(), 0
        while True:
            tries += 1
            asked: float | None = None
            try:
                with self._slots:
                    reply = self._client.request(method, url, json=body)
            except _TRANSIENT as exc:
                failure = strip_credentials(f"{type(exc).__name__}: {exc}".rstrip(": "))
                cause: Exception = exc
            else:
                if reply.is_success:
                    return reply
                status = reply.status_code
                if status != 429 and status < 500:  # it answered, and refused: say what it said
                    raise JudgeRefused(
                        f"the judge at {self.shown} refused the request (HTTP {status}): "
                        f"{_said(reply)}"
                    )
                failure = f"HTTP {status}: {_said(reply)[:300]}"
                cause = httpx.HTTPStatusError(failure, request=reply.request, response=reply)
                asked = _retry_after(reply)
            gone = self._server_gone()
            if gone:  # the judge served for this job exited: nothing to wait for
                raise JudgeUnavailable(gone) from cause
            spent = time.monotonic() - started
            left = self.retry_s - spent
            # the server's Retry-After, but never sooner than our backoff: `0` or a date
            # past must not make a busy server's every request a tight loop
            delay = max(asked or 0.0, self._backoff(tries, left))
            if left <= 0 or delay > left:
                raise JudgeUnavailable(self._gave_up(spent, tries, failure, asked)) from cause
            self.retries += 1
            logger.warning(
                "the judge at %s: %s; trying again in %.1f s (%.0f s of reward.judge_retry_s=%g "
                "spent)",
                self.shown,
                failure,
                delay,
                spent,
                self.retry_s,
            )
            time.sleep(delay)

    def _server_gone(self) -> str | None:
        """Why the judge served inside this job's allocation exited (its watcher's status
        file, `judgeflow.stages.served_judge`), or None while it runs or for another judge."""
        if not self.server_status:
            return None
        try:
            with open(self.server_status, encoding="utf-8") as status:
                return status.read()
        except FileNotFoundError:
            return None

    def _backoff(self, tries: int, left: float) -> float:
        """Exponential, with jitter (half fixed, half random), never past the time left."""
        ceiling = min(_BACKOFF_CAP_S, self.backoff_s * 2 ** (tries - 1))
        return min(ceiling / 2 + random.uniform(0, ceiling / 2), max(left, 0.0))

    def _gave_up(self, spent: float, tries: int, failure: str, asked: float | None) -> str:
        times = f"{tries} {'try' if tries == 1 else 'tries'} in {spent:.1f} s"
        waited = f"; it asked to wait {asked:.0f} s more (Retry-After)" if asked else ""
        return (
            f"the judge at {self.shown} did not answer: {times} (reward.judge_retry_s="
            f"{self.retry_s:g}){waited}; the last: {failure}. Is it served and reachable there? "
            "The stage stops here, no rollout paid for this call, and resumes from its last "
            "checkpoint when run again. Give a restarting judge longer with reward.judge_retry_s, "
            "a slow one more time per request with reward.judge_timeout_s (or fewer rows a "
            "request: reward.judge_batch_size)."
        )

    def json(self, method: str, url: str, body: Any = None) -> Any:
        reply = self.send(method, url, body)
        try:
            return reply.json()
        except ValueError as exc:
            raise JudgeRefused(
                f"the judge at {self.shown} answered what is not JSON: {_said(reply)[:300]}"
            ) from exc


def _api_key() -> str | None:
    return os.environ.get(API_KEY_VARIABLE) or None


def _key_safe_to(url: str) -> bool:
    """Whether a key may go to ``url``: over https, or plain http to this machine only."""
    parts = urlsplit(url)
    if parts.scheme.lower() == "https":
        return True
    host = (parts.hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _openai_base(url: str) -> str:
    """``…/v1`` of an OpenAI-compatible URL given as its base or its chat completions."""
    return url.rstrip("/").removesuffix("/chat/completions")


@dataclass
class OpenAIChat:
    """A judgeflow ``Generator`` over an OpenAI-compatible server: each chat one
    ``/chat/completions`` request, ``concurrency`` in flight, replies in order."""

    http: _Http
    base: str  # …/v1
    model: str | None = None  # None: the only one the server lists
    concurrency: int = 4
    requests: int = field(default=0, init=False)

    def served_model(self) -> str:
        if self.model is None:
            answer = self.http.json("GET", f"{self.base}/models")
            listed = [m.get("id") for m in (answer or {}).get("data") or [] if isinstance(m, dict)]
            if len(listed) != 1:
                which = ", ".join(map(str, listed)) if listed else "none"
                raise JudgeRefused(
                    f"the judge at {self.http.shown} serves {len(listed)} models ({which}): "
                    "say which judges with reward.judge_model"
                )
            self.model = str(listed[0])
        return self.model

    def generate(
        self,
        prompts: Sequence[Sequence[Mapping[str, str]]],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> list[str]:
        model = self.served_model()
        sampling = {"top_p": top_p, "seed": seed} if temperature > 0 else {}

        def one(messages: Sequence[Mapping[str, str]]) -> str:
            body = {
                "model": model,
                "messages": [dict(m) for m in messages],
                "max_tokens": max_new_tokens,
                "temperature": temperature,
                "stream": False,
                **sampling,
            }
            return self._text(self.http.send("POST", f"{self.base}/chat/completions", body))

        workers = max(1, min(self.concurrency, len(prompts)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            replies = list(pool.map(one, prompts))
        self.requests += len(replies)
        return replies

    def _text(self, reply: httpx.Response) -> str:
        """The reply's text; a reasoning server's separate thinking (vLLM's reasoning parsers)
        back in its ``<think>`` tags, as the judge wrote it. A server that streams although
        asked not to (transformers' ``serve``) is read to its end."""
        if reply.headers.get("content-type", "").startswith("text/event-stream"):
            return self._streamed(reply.text)
        try:
            message = reply.json()["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise JudgeRefused(
                f"the judge at {self.http.shown} answered what is no chat completion: "
                f"{_said(reply)[:300]}"
            ) from exc
        content = message.get("content") or ""
        thought = message.get("reasoning_content") or message.get("reasoning")
        return f"<think>{thought}</think>{content}" if thought else content

    def _streamed(self, text: str) -> str:
        parts = []
        for line in text.splitlines():
            data = line.removeprefix("data:").strip() if line.startswith("data:") else ""
            if not data:
                continue
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:
                raise JudgeRefused(
                    f"the judge at {self.http.shown} failed the request: "
                    f"{strip_credentials(str(chunk['error']))}"
                )
            for choice in chunk.get("choices") or []:
                parts.append((choice.get("delta") or {}).get("content") or "")
        return "".join(parts)


@dataclass
class ServedJudge:
    """A served judge (``reward.judge_url``): MLflow's scoring server, ``batch_size`` rows a
    request, or an OpenAI-compatible server, one prompt a request; ``concurrency`` requests in
    flight, each retried for up to ``retry_s`` seconds. ``calls`` counts the requests answered."""

    url: str
    mode: str
    max_new_tokens: int
    batch_size: int = 16
    concurrency: int = 4
    timeout_s: float = DEFAULT_TIMEOUT_S
    retry_s: float = DEFAULT_RETRY_S
    api: str = "auto"
    #: openai: the model asked (None: the only one listed); mlflow: the weights it must serve
    model: str | None = None
    backoff_s: float = 1.0  # the first retry's delay (doubled each try, with jitter)
    #: a judge served for this job: where its watcher writes why it exited (no retry then)
    server_status: str | None = None
    calls: int = field(default=0, init=False)
    _http: _Http | None = field(default=None, init=False, repr=False)
    _chat: OpenAIChat | None = field(default=None, init=False, repr=False)
    _checked: bool = field(default=False, init=False, repr=False)

    @property
    def protocol(self) -> str:
        return served_api(self.url, self.api)

    @property
    def retries(self) -> int:
        return self._http.retries if self._http else 0

    @property
    def http(self) -> _Http:
        if self._http is None:
            self._http = _Http(
                self.url,
                concurrency=self.concurrency,
                timeout_s=self.timeout_s,
                retry_s=self.retry_s,
                backoff_s=self.backoff_s,
                api_key=_api_key(),
                server_status=self.server_status,
            )
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    def served_model(self) -> str | None:
        """Which model answers here: the OpenAI model asked, or what a judgeflow MLflow judge
        says it serves (None: an MLflow model that does not say)."""
        if self.protocol == "openai":
            return self._openai().served_model()
        body = {"dataframe_records": [_IDENTIFY_ROWS[self.mode]],
                "params": {"identify": True, "max_new_tokens": 1}}  # fmt: skip
        answer = self.http.json("POST", self.url, body)
        predictions = answer.get("predictions", answer) if isinstance(answer, dict) else answer
        first = predictions[0] if isinstance(predictions, list) and predictions else {}
        found = first.get("served_model") if isinstance(first, dict) else None
        return str(found) if found else None

    def verdicts(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        if not rows:
            return []
        if self.mode == "llm" and self.protocol != "openai":
            raise JudgeRefused(
                f"an LLM judge (judge_mode llm) is asked over an OpenAI-compatible API, not "
                f"{self.protocol}: {self.http.shown}"
            )
        if self.protocol == "openai":
            from judgeflow.inference.verdicts import judge
            from judgeflow.rewards.rlvr.llm_judge import llm_verdicts

            chat = self._openai()
            before = chat.requests
            if self.mode == "llm":
                out = llm_verdicts(chat, rows, max_new_tokens=self.max_new_tokens)
            else:
                out = judge(chat, self.mode, rows, max_new_tokens=self.max_new_tokens)  # type: ignore[arg-type]
            self.calls += chat.requests - before
            return out
        self._check_model()
        batches = [rows[i : i + self.batch_size] for i in range(0, len(rows), self.batch_size)]
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(batches)))) as pool:
            done = list(pool.map(self._post, batches))
        self.calls += len(batches)
        return [v for verdicts in done for v in verdicts]

    def _openai(self) -> OpenAIChat:
        if self._chat is None:
            self._chat = OpenAIChat(self.http, _openai_base(self.url), self.model, self.concurrency)
        return self._chat

    def _check_model(self) -> None:
        """A pinned MLflow judge (``model``) pays only while that model answers at the URL."""
        if self.model is None or self._checked:
            return
        found = self.served_model()
        if found != self.model:
            raise JudgeRefused(
                f"the judge at {self.http.shown} serves {found or 'a model that does not say'}, "
                f"but this run was pinned to {self.model} (reward.judge_model): serve that judge "
                "there again, or start a new run (another judge must not pay the same policy)"
            )
        self._checked = True

    def _post(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        body = {"dataframe_records": list(rows), "params": {"max_new_tokens": self.max_new_tokens}}
        answer = self.http.json("POST", self.url, body)
        predictions = answer.get("predictions", answer) if isinstance(answer, dict) else answer
        if not isinstance(predictions, list) or len(predictions) != len(rows):
            raise JudgeRefused(
                f"the judge at {self.http.shown} answered {len(rows)} rows with "
                f"{strip_credentials(repr(answer))[:200]}"
            )
        return [dict(p) for p in predictions]


def served_model(
    url: str,
    mode: str,
    *,
    api: str = "auto",
    model: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retry_s: float = DEFAULT_RETRY_S,
) -> str | None:
    """Which model answers at ``url`` (``ServedJudge.served_model``), asked once."""
    judge = ServedJudge(
        url, mode, 1, concurrency=1, timeout_s=timeout_s, retry_s=retry_s, api=api, model=model
    )
    try:
        return judge.served_model()
    finally:
        judge.close()
