"""A served judge that survives (`judgeflow.inference.served_judge_client`): real servers only.

- MLflow's scoring server (`mlflow models serve` of the tiny judge), behind a flaky proxy of the
  tests' own (`servers.FlakyProxy`) that answers 503, drops the connection and answers 429 with
  Retry-After before it forwards: the client retries and returns the judge's own verdicts; a
  judge that never answers, or is not there, stops with `JudgeUnavailable` naming its URL
  without credentials; a refusal is said and not retried; the judge says which weights it serves.
- An OpenAI-compatible server: transformers' own `transformers serve` of the tiny model on CPU,
  offline; the `openai` client talks to it, and judgeflow's client gets the replies the judge in
  this process (`LocalJudge`, `HFGenerator`) gets, greedy, and the same verdicts.
- The model behind a URL is pinned by a run: another model there is another cache key.
- The key: `JUDGEFLOW_JUDGE_API_KEY` only (never `OPENAI_API_KEY`), and never over plain http to
  another machine; a `Retry-After` of 0 or a date past still waits the backoff.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from servers import FlakyProxy, Service, free_port, mlflow_models_serve

from judgeflow.caching import train_key
from judgeflow.config import load_config
from judgeflow.engines.generate import HFGenerator
from judgeflow.inference.judge_reward import LocalJudge, client_for
from judgeflow.inference.pyfunc import save_judge_model, served_weights
from judgeflow.inference.served_judge_client import (
    JudgeRefused,
    JudgeUnavailable,
    ServedJudge,
    served_model,
)
from judgeflow.inference.verdicts import judge_prompts
from judgeflow.registry.paying_judge import TAG_REWARD_JUDGE_MODEL, pin_judge
from judgeflow.retries import is_transient

ROWS = [
    {"query": "What is the capital of France?", "response": "Paris."},
    {"query": "What is 2 + 2?", "response": "It is 5."},
    {"query": "Name a primary colour.", "response": "Blue, or red, or yellow."},
]
PAIRS = [{"query": "What is 2 + 2?", "response_a": "4", "response_b": "It is 5."}]
SECRET = "s3cr3t-for-tests"
REPORT = {"splits": {"train": {"sha256": "a" * 64}, "val": {"sha256": "b" * 64}}}


def _served(url: str, **settings: object) -> list[str]:
    """A judge-paid policy's overrides for a judge served at `url`."""
    given = {"judge_mode": "pointwise", "judge_max_new_tokens": 8, **settings}
    return ["reward.judge=null", f"reward.judge_url={url}",
            *(f"reward.{k}={v}" for k, v in given.items())]  # fmt: skip


