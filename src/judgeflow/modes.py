"""What a run trains, named once: a GRPO judge that scores one answer (`pointwise`, `<score>`) or
picks the better of two (`pairwise`, `<better>`), or GRRM, which ranks a group of translations.
Configuration, data, rewards, evaluation and the command line's choices all use these."""

from typing import Literal, get_args

#: The GRPO judges (recipes `grpo-pointwise`, `grpo-pairwise`).
JudgeMode = Literal["pointwise", "pairwise"]
#: Every recipe family: the judges and GRRM (`grrm-*`). Also the reward module's name.
Mode = Literal[JudgeMode, "grrm"]

JUDGE_MODES: tuple[JudgeMode, ...] = get_args(JudgeMode)
MODES: tuple[Mode, ...] = get_args(Mode)
