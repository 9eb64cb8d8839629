"""judgeflow's verifiers score as open-instruct's (``open_instruct/ground_truth_utils.py``).

Every expectation is what open-instruct's code gives, read case by case from it (its own tests'
GSM8K cases are among them); a quirk of theirs is marked as one.
"""

from __future__ import annotations

import pytest

from judgeflow.rewards.rlvr import VERIFIERS, UnknownVerifier, resolve, verify
from judgeflow.rewards.rlvr.verifiers import normalize_answer, remove_thinking_section


@pytest.mark.parametrize(
    ("prediction", "label", "expected"),
    [
        # open-instruct's own test cases (TestGSM8KVerifier)
        ("Therefore the answer is -3", "-3", 1.0),
        ("Therefore the answer is +7", "+7", 1.0),
        ("Final answer: -3.5", "-3.5", 1.0),
        (r"The result is \\boxed{-3}", "-3", 1.0),
        ("Therefore the answer is 3", "-3", 0.0),
        # the last number counts, commas between digits removed
        ("First 12, then 1,234 apples.", "1234", 1.0),
        ("It is 1,234,567.", "1234567", 1.0),
        ("Between 3 and 5 it is 4", "4", 1.0),
        ("Between 3 and 5 it is 4", "3", 0.0),
        # compared as strings: 3.50 is not 3.5, +7 is not 7
        ("The answer is 3.50", "3.5", 0.0),
        ("The answer is +7", "7", 0.0),
        ("The answer is .5", ".5", 1.0),
        # quirk: the comma removal does not overlap, so 1,2,3 becomes 12,3 and 3 is the last number
        ("Count: 1,2,3", "3", 1.0),
        ("Count: 1,2,3", "123", 0.0),
        # quirk: with no number at all, the whole text is compared, lowercase
        ("Seven", "seven", 1.0),
        ("Seven.", "seven", 0.0),
        # a number label is compared as its string
        ("So 42.", 42, 1.0),
    ],
)
def test_gsm8k(prediction: str, label: object, expected: float) -> None:
    assert verify("gsm8k", prediction, label) == expected


@pytest.mark.parametrize(
    ("prediction", "label", "expected"),
    [
        # \boxed{}: the last one, braces balanced, compared by sympy or Hendrycks' normalisation
        (r"so $x$ is \boxed{\frac{1}{2}}", "0.5", 1.0),
        (r"first \boxed{2} then \boxed{3}", "3", 1.0),
        (r"first \boxed{2} then \boxed{3}", "2", 0.0),
        (r"\boxed{\frac{a}{b}}", r"\frac{a}{b}", 1.0),
        (r"\boxed{2x+2}", "2(x+1)", 1.0),  # sympy: the difference simplifies to 0
        (r"\boxed{\dfrac{3}{4}}", r"\frac{3}{4}", 1.0),
        (r"\boxed{5^\circ}", "5", 1.0),
        # "\boxed x" (a space) ends at the next "$"
        (r"The answer is $\boxed 5$.", "5", 1.0),
        # quirk: \fbox{} is found but cannot be unboxed, and nothing else is tried but the
        # whole text, which does not parse: 0
        (r"\fbox{3}", "3", 0.0),
        # Minerva's sentence, normalised: units and "=" dropped
        ("Final Answer: The final answer is 5 units. I hope it is correct.", "5", 1.0),
        ("Final Answer: The final answer is $x=12$. I hope it is correct.", "12", 1.0),
        ("Final Answer: The final answer is 1,000. I hope it is correct.", "1000", 1.0),
        # the last $…$, when neither of those is there
        ("So we get $x = 3$ and then $7$", "7", 1.0),
        ("So we get $x = 3$ and then $7$", "3", 0.0),
        # with a box, a last $…$ is not looked at
        (r"\boxed{1} but maybe $2$", "2", 0.0),
        # the whole text: normalised, and as it is
        ("42", "42", 1.0),
        ("so x = 42", "42", 1.0),
        ("I do not know", "42", 0.0),
        # a label that is not a string never matches
        (r"\boxed{5}", 5, 0.0),
        # equal as strings: paid without sympy (which would evaluate 9^387420489 for minutes)
        (r"\boxed{9^{9^{9}}}", "9^{9^{9}}", 1.0),
    ],
)
def test_math(prediction: str, label: object, expected: float) -> None:
    assert verify("math", prediction, label) == expected