@pytest.fixture(scope="module")
def mlflow_judge(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Iterator[str]:
    """`mlflow models serve` of the tiny pointwise judge, as users serve one: its base URL."""
    root = tmp_path_factory.mktemp("mlflow-judge")
    model = save_judge_model(
        root / "judge", {"model_uri": str(tiny_model), "mode": "pointwise", "max_new_tokens": 8}
    )
    service, base = mlflow_models_serve(
        str(model), f"sqlite:///{root / 'mlflow.db'}", root / "serve.log"
    )
    try:
        yield base
    finally:
        service.stop()


@pytest.fixture(scope="module")
def openai_judge(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Iterator[str]:
    """`transformers serve` of the tiny model on CPU, offline (its own OpenAI-compatible server,
    which every request's model name is forced to): its base URL."""
    root = tmp_path_factory.mktemp("openai-judge")
    port = free_port()
    command = [str(Path(sys.executable).parent / "transformers"), "serve", "--host", "127.0.0.1",
               "--port", str(port), "--device", "cpu", "--dtype", "float32",
               "--force_model", str(tiny_model), "--log_level", "warning"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TMPDIR": str(root)}
    service = Service(command, f"http://127.0.0.1:{port}/health", root / "serve.log", env)
    service.start(timeout=180)
    # It loads the model on its first request, and two first requests at once race: one fails
    # ("Cannot copy out of meta tensor") and its connection never answers. One request first,
    # so that every test, in any order, meets a loaded model.
    import httpx

    warm = {"model": str(tiny_model), "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 1, "stream": False}  # fmt: skip
    httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=warm, timeout=300)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        service.stop()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "judgeflow.judge"]


# ---------------------------------------------------------------------------- it survives


@pytest.mark.slow
def test_a_flaky_judge_is_retried_until_it_answers_with_the_judges_own_verdicts(
    mlflow_judge: str, caplog: pytest.LogCaptureFixture
) -> None:
    direct = ServedJudge(f"{mlflow_judge}/invocations", "pointwise", 8, batch_size=2)
    expected = direct.verdicts(ROWS)
    assert len(expected) == 3 and direct.retries == 0
    caplog.set_level(logging.WARNING, logger="judgeflow.judge")
    with FlakyProxy(mlflow_judge, ["503", "drop", "429"], retry_after=1) as proxy:
        judge = ServedJudge(
            f"{proxy.url}/invocations", "pointwise", 8, batch_size=2, concurrency=1, backoff_s=0.01
        )
        assert judge.verdicts(ROWS) == expected
    assert proxy.failed.is_set()
    assert [did for _, _, did, _, _ in proxy.seen] == ["503", "drop", "429", "forwarded", "forwarded"]  # fmt: skip
    assert (judge.retries, judge.calls) == (3, 2)  # 3 rows in requests of 2, answered
    said = _warnings(caplog)
    assert len(said) == 3
    assert "HTTP 503" in said[0] and "RemoteProtocolError" in said[1] and "HTTP 429" in said[2]
    assert "trying again in 1.0 s" in said[2]  # the server's Retry-After, honoured
    assert proxy.seen[3][4] - proxy.seen[2][4] >= 1.0


def test_a_judge_that_is_not_there_stops_with_an_error_naming_it_without_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()  # nobody listens: the connection is refused at once
    url = f"http://judge:{SECRET}@127.0.0.1:{port}/invocations?token={SECRET}"
    caplog.set_level(logging.WARNING, logger="judgeflow.judge")
    judge = ServedJudge(url, "pointwise", 8, retry_s=0.3, backoff_s=0.02)
    with pytest.raises(JudgeUnavailable) as failed:
        judge.verdicts(ROWS)
    message = str(failed.value)
    assert f"the judge at http://127.0.0.1:{port}/invocations?token=***" in message
    assert "ConnectError" in message and "reward.judge_retry_s=0.3" in message
    assert SECRET not in message and all(SECRET not in m for m in _warnings(caplog))
    assert is_transient(failed.value)  # the stage's task is retried, and resumes
    assert judge.retries >= 1 and len(_warnings(caplog)) == judge.retries
    once = ServedJudge(url, "pointwise", 8, retry_s=0)  # one try, no retry
    with pytest.raises(JudgeUnavailable, match="did not answer: 1 try in"):
        once.verdicts(ROWS)
    assert once.retries == 0


def test_a_judge_that_never_answers_times_out_each_try_and_says_what_to_raise() -> None:
    with socket.socket() as silent:  # the connection is taken, no answer ever comes
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        judge = ServedJudge(
            url, "pointwise", 8, timeout_s=0.2, retry_s=0.5, model="judge", backoff_s=0.02
        )
        with pytest.raises(JudgeUnavailable, match="ReadTimeout") as failed:
            judge.verdicts(ROWS[:1])
    assert "reward.judge_timeout_s" in str(failed.value) and judge.retries >= 1
    assert judge.calls == 0  # nothing answered, nothing paid


@pytest.mark.slow
def test_a_refusal_is_said_and_not_retried(mlflow_judge: str) -> None:
    judge = ServedJudge(f"{mlflow_judge}/invocations", "pointwise", 8)
    with pytest.raises(JudgeRefused, match=r"refused the request \(HTTP 400\).*response") as e:
        judge.verdicts([{"query": "What is 2 + 2?"}])  # no response column: MLflow says so
    assert judge.retries == 0 and not is_transient(e.value)  # the same request fails again


@pytest.mark.parametrize("retry_after", [0, "Wed, 21 Oct 2015 07:28:00 GMT"], ids=["0", "past"])
def test_a_retry_after_of_now_still_waits_the_backoff(retry_after: int | str) -> None:
    """A busy server that says `Retry-After: 0` (or a date past) is not asked again at once:
    the client waits its own backoff (0.2 s, then 0.4 s, each at least half that: jitter)."""
    with FlakyProxy("http://127.0.0.1:9", ["429", "429"], retry_after=retry_after,
                    models=["judge-a"]) as proxy:  # fmt: skip
        judge = ServedJudge(f"{proxy.url}/v1", "pointwise", 8, backoff_s=0.2)
        assert judge.served_model() == "judge-a"
    came = [at for _, _, _, _, at in proxy.seen]
    assert [did for _, _, did, _, _ in proxy.seen] == ["429", "429", "listed"]
    assert came[1] - came[0] >= 0.1 and came[2] - came[1] >= 0.2
    assert judge.retries == 2


# ---------------------------------------------------------------------------- its key


def test_the_key_is_judgeflows_own_and_never_another_tools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("JUDGEFLOW_JUDGE_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # the user's own, for another service
    with FlakyProxy("http://127.0.0.1:9", models=["judge-a"]) as proxy:
        assert served_model(f"{proxy.url}/v1", "pointwise", api="openai") == "judge-a"
        monkeypatch.setenv("JUDGEFLOW_JUDGE_API_KEY", "for-the-judge")
        assert served_model(f"{proxy.url}/v1", "pointwise", api="openai") == "judge-a"
    assert [auth for _, _, _, auth, _ in proxy.seen] == [None, "Bearer for-the-judge"]


@pytest.mark.parametrize(
    "url", ["http://judge.invalid:8000/v1", "http://192.0.2.10:5000/invocations",
            "HTTP://judge.invalid/v1/chat/completions"],
)  # fmt: skip
def test_a_key_is_not_sent_over_plain_http_to_another_machine(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hosts that never answer (RFC 6761's .invalid, RFC 5737's documentation network): the
    refusal comes before any connection is tried."""
    monkeypatch.setenv("JUDGEFLOW_JUDGE_API_KEY", SECRET)
    scheme, rest = url.split("://")
    with_password = f"{scheme}://judge:{SECRET}@{rest}?token={SECRET}"
    judge = ServedJudge(with_password, "pointwise", 8, timeout_s=1, retry_s=0)
    with pytest.raises(JudgeRefused) as refused:
        judge.verdicts(ROWS)
    message = str(refused.value)
    assert "not sending JUDGEFLOW_JUDGE_API_KEY to the judge at " in message
    assert f"{rest}?token=***" in message and SECRET not in message
    for advice in ("https", "loopback address", "unset JUDGEFLOW_JUDGE_API_KEY"):
        assert advice in message
    assert not is_transient(refused.value) and judge.calls == 0
    monkeypatch.delenv("JUDGEFLOW_JUDGE_API_KEY")  # no key: nothing to keep safe
    keyless = ServedJudge(url, "pointwise", 8)
    assert keyless.http.shown == url
    keyless.close()


@pytest.mark.parametrize(
    "url", ["https://judge.invalid/v1", "http://127.0.0.1:8000/v1", "http://127.0.0.2/v1",
            "http://localhost:8000/invocations", "http://[::1]:8000/v1"],
)  # fmt: skip
def test_a_key_goes_over_https_or_to_this_machine(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGEFLOW_JUDGE_API_KEY", SECRET)
    judge = ServedJudge(url, "pointwise", 8)
    try:
        assert judge.http.shown == url  # its client is made, nothing sent yet
    finally:
        judge.close()


# ---------------------------------------------------------------------------- which model


@pytest.mark.slow
def test_an_mlflow_judge_says_which_weights_it_serves_and_a_run_is_pinned_to_them(
    mlflow_judge: str, tiny_model: Path
) -> None:
    url = f"{mlflow_judge}/invocations"
    found = served_model(url, "pointwise")
    assert found == served_weights(str(tiny_model), str(tiny_model))
    assert found and found.startswith(f"{tiny_model}@")
    cfg = load_config("rlvr-judged", overrides=_served(url))
    pinned, judge = pin_judge(cfg)
    assert pinned.reward.judge_model == found and judge is not None
    assert judge.tags()[TAG_REWARD_JUDGE_MODEL] == found
    # what the run's reward is given: the pinned judge pays while it answers there
    paying = client_for(pinned.policy_reward_kwargs())
    assert isinstance(paying, ServedJudge) and len(paying.verdicts(ROWS[:1])) == 1
    impostor = ServedJudge(url, "pointwise", 8, model="/models/another-judge@0123")
    with pytest.raises(JudgeRefused, match="pinned to /models/another-judge@0123"):
        impostor.verdicts(ROWS)
    assert impostor.calls == 0


def test_which_weights_a_judge_serves_tells_apart_rebuilt_folders_and_keeps_no_password(
    tmp_path: Path,
) -> None:
    (tmp_path / "judge").mkdir()
    (tmp_path / "judge" / "model.safetensors").write_bytes(b"one")
    first = served_weights(str(tmp_path / "judge"), str(tmp_path / "judge"))
    (tmp_path / "judge" / "model.safetensors").write_bytes(b"other")
    os.utime(tmp_path / "judge" / "model.safetensors", ns=(1, 1))
    assert served_weights(str(tmp_path / "judge"), str(tmp_path / "judge")) != first
    assert served_weights(f"s3://key:{SECRET}@bucket/judge", "/cache/x") == "s3://bucket/judge"


# ---------------------------------------------------------------------------- OpenAI's API


@pytest.mark.slow
def test_an_openai_compatible_server_judges_as_the_judge_in_this_process(
    openai_judge: str, tiny_model: Path
) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{openai_judge}/v1", api_key="unused", max_retries=0)
    assert client.models.list().data  # it answers OpenAI's client (its list is its own)
    prompt = judge_prompts("pointwise", ROWS[:1])[0]
    stream = client.chat.completions.create(  # transformers serve answers in a stream only
        model=str(tiny_model), messages=list(prompt), max_tokens=16, temperature=0, stream=True
    )
    said = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    served = ServedJudge(f"{openai_judge}/v1/chat/completions", "pointwise", 16, concurrency=2)
    served.model = str(tiny_model)
    prompts = judge_prompts("pointwise", ROWS) + judge_prompts("pairwise", PAIRS)
    generator = HFGenerator(tiny_model)  # the judge in this process, batched (left padding)
    local = generator.generate(prompts, max_new_tokens=16)
    replies = served._openai().generate(prompts, max_new_tokens=16)
    assert replies == local and replies[0] == said  # greedy: the same replies
    assert all(replies) and len(set(replies)) > 1
    for mode, rows in (("pointwise", ROWS), ("pairwise", PAIRS)):
        served.mode = mode
        in_process = LocalJudge(str(tiny_model), mode, 16, batch_size=8, generator=generator)
        assert served.verdicts(rows) == in_process.verdicts(rows)
    assert served.calls == 3 + 2  # a request per prompt: pairwise asks in both orders


@pytest.mark.slow
def test_the_model_behind_an_openai_url_is_pinned_and_another_one_there_trains_anew(
    openai_judge: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # transformers serve lists a dozen models: which one judges must be said
    with pytest.raises(JudgeRefused, match=r"serves 12 models \(.*Qwen/.*reward.judge_model"):
        served_model(f"{openai_judge}/v1", "pointwise")
    monkeypatch.setenv("JUDGEFLOW_JUDGE_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    with FlakyProxy(openai_judge, ["503"], models=["judge-a"]) as proxy:
        cfg = load_config("rlvr-judged", overrides=_served(f"{proxy.url}/v1", judge_retry_s=30))
        pinned_a, judge_a = pin_judge(cfg)
        assert pinned_a.reward.judge_model == "judge-a" and judge_a is not None
        assert judge_a.tags()[TAG_REWARD_JUDGE_MODEL] == "judge-a"
        paying = client_for(pinned_a.policy_reward_kwargs())
        assert isinstance(paying, ServedJudge) and len(paying.verdicts(ROWS[:1])) == 1
        proxy.models = ["judge-b"]  # another model behind the same URL
        pinned_b, _ = pin_judge(cfg)
    assert pinned_b.reward.judge_model == "judge-b"
    assert train_key(pinned_a, REPORT) != train_key(pinned_b, REPORT)  # another policy
    patient = pinned_b.reward.model_copy(update={"judge_retry_s": 5.0, "judge_timeout_s": 9.0})
    same = pinned_b.model_copy(update={"reward": patient})  # how long to wait: not in the key
    assert train_key(same, REPORT) == train_key(pinned_b, REPORT)
    # the key, sent with every request, never in a log line
    assert {auth for _, _, _, auth, _ in proxy.seen} == {f"Bearer {SECRET}"}
    assert all(SECRET not in r.getMessage() for r in caplog.records)


def test_open_instructs_lm_judge_rows_are_asked_of_a_served_llm_with_its_prompts(
    openai_judge: str, tiny_model: Path
) -> None:
    """judge_mode llm against a real OpenAI-compatible server: each LM-judge rollout is one
    request of open-instruct's prompt (the same replies the model gives that prompt in this
    process, greedy), scored by open-instruct's extractor; the tiny model writes no JSON score,
    so every reply pays 0 and is counted as the judge's format failure, and the verifier row
    beside them is paid by its verifier without a request."""
    from judgeflow.inference.judge_reward import compute_score
    from judgeflow.rewards.rlvr.llm_judge import render_llm_prompt, score_reply

    settings = {"judge_url": f"{openai_judge}/v1", "judge_mode": "llm", "judge_api": "openai",
                "judge_model": str(tiny_model), "judge_max_new_tokens": 16,
                "judge_concurrency": 2, "judge_timeout_s": 120, "judge_retry_s": 30,
                "judge_datasets": ["general-quality_ref", "general-quality"]}  # fmt: skip
    rules = {"verification_reward": 10.0, "r1_style_format": "off", "r1_style_format_reward": 1.0,
             "non_stop_penalty": False, "non_stop_penalty_value": 0.0}  # fmt: skip
    raw = "system: Answer briefly.\nuser: What is the capital of France?"
    rollouts = [("general-quality_ref", "<think>hm</think><answer>Paris.</answer>"),
                ("general-quality_ref", "Lyon."), ("general-quality", "It is Paris."),
                ("gsm8k", "<answer>4</answer>")]  # fmt: skip
    extras = [{"dataset": [d], "query": "What is the capital of France?", "raw_query": raw}
              for d, _ in rollouts]  # fmt: skip
    out = compute_score([d for d, _ in rollouts], [r for _, r in rollouts],
                        [["Paris is the capital."]] * 3 + [["4"]], extras,
                        **rules, **settings)  # fmt: skip
    served = client_for(settings)
    assert served.calls == 3  # one request per LM-judge rollout, none for the verifier's row
    prompts = [[{"role": "user", "content": render_llm_prompt(d, raw, r, "Paris is the capital.")}]
               for d, r in rollouts[:3]]  # fmt: skip
    local = HFGenerator(tiny_model).generate(prompts, max_new_tokens=16)
    expected = [score_reply(d, reply) for (d, _), reply in zip(rollouts, local, strict=False)]
    assert expected == [None] * 3 and all(local)  # the tiny model answers, but no JSON score
    assert [r["judge_format_failure"] for r in out[:3]] == [float(s is None) for s in expected]
    assert [r["score"] for r in out[:3]] == [10.0 * (s or 0.0) for s in expected]
    assert out[3]["score"] == 10.0 and out[3]["judged"] == 0.0
