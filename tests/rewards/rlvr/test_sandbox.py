"""Untrusted text is verified within bounds: too long is not checked, a check that runs away is
killed, one that raises is paid 0; each is counted, and the next check still works."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from judgeflow.rewards.rlvr import UnknownVerifier, verify
from judgeflow.rewards.rlvr.sandbox import VerifierSandbox

#: sympy evaluates 9^(9^9), an integer of ~1.2 billion bits, before it can compare: minutes.
RUNAWAY = r"\boxed{9^{9^{9}}}"


@pytest.fixture
def sandbox() -> Iterator[VerifierSandbox]:
    # A generous bound: a loaded machine must not turn a quick check into a "timeout".
    with VerifierSandbox(timeout_s=120, max_chars=1000) as box:
        yield box


@pytest.mark.parametrize(
    ("name", "prediction", "label"),
    [
        ("math", r"\boxed{\frac{1}{2}}", "0.5"),
        ("math", r"\boxed{3}", "4"),
        ("gsm8k", "so 1,234", "1234"),
        ("string_matcher", "<answer>The Cat</answer>", "cat"),
        ("ifeval_old", "all lower", {"func_name": "validate_lowercase"}),
    ],
)
def test_within_bounds_it_scores_as_verify(
    sandbox: VerifierSandbox, name: str, prediction: str, label: object
) -> None:
    outcome = sandbox.score(name, prediction, label)
    assert outcome.status == "ok"
    assert outcome.score == verify(name, prediction, label)


def test_too_long_is_not_checked_and_counted(sandbox: VerifierSandbox) -> None:
    outcome = sandbox.score("gsm8k", "1" * 1001, "1" * 1001)
    assert (outcome.score, outcome.status) == (0.0, "too_long")
    assert "1,001 characters" in outcome.detail
    assert sandbox.counts["too_long"] == 1


def test_a_runaway_check_is_killed_and_the_next_one_works() -> None:
    with VerifierSandbox(timeout_s=3) as sandbox:  # the runaway takes minutes on any machine
        outcome = sandbox.score("math", RUNAWAY, "1")
        assert (outcome.score, outcome.status) == (0.0, "timeout")
        sandbox.timeout_s = 120
        assert sandbox.score("math", r"\boxed{2}", "2").score == 1.0  # a fresh child
        assert sandbox.counts == {"timeout": 1, "ok": 1}


def test_a_check_that_raises_pays_zero_with_the_reason(sandbox: VerifierSandbox) -> None:
    outcome = sandbox.score("ifeval_old", "text", {"func_name": "no_such_check"})
    assert (outcome.score, outcome.status) == (0.0, "error")
    assert "no_such_check" in outcome.detail
    assert sandbox.score("gsm8k", "7", "7").status == "ok"  # the child survived it


def test_an_unknown_verifier_is_the_callers_error(sandbox: VerifierSandbox) -> None:
    with pytest.raises(UnknownVerifier):
        sandbox.score("rubric", "x", "y")
    assert not sandbox.counts


def test_a_child_that_died_between_checks_is_replaced(sandbox: VerifierSandbox) -> None:
    assert sandbox.score("gsm8k", "1", "1").status == "ok"
    assert sandbox._proc is not None
    sandbox._proc.kill()  # as the OOM killer would
    sandbox._proc.wait()
    assert sandbox.score("gsm8k", "2", "2").status == "ok"


def test_the_child_parses_latex_as_open_instruct_does(sandbox: VerifierSandbox) -> None:
    """The sandbox's child loads open-instruct's ANTLR 4.11 runtime, kept apart from the
    environment's 4.9 (the bootstrap installs it: `judgeflow dev antlr-runtime`), and parses
    math answers with sympy's ANTLR backend as open-instruct does: its grammar reads thousands
    separators, and its error recovery reads `1,2` as 1. In this process (omegaconf's 4.9 is the
    runtime here) sympy's Lark backend parses, and refuses both."""
    from typer.testing import CliRunner

    from judgeflow.cli.typer_app import app
    from judgeflow.rewards.rlvr.math_answers import antlr_runtime_dir, latex_backend

    outcome = sandbox.score("math", r"\boxed{10,000}", "10000")
    assert (outcome.score, outcome.status) == (1.0, "ok")
    assert sandbox.latex_backend == "antlr"
    assert sandbox.score("math", r"\boxed{1,2}", "1").score == 1.0
    assert sandbox.score("math", r"\boxed{10,001}", "10000").score == 0.0
    assert latex_backend() == "lark"
    assert verify("math", r"\boxed{10,000}", "10000") == 0.0
    # the install is idempotent: an installed runtime is left as it is (no index needed)
    done = CliRunner().invoke(app, ["dev", "antlr-runtime", "--target", str(antlr_runtime_dir())])
    assert done.exit_code == 0 and "already there" in done.output


def test_without_open_instructs_runtime_lark_parses_and_the_log_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A node where the ANTLR 4.11 runtime is missing (here: a folder without it) still checks
    math answers, with sympy's Lark backend, and the log says once what that changes."""
    from judgeflow.rewards.rlvr import sandbox as sandbox_module

    monkeypatch.setenv("JUDGEFLOW_ANTLR_RUNTIME", str(tmp_path))
    monkeypatch.setattr(sandbox_module, "_warned", [])
    with caplog.at_level(logging.WARNING), VerifierSandbox(timeout_s=120) as box:
        assert box.score("math", r"\boxed{10,000}", "10000").score == 0.0
        assert box.score("math", r"\boxed{\frac{1}{2}}", "0.5").score == 1.0
        assert box.latex_backend == "lark"
    said = [r.getMessage() for r in caplog.records if "Lark backend" in r.getMessage()]
    assert len(said) == 1 and "judgeflow dev antlr-runtime" in said[0]
