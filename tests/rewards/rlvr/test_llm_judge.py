"""open-instruct's LM-judge verifiers (`judgeflow.rewards.rlvr.llm_judge`) at parity with its code.

Every expected value below was worked out by running open-instruct's own `judge_utils.py`
(its `EXTRACTOR_MAP`, `JUDGE_PROMPT_MAP`) and `utils.extract_final_answer` at e6c3044, with
`LMJudgeVerifier.parse_completion`'s clean-up in front (thinking and answer tags removed; an
exception pays 0): the score open-instruct pays each reply, per verifier. judgeflow pays the same;
where open-instruct read no score (it logs a warning and pays 0), judgeflow pays 0 and counts
the reply as the judge's format failure (None).
"""

from __future__ import annotations

import hashlib

import pytest

from judgeflow.config.policy_reward import RewardConfig
from judgeflow.rewards.rlvr.llm_judge import (
    LLM_VERIFIERS,
    REFUSED,
    TEMPLATES,
    final_answer,
    render_llm_prompt,
    score_reply,
)

REPLIES = [
    '{"REASONING": "good", "SCORE": "8"}',
    '{"REASONING": "good", "SCORE": 7}',
    '```json\n{"REASONING": "fine", "SCORE": "9"}\n```',
    '```\n{"REASONING": "fine", "SCORE": "3"}```',
    '{\n  "REASONING": "multi\nline",\n  "SCORE": "6"\n}',
    'Here is my verdict: "SCORE": "5" overall',
    '"SCORE": 7.5',
    '{"REASONING": "a \\d path", "SCORE": "4"}',
    '{"REASONING": "x", "SCORE": "ten"}',
    '{"REASONING": "x"}',
    "[1, 2]",
    "8",
    "no json here",
    "",
    '<think>hmm SCORE 2</think>{"REASONING": "ok", "SCORE": "10"}',
    '<answer>{"REASONING": "ok", "SCORE": "1"}</answer>',
    '{"REASONING": "x", "SCORE": "15"}',
    '{"REASONING": "x", "SCORE": "0"}',
    '{"REASONING": "x", "SCORE": "1"}',
    '{"REASONING": "x", "SCORE": null}',
    "Final Decision: Yes",
    "final decision: NO, because",
    "The answer matches. Final Decision: Yes.",
    "Final decision: maybe",
    '{"SCORE": "2", "REASONING": "Final Decision: Yes"}',
]
_OUT_OF_10 = [0.8, 0.7, 0.9, 0.3, 0.6, 0.5, 0.75, 0.4, 0, 0, 0, 0, 0, 0, 1.0, 0.1, 1.5, 0, 0.1, 0,
              0, 0, 0, 0, 0.2]  # fmt: skip
_RAW = [8.0, 7.0, 9.0, 3.0, 6.0, 5.0, 7.5, 4.0, 0, 0, 0, 0, 0, 0, 10.0, 1.0, 15.0, 0, 1.0, 0, 0,
        0, 0, 0, 2.0]  # fmt: skip
#: What open-instruct pays each reply of REPLIES, per verifier.
OPEN_INSTRUCT_PAYS = {
    "general-quality": _OUT_OF_10,
    "general-quality_ref": _OUT_OF_10,
    "general-quality_rubric": _RAW,
    "general-web_instruct_general_verifier": [0] * 20 + [1.0, 0, 1.0, 0, 1.0],
}
#: The replies open-instruct read no score from (a warning, 0 paid), by index of REPLIES.
_JSON_UNREAD = {8, 9, 10, 11, 12, 13, 19, 20, 21, 22, 23}
UNREAD = {
    "general-quality": _JSON_UNREAD,
    "general-quality_ref": _JSON_UNREAD,
    "general-quality_rubric": _JSON_UNREAD,
    "general-web_instruct_general_verifier": set(range(20)) | {23},
}
#: sha256 of open-instruct's templates (JUDGE_PROMPT_MAP at e6c3044), by its judge type.
TEMPLATE_SHA256 = {
    "general-quality": "dc5690758431cfeb5d5eb308540eddb728a581ef2c341a73ca12fb4beaa6e6b1",
    "general-quality_rubric": "544f8977da7f946cbeebeacded615e3e3b86148510174e6bf4b501782bf6953a",
    "general-quality_ref": "33907cb811254249db7fd78683ebb7c2cc194c9e04dc78472dde0663b0762d4e",
    "general-web_instruct_general_verifier": (
        "6d14cbfb0909d57f3f607d3dc92f9f35ee98219434f62b3ab7346c95dc29b098"
    ),
}


