"""What a run trains, named once: a GRPO judge that scores one answer (`pointwise`, `<score>`) or
picks the better of two (`pairwise`, `<better>`), GRRM, which ranks a group of translations, or a
policy paid by verifiable rewards (`rlvr`, open-instruct's RLVR). Configuration, data, rewards,
evaluation and the command line's choices all use these."""

from typing import Literal, get_args

#: The GRPO judges (recipes `grpo-pointwise`, `grpo-pairwise`).
JudgeMode = Literal["pointwise", "pairwise"]
#: Every recipe family: the judges, GRRM (`grrm-*`) and policy RLVR (`rlvr`).
Mode = Literal[JudgeMode, "grrm", "rlvr"]

JUDGE_MODES: tuple[JudgeMode, ...] = get_args(JudgeMode)
MODES: tuple[Mode, ...] = get_args(Mode)
#: The modes whose model is a judge (served, run over data by `judgeflow judge`).
JUDGE_MODELS: tuple[Mode, ...] = (*JUDGE_MODES, "grrm")
