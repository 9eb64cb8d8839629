"""The run config as the evaluation generator's arguments: a golden file per recipe."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from judgeflow.config import list_recipes, load_config
from judgeflow.evaluation import params_from

#: A judge-paid recipe as a pipeline runs it: `reward.judge` pinned to a version's weights.
PINNED_JUDGE = ["reward.judge=/store/runs/judge/final", "reward.judge_mode=pointwise",
                "reward.judge_max_new_tokens=24"]  # fmt: skip


def pinned(recipe: str) -> list[str]:
    return PINNED_JUDGE if load_config(recipe).reward.paid_by_judge else []


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "evaluation"
UPDATE_GOLDEN = os.environ.get("JUDGEFLOW_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("recipe", list_recipes())
def test_recipe_maps_onto_the_golden_evaluation_params(recipe: str) -> None:
    cfg = load_config(recipe, overrides=pinned(recipe))
    text = json.dumps(params_from(cfg), indent=2, sort_keys=True) + "\n"
    golden = GOLDEN / f"{recipe}.json"
    if UPDATE_GOLDEN:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.is_file(), f"{golden} missing; run with JUDGEFLOW_UPDATE_GOLDEN=1"
    assert text == golden.read_text(), "evaluation mapping changed; review, then regenerate"