@pytest.mark.parametrize("verifier", LLM_VERIFIERS)
def test_each_reply_is_paid_what_open_instruct_pays_and_an_unread_one_is_counted(
    verifier: str,
) -> None:
    for i, (reply, theirs) in enumerate(zip(REPLIES, OPEN_INSTRUCT_PAYS[verifier], strict=True)):
        ours = score_reply(verifier, reply)
        assert (0.0 if ours is None else ours) == pytest.approx(theirs), (i, reply)
        assert (ours is None) == (i in UNREAD[verifier]), (i, reply, ours)


def test_the_templates_are_open_instructs_verbatim() -> None:
    assert set(TEMPLATES) == set(TEMPLATE_SHA256) == set(LLM_VERIFIERS)
    for name, text in TEMPLATES.items():
        assert hashlib.sha256(text.encode()).hexdigest() == TEMPLATE_SHA256[name], name


@pytest.mark.parametrize(
    ("prediction", "shown"),
    [  # worked out with open-instruct's extract_final_answer
        ("<think>x</think><answer> cat </answer>", "cat"),
        ("<think>x</think> cat", "cat"),
        ("<|assistant|> cat ", "cat"),
        (" cat ", " cat "),  # no tag: left as it is, spaces and all
        ("<answer>a</answer><answer>b</answer>", "a"),
        ("</think>a</think>b", "a</think>b"),
        ("<answer>\nmulti\nline\n</answer>", "multi\nline"),
        ("", ""),
    ],
)
def test_the_judge_is_shown_the_final_answer_as_open_instruct_shows_it(
    prediction: str, shown: str
) -> None:
    assert final_answer(prediction) == shown


def test_the_prompt_carries_the_conversation_the_final_answer_and_the_label() -> None:
    query = "system: Be brief.\nuser: Which is an animal: cat or lamp?"
    prompt = render_llm_prompt("general-quality_ref", query, "<think>hm</think>cat", "cat {x}")
    assert f"[Conversation History]\n{query}\n\n[AI Answer]\ncat\n\n" in prompt
    assert "[Reference Gold Answer]\ncat {x}\n" in prompt  # a label's braces are not a template's
    assert prompt.endswith(
        'Respond in JSON format. {"REASONING": "[...]", "SCORE": "<your-score>"}'
    )
    rubric = render_llm_prompt("general-quality_rubric", query, "cat", "- names an animal")
    assert "Use the following criteria to evaluate the response:\n- names an animal\n" in rubric


def test_an_llm_judge_is_configured_over_an_openai_url_for_the_verifiers_it_has_prompts_for() -> (
    None
):
    url = "http://127.0.0.1:8000/v1"
    config = RewardConfig(judge_url=url, judge_mode="llm", judge_max_new_tokens=512)
    assert config.judge_datasets == list(LLM_VERIFIERS)  # unset: every one it pays
    chosen = RewardConfig(judge_url=url, judge_mode="llm", judge_max_new_tokens=512,
                          judge_datasets=["general-quality_ref"])  # fmt: skip
    assert chosen.judge_datasets == ["general-quality_ref"]
    with pytest.raises(ValueError, match="literal text"):
        RewardConfig(judge_url=url, judge_mode="llm", judge_max_new_tokens=512,
                     judge_datasets=["general-factuality"])  # fmt: skip
    with pytest.raises(ValueError, match="judge is no LM-judge verifier"):
        RewardConfig(judge_url=url, judge_mode="llm", judge_max_new_tokens=512,
                     judge_datasets=["judge"])  # fmt: skip
    with pytest.raises(ValueError, match="OpenAI-compatible reward.judge_url"):
        RewardConfig(judge_url="http://127.0.0.1:5000/invocations", judge_mode="llm",
                     judge_max_new_tokens=512)  # fmt: skip
    with pytest.raises(ValueError, match="OpenAI-compatible reward.judge_url"):
        RewardConfig(judge="models:/judge@champion", judge_mode="llm")
    assert set(REFUSED) == {
        "general-safety",
        "general-factuality",
        "general-creative_writing",
        "general-refusal",
    }
