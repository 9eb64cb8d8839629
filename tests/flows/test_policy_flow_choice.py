"""Each policy flow takes only its own recipes: `rlvr` refuses a judge-paid one (its judge must
be pinned and its training questions checked, which only `rlvr-judged` does), and `rlvr-judged`
refuses one no judge pays. Both refuse before any step runs."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_the_rlvr_flow_refuses_a_judge_paid_recipe(
    prefect_server: str, judgeflow_home: Path
) -> None:
    from flows.rlvr import rlvr

    with pytest.raises(ValueError, match="run it with the rlvr-judged flow"):
        rlvr(recipe="rlvr-judged", profile="tiny")
    assert not (judgeflow_home / "jobs").exists()  # no step ran


def test_the_rlvr_judged_flow_refuses_a_recipe_no_judge_pays(
    prefect_server: str, judgeflow_home: Path
) -> None:
    from flows.rlvr_judged import rlvr_judged

    with pytest.raises(ValueError, match="is not judge-paid"):
        rlvr_judged(recipe="rlvr", profile="tiny")
    assert not (judgeflow_home / "jobs").exists()
