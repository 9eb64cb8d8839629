"""Verifiable rewards for policy RLVR, as open-instruct's ``grpo_fast`` pays them.

- :mod:`.verifiers`: ``verify(name, prediction, label)``, open-instruct's verifiers by name
  (the length verifiers also take ``tokens``, the response's length in the policy's tokens);
- :mod:`.math_answers`: extracting and comparing math answers (``math``, ``strict_math``);
- :mod:`.code_tests`: ``code`` and ``code_stdio``, the response's program run against the row's
  tests in a confined child (:mod:`.code_runner`);
- :mod:`.if_functions`: Tulu 3's instruction-following constraints (``ifeval_old``);
- :mod:`.ifevalg`: open-instruct's IFEvalG instructions (``ifeval``), 54 ids, partial credit;
- :mod:`.llm_judge`: open-instruct's LM-judge verifiers (``general-quality`` …): its prompts
  and score extractors, for an LLM judge (``reward.judge_mode: llm``);
- :mod:`.sandbox`: the same checks with bounded time, memory and input size;
- :mod:`.compose`: a response's reward from its verifiers, the R1 format reward and the
  non-stop penalty, and the metrics open-instruct logs.
"""

from judgeflow.rewards.rlvr.verifiers import (
    CODE_VERIFIERS,
    LENGTH_VERIFIERS,
    VERIFIERS,
    UnknownVerifier,
    resolve,
    verify,
)

__all__ = [
    "CODE_VERIFIERS",
    "LENGTH_VERIFIERS",
    "VERIFIERS",
    "UnknownVerifier",
    "resolve",
    "verify",
]
