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


def test_normalisation_and_thinking_removal_helpers() -> None:
    assert normalize_answer("The  Cat, a dog & AN owl!") == "cat dog owl"
    assert remove_thinking_section("<|assistant|> <think>a</think> b <answer>c</answer> ") == "b c"
    assert remove_thinking_section("<think>a</think>x</think>y") == "y"


def test_routing_is_case_insensitive_and_remappable() -> None:
    assert resolve("GSM8K") == "gsm8k"
    assert verify("MATH", r"\boxed{2}", "2") == 1.0
    assert resolve("my_numbers", {"My_Numbers": "GSM8K"}) == "gsm8k"
    with pytest.raises(UnknownVerifier, match=r"no verifier 'code'.*gsm8k.*remap"):
        resolve("code")
    assert set(VERIFIERS) == {
        "gsm8k",
        "math",
        "strict_math",
        "string_matcher",
        "flan",
        "ifeval_old",
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
