"""open-instruct's LM-judge verifiers (``general-quality``, ``general-quality_ref``, …): a
general LLM asked with open-instruct's prompts over an OpenAI-compatible endpoint, its reply
scored by open-instruct's extractors (``open_instruct/judge_utils.py``,
``LMJudgeVerifier`` in ``ground_truth_utils.py``, at e6c3044).

judgeflow pays such rows with ``reward.judge_mode: llm`` and the LLM at ``reward.judge_url``
(``reward.judge_api: openai``), through the same client as a served judgeflow judge
(``served_judge_client``: pooled, bounded, retried). What the LLM is shown, per row:

- the row's prompt as open-instruct's raw prompt (every turn as ``role: content``, one a
  line: ``extra_info.raw_query``, ``judgeflow.data.rlvr.raw_query``), the policy's final answer (:func:`final_answer`: inside ``<answer>``, else after
  ``</think>``) and the row's ground truth as ``{label}`` (a reference answer or a rubric);
- in one user message, open-instruct's template for the verifier (:data:`TEMPLATES`).

Its reply, with any ``<think>…</think>`` and the answer tags removed, is scored by the
verifier's extractor: ``general-quality`` and ``general-quality_ref`` the JSON ``SCORE`` / 10,
``general-quality_rubric`` the JSON ``SCORE`` as given, ``general-web_instruct_general_verifier``
1 for "Final Decision: Yes" and 0 for "No". Scores are not clamped (a SCORE of 15 pays 1.5, as
in open-instruct). A reply no extractor reads pays 0, as there, and is counted as the judge's
format failure (open-instruct logs a warning).

Not offered (:data:`REFUSED`): open-instruct's ``general-safety`` template is an empty stub and
``general-factuality``, ``general-creative_writing`` and ``general-refusal`` write
``{{input}}``, which its ``str.format`` renders as the literal text ``{input}``: the LLM never
sees the question, the answer or the reference, so their score says nothing about the answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "LLM_VERIFIERS",
    "REFUSED",
    "TEMPLATES",
    "final_answer",
    "llm_verdicts",
    "render_llm_prompt",
    "score_reply",
]

# open-instruct's templates, verbatim (their text is the contract a parity run depends on).
_QUALITY = """
### Task Description
Please act as an impartial judge and evaluate the quality of the response provided by an
AI assistant to the user query displayed below.

Notes:
- Your evaluation should consider factors such as the helpfulness, relevance, accuracy, creativity, appropriate level of detail, and how well the response satisfies the user's explicit constraints or accurately follows their instructions.
- If there is a system prompt, ensure the AI answer prioritizes following it.
- Begin your evaluation by providing a short explanation.
- Be as objective as possible. After providing your short explanation, please output a score on a scale of 1 to 10.
- Please adhere to the following format.

[Conversation History]
{input}

[AI Answer]
{output}

[Your judgement]
Respond in JSON format. {{"REASONING": "[...]", "SCORE": "<your-score>"}}"""

_QUALITY_RUBRIC = """
### Task Description
Please act as an impartial judge and evaluate the quality of the response provided by an
AI assistant to the user query displayed below. You are shown the user query, assistant response, and an evaluation criteria.

Notes:
- Each response must be evaluated against these criteria independently.
- An overall score of 1 requires meeting all criteria.
- An overall score of 0 in any single category results in the output being classified as bad (0).
- Begin your evaluation by providing a short explanation.
- Be as objective as possible. After providing your explanation, please output the overall score of 0 or 1.


### Evaluation Criteria
Use the following criteria to evaluate the response:
{label}

[Query]
{input}

[Response]
{output}

[Your judgement]
Respond in JSON format. {{"REASONING": "[...]", "SCORE": "<your-score>"}}"""

_QUALITY_REF = """
### Task Description
Please act as an impartial judge and evaluate the quality of the answer provided by an
AI assistant to the conversation history leading up to the answer displayed below.
Judge whether the provided answer is good by comparing it to the reference answer.

Notes:
- Besides comparing to the reference answer, your evaluation should consider factors such as the helpfulness, relevance, accuracy, creativity, appropriate level of detail, and how well the response satisfies the user's explicit constraints or accurately follows their instructions.
- Note that sometimes the reference answer is not the only answer. So any valid variation of the reference answer is also acceptable and can get a full score.
- If there is a system prompt, ensure the AI answer prioritizes following it.
- Begin your evaluation by providing a short explanation.
- Be as objective as possible. After providing your short explanation, please output a score on a scale of 1 to 10.
- Please adhere to the following format.

[Conversation History]
{input}

[AI Answer]
{output}

[Reference Gold Answer]
{label}

[Your judgement]
Respond in JSON format. {{"REASONING": "[...]", "SCORE": "<your-score>"}}"""

_WEB_INSTRUCT = """User: ### Question: {input}


### Ground Truth Answer: {label}


### Student Answer: {output}


