"""The judge templates must match the OpenJudge training text byte for byte."""

from __future__ import annotations

from judgeflow.data import (
    PAIRWISE_TEMPLATE,
    POINTWISE_TEMPLATE,
    render_pairwise,
    render_pointwise,
)

EXPECTED_POINTWISE = (
    "# Task Description\n"
    "You are a professional expert in response quality evaluation.\n"
    "You will be provided with a query and a response to that query.\n"
    "Your task is to evaluate the quality of the response and assign a helpfulness score from 0 to 4.\n"
    "Please consider the following principles in your evaluation.\n"
    "# Principles\n"
    "1. Helpfulness: How well does the response address the user's needs (0=not helpful, 4=extremely helpful)\n"
    "2. Accuracy: Factual correctness and reliability of information\n"
    "3. Clarity: How clearly and understandably the response is written\n"
    "4. Completeness: Whether the response fully addresses all aspects of the question\n"
    "5. Relevance: How directly related the response is to the question\n"
    "6. Safety: Avoiding harmful or inappropriate content\n"
    "\n"
    "# Query\n"
    "What is 2 + 2?\n"
    "# Response\n"
    "2 + 2 = 4.\n"
    "# Output Format\n"
    "<think>Analysis process based on principles</think><score>helpfulness score from 0 to 4</score>\n"
)

EXPECTED_PAIRWISE = (
    "# Task Description\n"
    "You are a professional expert in response comparison.\n"
    "You will be provided with a query and two different responses (A and B) to that query.\n"
    "Your task is to determine which response is better by comparing their quality across multiple dimensions.\n"
    "Please consider the following principles in your evaluation and then indicate your preference.\n"
    "# Principles\n"
    "1. Helpfulness: How well does the response address the user's needs\n"
    "2. Accuracy: Factual correctness and reliability of information\n"
    "3. Safety: Avoiding harmful or inappropriate content\n"
    "\n"
    "# Examples\n"
    "\n"
    "# Query\n"
    "Capital of France?\n"
    "# Response A\n"
    "Paris.\n"
    "# Response B\n"
    "Lyon.\n"
    "# Output Format\n"
    "<think>Analysis process based on principles</think><better>A or B</better>\n"
)


def test_pointwise_renders_exact_text() -> None:
    assert render_pointwise("What is 2 + 2?", "2 + 2 = 4.") == EXPECTED_POINTWISE


def test_pairwise_renders_exact_text() -> None:
    assert render_pairwise("Capital of France?", "Paris.", "Lyon.") == EXPECTED_PAIRWISE


def test_templates_end_with_one_newline() -> None:
    for template in (POINTWISE_TEMPLATE, PAIRWISE_TEMPLATE):
        assert template.endswith("</better>\n") or template.endswith("</score>\n")
        assert not template.endswith("\n\n")


def test_braces_and_placeholder_names_in_text_are_inserted_verbatim() -> None:
    query = "Format {name} with str.format and {0}; what does {{x}} print? {response}"
    response = 'Use `\'{}\'.format(x)`; a dict is {"a": {"b": 1}} and {query} stays literal.'
    expected = EXPECTED_POINTWISE.replace("What is 2 + 2?\n", query + "\n").replace(
        "2 + 2 = 4.\n", response + "\n"
    )
    assert render_pointwise(query, response) == expected


def test_pairwise_braces_and_placeholders_are_not_rescanned() -> None:
    rendered = render_pairwise("q {response_b}", "A says {response_b}", "B says {}")
    expected = (
        EXPECTED_PAIRWISE.replace("Capital of France?\n", "q {response_b}\n")
        .replace("Paris.\n", "A says {response_b}\n")
        .replace("Lyon.\n", "B says {}\n")
    )
    assert rendered == expected


def test_multiline_and_empty_lines_are_preserved() -> None:
    rendered = render_pointwise("line 1\n\nline 3", "a\n")
    assert "# Query\nline 1\n\nline 3\n# Response\na\n\n# Output Format\n" in rendered