@pytest.mark.parametrize(
    ("prediction", "label", "expected"),
    [
        ("Final Answer: The final answer is 7. I hope it is correct.", "7", 1.0),
        ("so x = 7", "7", 1.0),  # without Minerva's sentence, the whole text normalised
        # quirk: "strict" still takes a box or a $…$, through Minerva's normalisation of the
        # whole text (it unwraps \boxed{…} and keeps the first $…$)
        (r"\boxed{7}", "7", 1.0),
        ("We get $7$ at the end", "7", 1.0),
        (r"\boxed{7} and 8", "7", 0.0),  # the rest of the text stays: "7and8"
        ("Final Answer: The final answer is 8. I hope it is correct. $7$", "7", 0.0),
    ],
)
def test_strict_math(prediction: str, label: str, expected: float) -> None:
    assert verify("strict_math", prediction, label) == expected


@pytest.mark.parametrize(
    ("prediction", "label", "expected"),
    [
        ("<think>hmm</think><answer>The Eiffel Tower!</answer>", "eiffel tower", 1.0),
        ("<answer>Paris</answer>", "paris", 1.0),
        ("<answer>first</answer> <answer>second</answer>", "second", 1.0),  # the last one
        ("Paris", "paris", 0.0),  # no tags: 0
        ("<answer>Paris", "paris", 0.0),  # one tag missing: 0
        ("<answer>London</answer>", "paris", 0.0),
        ("<answer>  a   new\tyork </answer>", "New York.", 1.0),
    ],
)
def test_string_matcher(prediction: str, label: str, expected: float) -> None:
    assert verify("string_matcher", prediction, label) == expected


@pytest.mark.parametrize(
    ("prediction", "label", "expected"),
    [
        ("Reasoning... The answer is: Yes.", "yes", 1.0),
        ("The answer is: no The answer is: maybe", "maybe", 1.0),  # after the last one
        ("yes", "Yes", 1.0),  # no marker: the whole text
        ("The answer is yes", "yes", 0.0),  # "The answer is: " needs its colon and space
    ],
)
def test_flan(prediction: str, label: str, expected: float) -> None:
    assert verify("flan", prediction, label) == expected


@pytest.mark.parametrize(
    ("prediction", "label", "expected"),
    [
        ("<think>x</think><answer>Paris is the capital</answer>", "The capital is Paris", 1.0),
        ("Paris", "Paris France", 2 * 1.0 * 0.5 / 1.5),  # precision 1, recall 1/2
        ("Lyon", "Paris", 0.0),
        # the text after the last </think> only; what thinking says does not count
        ("<think>Paris</think>Lyon", "Paris", 0.0),
        # quirk: <|assistant|> is not removed, and losing its punctuation glues it to the
        # next word ("assistantparis")
        ("<|assistant|>Paris", "Paris", 0.0),
        ("<|assistant|> Paris", "Paris", 2 * 0.5 * 1.0 / 1.5),
    ],
)
def test_string_f1(prediction: str, label: str, expected: float) -> None:
    assert verify("string_f1", prediction, label) == pytest.approx(expected)


def test_string_f1_and_puzzle_score_0_where_open_instruct_raises() -> None:
    """open-instruct's `normalize_answer` calls `.lower()` on the label: a list label raises
    there (the whole batch's scoring fails); judgeflow pays 0."""
    assert verify("string_f1", "Paris", ["Paris"]) == 0.0
    assert verify("puzzle", "Paris", ["Paris"]) == 0.0
    assert verify("re_search_f1", "<finish>Paris</finish>", ["Paris"]) == 0.0
    assert verify("re_search_f1", "<finish>Paris</finish>", "[]") == 0.0  # max() of nothing


@pytest.mark.parametrize(
    ("prediction", "label", "expected"),
    [
        ("<think>work</think><answer>The Knight</answer>", "knight", 1.0),
        ("<|assistant|> <think>w</think> Knight. ", "knight", 1.0),
        ("<think>knight</think>knave", "knight", 0.0),
        ("knight and knave", "knight", 0.0),  # exact, not contained
    ],
)
def test_puzzle(prediction: str, label: str, expected: float) -> None:
    assert verify("puzzle", prediction, label) == expected