For the above question, please verify if the student's answer is equivalent to the ground truth answer.
Do not solve the question by yourself; just check if the student's answer is equivalent to the ground truth answer.
If the student's answer is correct, output \"Final Decision: Yes\". If the student's answer is incorrect, output Final Decision: No. Assistant:"""

#: The verifier (a row's ``dataset``) → open-instruct's template for it.
TEMPLATES: dict[str, str] = {
    "general-quality": _QUALITY,
    "general-quality_rubric": _QUALITY_RUBRIC,
    "general-quality_ref": _QUALITY_REF,
    "general-web_instruct_general_verifier": _WEB_INSTRUCT,
}
#: The LM-judge verifiers judgeflow pays (``reward.judge_mode: llm``).
LLM_VERIFIERS = tuple(TEMPLATES)
#: open-instruct's other LM-judge verifiers, and why judgeflow does not pay them.
REFUSED: dict[str, str] = {
    "general-safety": "open-instruct's safety template is an empty stub (no question, no answer)",
    **{
        name: f"open-instruct's {name.removeprefix('general-')} template writes {{{{input}}}}, "
        "which its str.format renders as the literal text {input}: the judge never sees the "
        "question, the answer or the reference"
        for name in ("general-factuality", "general-creative_writing", "general-refusal")
    },
}

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_AFTER_THINKING = re.compile(r"</think>(.*)", re.DOTALL)
_THINKING = re.compile(r"<think>\s*.*?\s*</think>\s*", re.DOTALL)
_SCORE_FIELD = re.compile(r'"SCORE"\s*:\s*"?([0-9]+(?:\.[0-9]+)?)"?')
_LONE_BACKSLASH = re.compile(r'\\(?!["\\/bfnrtu])')


def final_answer(prediction: str) -> str:
    """What the LM judge is shown of a response (open-instruct's ``extract_final_answer``):
    inside the first ``<answer>…</answer>``, else after the first ``</think>``, else the
    response without ``<|assistant|>`` tags (stripped only where there was one)."""
    found = _ANSWER.search(prediction)
    if found:
        return found.group(1).strip()
    found = _AFTER_THINKING.search(prediction)
    if found:
        return found.group(1).strip()
    cleaned = prediction.replace("<|assistant|>", "")
    return cleaned.strip() if cleaned != prediction else prediction


def render_llm_prompt(verifier: str, query: str, prediction: str, label: Any) -> str:
    """The one user message the LM judge of ``verifier`` is sent."""
    return TEMPLATES[verifier].format(input=query, output=final_answer(prediction), label=label)


def _json_score(text: str) -> float | None:
    """open-instruct's ``extract_json_score_with_fallback``: the JSON's ``SCORE`` (a code fence
    around it removed, newlines and lone backslashes escaped), else a ``"SCORE": n`` anywhere in
    it; None where neither reads (open-instruct: 0 and a warning)."""
    cleaned = text.strip()
    if cleaned.startswith("```json"):
        cleaned = cleaned[7:]
    elif cleaned.startswith("```"):
        cleaned = cleaned[3:]
    if cleaned.endswith("```"):
        cleaned = cleaned[:-3]
    cleaned = cleaned.replace("\r\n", "\n").replace("\n", "\\n")
    cleaned = _LONE_BACKSLASH.sub(r"\\\\", cleaned).strip()
    try:
        data = json.loads(cleaned)
    except json.JSONDecodeError:
        found = _SCORE_FIELD.search(cleaned)
        return float(found.group(1)) if found else None
    if not isinstance(data, dict) or "SCORE" not in data:  # open-instruct: 0 (paid the same)
        return None
    try:
        return float(data["SCORE"])
    except (TypeError, ValueError):  # a SCORE that is not a number
        return None


def _web_instruct(text: str) -> float | None:
    lowered = text.lower()
    if "final decision: yes" in lowered:
        return 1.0
    if "final decision: no" in lowered:
        return 0.0
    return None


def score_reply(verifier: str, reply: str) -> float | None:
    """The score open-instruct's extractor for ``verifier`` reads from the LM judge's reply
    (its thinking and answer tags removed first); None where it reads none (paid 0, counted)."""
    content = _THINKING.sub("", reply).replace("<answer>", "").replace("</answer>", "")
    if verifier == "general-web_instruct_general_verifier":
        return _web_instruct(content)
    score = _json_score(content)
    if score is None:
        return None
    return score / 10.0 if verifier in ("general-quality", "general-quality_ref") else score


def llm_verdicts(
    chat: Any, rows: Sequence[Mapping[str, Any]], *, max_new_tokens: int
) -> list[dict[str, Any]]:
    """Verdicts for rows of ``verifier``, ``query``, ``response`` and ``label``: each row's
    prompt one chat of ``chat`` (an ``OpenAIChat``, greedy), its reply scored by
    :func:`score_reply` (``score`` 0-1 and ``valid``; the reply kept as ``reasoning``)."""
    prompts = [
        [{"role": "user", "content": render_llm_prompt(
            str(r["verifier"]), str(r["query"]), str(r["response"]), r.get("label", ""))}]
        for r in rows
    ]  # fmt: skip
    replies = chat.generate(prompts, max_new_tokens=max_new_tokens) if prompts else []
    out = []
    for row, reply in zip(rows, replies, strict=True):
        score = score_reply(str(row["verifier"]), reply)
        out.append({"valid": score is not None, "score": score, "reasoning": reply})
    return out
