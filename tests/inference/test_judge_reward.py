"""A trained judge pays a policy (`judgeflow.inference.judge_reward`): pointwise, pairwise in both
orders and GRRM, composed like a verifier, format failures of the judge never paid and counted.

The payment rules are pinned with judges that reply by rule through the `Generator` interface
(the real reply parser reads them); the real tiny model judges too (an untrained judge: its
replies do not parse, so nothing is paid), and verl's own batch reward manager loads and runs
the module. A trained judge pays a whole pipeline in tests/test_quickstart.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from judgeflow.data.grrm_template import render_grrm_target
from judgeflow.data.templates import parse_pairwise, parse_pointwise
from judgeflow.inference.judge_reward import LocalJudge, compute_score

RULES = {
    "verification_reward": 10.0,
    "r1_style_format": "off",
    "r1_style_format_reward": 1.0,
    "non_stop_penalty": False,
    "non_stop_penalty_value": 0.0,
}
JUDGE = {"judge_datasets": ["judge"], "judge_max_new_tokens": 16, "judge_batch_size": 3}
QUERY = "What is the capital of France?"
REFERENCE = "The capital of France is Paris."


class RuleJudge:
    """A judge that answers every prompt with a well-formed verdict by a rule: an answer that
    mentions Paris is good, one that says "garble" gets a malformed reply. Keeps every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def generate(self, prompts: Sequence[Any], *, max_new_tokens: int, **_: Any) -> list[str]:
        texts = [p[0]["content"] for p in prompts]
        self.calls.append(texts)
        return [self._reply(t) for t in texts]

    def _reply(self, text: str) -> str:
        if pointwise := parse_pointwise(text):
            response = pointwise[1]
            if "garble" in response:
                return "I think it is fine"
            return f"<think>ok</think><score>{4 if 'Paris' in response else 1}</score>"
        if pairwise := parse_pairwise(text):
            a, b = pairwise[1], pairwise[2]
            if "garble" in a + b:
                return "both"
            if "Paris" in a and "Paris" in b:  # a tie: the judge says A whatever the order
                return "<better>A</better>"
            return f"<better>{'A' if 'Paris' in a else 'B'}</better>"
        candidates = re.findall(r"Translation ([A-H]):\n```\n(.*?)\n```", text, re.S)
        scores = [9 if "Paris" in c else 2 for _, c in candidates]
        return render_grrm_target("Compared.", scores)


def _score(mode: str, answers: list[str], judge: RuleJudge, **extra: Any) -> list[dict]:
    n = len(answers)
    extras = [{"dataset": ["judge"], "query": QUERY, "index": 0, **extra}] * n
    client = LocalJudge("unused", mode, 16, batch_size=3, generator=judge)
    return compute_score(
        ["judge"] * n, answers, [[REFERENCE]] * n, extras, client=client, **RULES, **JUDGE
    )


def test_a_pointwise_judge_pays_its_score_over_four_and_never_a_malformed_reply() -> None:
    judge = RuleJudge()
    answers = ["Paris.", "Lyon.", "garble", "", "<think>hmm</think>It is Paris."]
    out = _score("pointwise", answers, judge)
    # 10 x 4/4, 10 x 1/4, a malformed reply 0, an empty answer 0 (never shown to the judge)
    assert [r["score"] for r in out] == [10.0, 2.5, 0.0, 0.0, 10.0]
    assert [r["judge_format_failure"] for r in out] == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert all(r["judged"] == 1.0 and r["verifiable_reward"] == 0.0 for r in out)
    # 4 answers shown, 3 per call: two calls for the whole batch; the judge saw the answer only
    assert [len(c) for c in judge.calls] == [3, 1]
    shown = [parse_pointwise(t) for call in judge.calls for t in call]
    assert ("What is the capital of France?", "It is Paris.") in shown
    # reference_f1: the answer against the reference, thinking removed
    assert out[4]["reference_f1"] == pytest.approx(2 * (2 / 3) * (2 / 5) / (2 / 3 + 2 / 5))


