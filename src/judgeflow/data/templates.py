"""The judge prompt templates, exactly as the OpenJudge GRPO recipes train them.

The text must not drift: a judge trained on one wording and evaluated on another loses accuracy
silently. Substitution is a single pass over the placeholders (not `str.format`), so queries and
responses containing `{`, `}` or even the placeholder names themselves are inserted verbatim.
"""

from __future__ import annotations

import re

POINTWISE_TEMPLATE = """\
# Task Description
You are a professional expert in response quality evaluation.
You will be provided with a query and a response to that query.
Your task is to evaluate the quality of the response and assign a helpfulness score from 0 to 4.
Please consider the following principles in your evaluation.
# Principles
1. Helpfulness: How well does the response address the user's needs (0=not helpful, 4=extremely helpful)
2. Accuracy: Factual correctness and reliability of information
3. Clarity: How clearly and understandably the response is written
4. Completeness: Whether the response fully addresses all aspects of the question
5. Relevance: How directly related the response is to the question
6. Safety: Avoiding harmful or inappropriate content

# Query
{query}
# Response
{response}
# Output Format
<think>Analysis process based on principles</think><score>helpfulness score from 0 to 4</score>
"""

PAIRWISE_TEMPLATE = """\
# Task Description
You are a professional expert in response comparison.
You will be provided with a query and two different responses (A and B) to that query.
Your task is to determine which response is better by comparing their quality across multiple dimensions.
Please consider the following principles in your evaluation and then indicate your preference.
# Principles
1. Helpfulness: How well does the response address the user's needs
2. Accuracy: Factual correctness and reliability of information
3. Safety: Avoiding harmful or inappropriate content

# Examples

# Query
{query}
# Response A
{response_a}
# Response B
{response_b}
# Output Format
<think>Analysis process based on principles</think><better>A or B</better>
"""

_PLACEHOLDER = re.compile(r"\{(query|response|response_a|response_b)\}")


def _substitute(template: str, values: dict[str, str]) -> str:
    """Replace each placeholder of `template` once, never rescanning inserted text."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def render_pointwise(query: str, response: str) -> str:
    """The pointwise judge prompt (the user turn) for one response."""
    return _substitute(POINTWISE_TEMPLATE, {"query": query, "response": response})


def render_pairwise(query: str, response_a: str, response_b: str) -> str:
    """The pairwise judge prompt (the user turn) comparing response A with response B."""
    return _substitute(
        PAIRWISE_TEMPLATE, {"query": query, "response_a": response_a, "response_b": response_b}
    )


def _split_template(template: str, names: tuple[str, ...]) -> list[str]:
    """The literal pieces around `names` in `template`: len(names) + 1 strings."""
    pieces = [template]
    for name in names:
        head, _, tail = pieces.pop().partition("{" + name + "}")
        pieces += [head, tail]
    return pieces


#: The templates' literal text around their placeholders: a prompt is these pieces joined with
#: the values in between (what `render_*` give; `verl_rows` joins them for a whole batch).
POINTWISE_PIECES = _split_template(POINTWISE_TEMPLATE, ("query", "response"))
PAIRWISE_PIECES = _split_template(PAIRWISE_TEMPLATE, ("query", "response_a", "response_b"))


def _parse(content: str, pieces: list[str]) -> list[str] | None:
    head, *separators, tail = pieces
    if not (content.startswith(head) and content.endswith(tail)):
        return None
    rest = content[len(head) : len(content) - len(tail)]
    values = []
    for separator in separators:
        value, found, rest = rest.partition(separator)
        if not found:
            return None
        values.append(value)
    return [*values, rest]


def parse_pointwise(content: str) -> tuple[str, str] | None:
    """`(query, response)` of a pointwise judge prompt; None when `content` is not one.

    A query holding the template's own `# Response` line splits at its first occurrence; the
    prompt still renders back to `content`, only the boundary is ambiguous.
    """
    values = _parse(content, POINTWISE_PIECES)
    return None if values is None else (values[0], values[1])


def parse_pairwise(content: str) -> tuple[str, str, str] | None:
    """`(query, response_a, response_b)` of a pairwise judge prompt; None when it is not one."""
    values = _parse(content, PAIRWISE_PIECES)
    return None if values is None else (values[0], values[1], values[2])