@pytest.mark.parametrize(
    ("prediction", "label", "expected"),
    [
        ("<finish>Paris</finish>", "Paris", 1.0),
        ("<finish>Paris, France</finish>", '["Paris", "France"]', 2 * 0.5 * 1.0 / 1.5),
        ("<finish>Lyon</finish>", "Paris", 0.1),  # well-formed, F1 0
        ("<finish></finish>", "Paris", 0.0),  # empty answer
        ("Paris", "Paris", 0.0),  # no tag at all
        # quirk: one tag is enough; without </finish> the answer runs to the end
        ("<finish>Paris", "Paris", 1.0),
        ("Paris</finish>", "Paris", 1.0),
        # the last <finish> counts
        ("<finish>Lyon</finish> <finish>Paris</finish>", "Paris", 1.0),
        ("<finish>42</finish>", "42", 1.0),  # a JSON number label, compared as its text
        ("<finish>Paris</finish>", '"Paris"', 1.0),  # a JSON string label
    ],
)
def test_re_search_f1(prediction: str, label: str, expected: float) -> None:
    assert verify("re_search_f1", prediction, label) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("prediction", "label", "expected"),
    [
        ("<finish>Paris</finish>", "Paris", 1.0),
        ("<FINISH> the Paris </Finish>", "paris", 1.0),  # any case, normalised
        ("<finish>Lyon</finish>", '["Paris", "Lyon"]', 1.0),  # a JSON list: any of them
        ("<finish>Lyon</finish>", ["Paris", "Lyon"], 1.0),  # a list label as given
        ("<finish>Paris, France</finish>", "Paris", 0.0),  # exact match, not F1
        ("<finish> </finish>", "Paris", 0.0),
        ("Paris", "Paris", 0.0),
        # the first <finish>…</finish> counts (the F1 verifier takes the last)
        ("<finish>Lyon</finish> <finish>Paris</finish>", "Paris", 0.0),
        ("<finish>Paris", "Paris", 0.0),  # both tags needed here
    ],
)
def test_re_search(prediction: str, label: object, expected: float) -> None:
    assert verify("re_search", prediction, label) == expected


def test_normalisation_and_thinking_removal_helpers() -> None:
    assert normalize_answer("The  Cat, a dog & AN owl!") == "cat dog owl"
    assert remove_thinking_section("<|assistant|> <think>a</think> b <answer>c</answer> ") == "b c"
    assert remove_thinking_section("<think>a</think>x</think>y") == "y"


def test_routing_is_case_insensitive_and_remappable() -> None:
    assert resolve("GSM8K") == "gsm8k"
    assert verify("MATH", r"\boxed{2}", "2") == 1.0
    assert resolve("my_numbers", {"My_Numbers": "GSM8K"}) == "gsm8k"
    with pytest.raises(
        UnknownVerifier, match=r"no verifier 'rubric'.*code.*gsm8k.*max_length.*remap"
    ):
        resolve("rubric")
    assert set(VERIFIERS) == {
        "gsm8k",
        "math",
        "strict_math",
        "string_matcher",
        "flan",
        "ifeval_old",
        "ifeval",
        "string_f1",
        "puzzle",
        "re_search",
        "re_search_f1",
    }


def test_ifeval_old_is_routed() -> None:
    label = '{"func_name": "validate_lowercase"}'
    assert verify("ifeval_old", "<think>THINKING</think>all lower", label) == 1.0
    assert verify("IFEVAL_OLD", "Not lower", label) == 0.0


@pytest.mark.parametrize("seed", range(3))
def test_the_dollar_rule_matches_minervas_regex(seed: int) -> None:
    """Minerva's `re.sub(r"(.*?)(\\$)(.*?)(\\$)(.*)", "$\\3$", …)`, quadratic on a long line
    without two `$`, is a linear scan here: the same output on any text."""
    import random
    import re

    from judgeflow.rewards.rlvr.math_answers import _dollar_spans

    pattern = re.compile(r"(.*?)(\$)(.*?)(\$)(.*)")
    rng = random.Random(seed)
    for _ in range(20_000):
        text = "".join(rng.choice("ab$\n\r x") for _ in range(rng.randint(0, 14)))
        assert _dollar_spans(text) == pattern.sub("$\\3$", text), repr(text)