def test_a_panel_pays_the_lowest_of_its_judges_scores_and_counts_any_judges_failure() -> None:
    """reward.judge_panel: a wrong answer one judge overpays is paid what the other gives it."""

    class Fooled(RuleJudge):  # a blind spot: "Lyon" is as good as "Paris"; "Nice" unparsable
        def _reply(self, text: str) -> str:
            response = (parse_pointwise(text) or ("", ""))[1]
            if "Nice" in response:
                return "no verdict"
            return super()._reply(text.replace("Lyon", "Paris"))

    first, second = RuleJudge(), Fooled()
    answers = ["Paris.", "Lyon.", "garble", "Nice.", ""]
    extras = [{"dataset": ["judge"], "query": QUERY, "index": 0}] * len(answers)
    out = compute_score(
        ["judge"] * len(answers), answers, [[REFERENCE]] * len(answers), extras,
        client=LocalJudge("unused", "pointwise", 16, batch_size=3, generator=first),
        panel=[LocalJudge("unused", "pointwise", 16, batch_size=3, generator=second)],
        **RULES, **JUDGE,
    )  # fmt: skip
    # Paris: both 4 -> 10; Lyon: 1 and (fooled) 4 -> the lower; garble: neither parses -> 0,
    # counted; Nice: the first says 1, the second does not parse -> 0, counted; empty: 0
    assert [r["score"] for r in out] == [10.0, 2.5, 0.0, 0.0, 0.0]
    assert [r["judge_format_failure"] for r in out] == [0.0, 0.0, 1.0, 1.0, 0.0]
    assert sum(len(c) for c in first.calls) == sum(len(c) for c in second.calls) == 4
    alone = _score("pointwise", answers, Fooled())
    assert alone[1]["score"] == 10.0  # the fooled judge alone overpays "Lyon."


def test_a_pairwise_judge_pays_only_a_consistent_win_over_the_reference() -> None:
    judge = RuleJudge()
    out = _score("pairwise", ["Lyon.", "garble", "Paris, of course."], judge)
    # "Lyon." loses in both orders: consistent, 0. "garble": malformed, 0 and counted.
    # "Paris, of course." ties with the reference: the rule says A in both orders, so the
    # verdict flips with the order: inconsistent, 0.
    assert [r["score"] for r in out] == [0.0, 0.0, 0.0]
    assert [r["judge_format_failure"] for r in out] == [0.0, 1.0, 0.0]
    assert [r["judge_inconsistent"] for r in out] == [0.0, 0.0, 1.0]  # the tie, on its rollout
    prompts = [parse_pairwise(t) for call in judge.calls for t in call]
    assert ("What is the capital of France?", "Lyon.", REFERENCE) in prompts  # both orders
    assert ("What is the capital of France?", REFERENCE, "Lyon.") in prompts


def test_a_pairwise_win_in_both_orders_pays() -> None:
    class Prefers(RuleJudge):  # the answer beats the reference whichever side it is on
        def _reply(self, text: str) -> str:
            _, a, _b = parse_pairwise(text) or ("", "", "")
            return f"<better>{'A' if a == 'Paris!' else 'B'}</better>"

    out = _score("pairwise", ["Paris!"], Prefers())
    assert out[0]["score"] == 10.0 and out[0]["judge_reward"] == 10.0


def test_a_grrm_judge_ranks_a_prompts_rollouts_together_and_pays_each_its_score() -> None:
    judge = RuleJudge()
    answers = ["Paris", "Lyon", "Paris!", "Nice"]
    out = _score("grrm", answers, judge, source_lang="en", target_lang="fr")
    assert [r["score"] for r in out] == [9.0, 2.0, 9.0, 2.0]  # 10 x score / 10
    assert len(judge.calls) == 1 and len(judge.calls[0]) == 1  # one call, one group
    assert all(f"```\n{a}\n```" in judge.calls[0][0] for a in answers)


def test_a_grrm_judge_needs_the_rows_languages() -> None:
    with pytest.raises(ValueError, match="source_lang and target_lang"):
        _score("grrm", ["Paris", "Lyon"], RuleJudge())


def test_rows_without_a_judge_dataset_keep_their_verifiers_and_the_gate_holds() -> None:
    judge = RuleJudge()
    client = LocalJudge("unused", "pointwise", 16, batch_size=8, generator=judge)
    rules = {**RULES, "r1_style_format": "gated"}
    out = compute_score(
        ["gsm8k", "judge", "judge"],
        ["</think><answer>7</answer>", "Paris.", "</think><answer>Paris.</answer>"],
        [["7"], [REFERENCE], [REFERENCE]],
        [
            {"dataset": ["gsm8k"]},
            {"dataset": ["judge"], "query": QUERY},
            {"dataset": ["judge"], "query": QUERY},
        ],
        client=client,
        **rules,
        **JUDGE,
    )
    assert out[0]["score"] == 10.0 and out[0]["judged"] == 0.0  # gsm8k paid as ever
    assert out[1]["score"] == 0.0  # the judge liked it, but the R1 format gate is shut
    assert out[1]["judge_reward"] == 10.0
    assert out[2]["score"] == 10.0  # well-formed: the judge's reward passes the gate
    assert len(judge.calls) == 1 and len(judge.calls[0]) == 2  # the gsm8k row is not judged


@pytest.mark.parametrize("mode", ["pointwise", "pairwise", "grrm"])
def test_the_real_tiny_model_as_an_untrained_judge_pays_nothing_and_counts_it(
    tiny_model: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tiny random model never writes a verdict: every judged rollout is paid 0 and counted
    as the judge's format failure, in every mode, through real HF generation."""
    from judgeflow.inference import judge_reward

    monkeypatch.setattr(judge_reward, "_clients", {})  # this test's judge, made here
    n = 4
    extras = [{"dataset": ["judge"], "query": QUERY, "index": 0, "source_lang": "en",
               "target_lang": "fr"}] * n  # fmt: skip
    out = compute_score(
        ["judge"] * n,
        ["Paris.", "Lyon.", "Nice.", "Paris!"],
        [[REFERENCE]] * n,
        extras,
        **RULES,
        **{
            **JUDGE,
            "judge_weights": str(tiny_model),
            "judge_mode": mode,
            "judge_max_new_tokens": 4,
        },
    )
    assert [r["score"] for r in out] == [0.0] * n
    assert [r["judge_format_failure"] for r in out] == [1.0] * n
    # ...because the model answered, not because nothing asked it: one call of <= 3 rows a time
    used = list(judge_reward._clients.values())
    assert len(used) == 1 and used[0].calls == {"grrm": 1}.get(mode, 2)


def test_trl_scores_a_steps_rollouts_with_the_judge_at_once_and_logs_its_parts(
    tiny_model: Path,
) -> None:
    """TRL's reward functions for a judge-paid policy: one judged batch per step, and unpaid
    probes that log what the judge paid, its format failures and reference_f1 on its rows."""
    from judgeflow.engines.trl import map_trl_logs, reward_functions

    rules = {**RULES, **JUDGE, "judge_weights": str(tiny_model), "judge_mode": "pointwise",
             "judge_max_new_tokens": 4}  # fmt: skip
    functions = reward_functions("rlvr", rlvr_rules=rules, stop_token_ids={0})
    names = [f.__name__ for f in functions]
    assert names == ["rlvr", "format_failure", "verifiable_correct", "judge_reward",
                     "reference_f1", "judge_format_failure", "judge_inconsistent"]  # fmt: skip
    completions = ["Paris.", "The capital of France is Paris.", "</think><answer>3</answer>"]
    kwargs = {
        "reward_model": [{"ground_truth": [REFERENCE]}] * 2 + [{"ground_truth": ["3"]}],
        "extra_info": [{"dataset": ["judge"], "query": QUERY, "index": 0}] * 2
        + [{"dataset": ["gsm8k"], "index": 1}],
        "data_source": ["judge", "judge", "gsm8k"],
        "completion_ids": [[5, 0], [6, 0], [7, 0]],
    }
    values = {f.__name__: f(completions, **kwargs) for f in functions}
    assert values["rlvr"] == [0.0, 0.0, 10.0]  # the untrained judge pays nothing; gsm8k does
    assert values["judge_format_failure"] == [1.0, 1.0, None]  # None: not the judge's row
    assert values["judge_inconsistent"] == [0.0, 0.0, None]  # pointwise: never
    assert values["reference_f1"] == [pytest.approx(1 / 3), 1.0, None]  # "paris" of 5 words
    logged = map_trl_logs(
        {"rewards/judge_reward/mean": 0.5, "rewards/reference_f1/mean": 0.25,
         "rewards/judge_format_failure/mean": 0.1, "rewards/judge_inconsistent/mean": 0.2}
    )  # fmt: skip
    assert logged == {"train/judge_reward": 0.5, "train/reference_f1": 0.25,
                      "train/judge_format_failure_rate": 0.1,
                      "train/judge_inconsistent_rate": 0.2}  # fmt: skip


def test_the_judge_pays_in_a_process_without_mlflow(tiny_model: Path) -> None:
    """A judge-paid policy's training process (TRL's reward, a GPU node's image) loads its judge
    from a folder without MLflow: the weights' lookup lives in `judgeflow.storage`, not beside
    the MLflow model. MLflow is made unimportable in a fresh interpreter."""
    import subprocess
    import sys

    code = f"""
import sys
sys.modules["mlflow"] = None  # `import mlflow` now raises ImportError
from judgeflow.engines import trl
from judgeflow.inference.judge_reward import compute_score
out = compute_score(
    ["judge"], ["Paris."], [[{REFERENCE!r}]],
    [{{"dataset": ["judge"], "query": {QUERY!r}, "index": 0}}],
    **{RULES!r}, **{JUDGE!r}, judge_weights={str(tiny_model)!r}, judge_mode="pointwise",
)
print("judged", out[0]["judged"], "unparsed", out[0]["judge_format_failure"])
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "judged 1.0 unparsed 1.0" in proc.stdout  # the random model judged, and failed to parse


class LlmRuleJudge:
    """An LLM that answers open-instruct's LM-judge prompts by a rule, in its JSON: an answer
    that mentions Paris scores 9 of 10, one that says "garble" gets prose. Keeps every prompt."""

    mode = "llm"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, prompts: Sequence[Any], *, max_new_tokens: int, **_: Any) -> list[str]:
        texts = [p[0]["content"] for p in prompts]
        self.prompts += texts
        answers = [t.split("[AI Answer]\n")[1].split("\n\n")[0] for t in texts]
        return [
            "I cannot say" if "garble" in a else
            f'{{"REASONING": "compared", "SCORE": "{9 if "Paris" in a else 2}"}}'
            for a in answers
        ]  # fmt: skip

    def verdicts(self, rows: Sequence[Any]) -> list[dict[str, Any]]:
        from judgeflow.rewards.rlvr.llm_judge import llm_verdicts

        return llm_verdicts(self, rows, max_new_tokens=64)


def test_an_llm_judge_pays_open_instructs_score_times_the_verification_reward() -> None:
    """judge_mode llm: each general-quality_ref row's prompt is open-instruct's template over the
    whole conversation (`raw_query`), the response's final answer and the reference; its JSON
    SCORE / 10 pays x verification_reward, a reply that does not read pays 0 and is counted; an
    empty answer is asked about too, as open-instruct asks."""
    judge = LlmRuleJudge()
    raw = f"system: Answer briefly.\nuser: {QUERY}"
    answers = ["<think>hm</think><answer>Paris.</answer>", "Lyon.", "garble", ""]
    extras = [{"dataset": ["general-quality_ref"], "query": QUERY, "raw_query": raw, "index": 0}]
    out = compute_score(
        ["general-quality_ref"] * 4, answers, [[REFERENCE]] * 4, extras * 4, client=judge,
        **RULES, **{**JUDGE, "judge_mode": "llm", "judge_datasets": ["general-quality_ref"]},
    )  # fmt: skip
    assert [r["score"] for r in out] == pytest.approx([9.0, 2.0, 0.0, 2.0])
    assert [r["judge_format_failure"] for r in out] == [0.0, 0.0, 1.0, 0.0]
    assert len(judge.prompts) == 4 and "[AI Answer]\n\n\n" in judge.prompts[3]
    first = judge.prompts[0]
    assert f"[Conversation History]\n{raw}\n\n[AI Answer]\nParis.\n\n" in first
    assert f"[Reference Gold Answer]\n{REFERENCE}\n" in first
