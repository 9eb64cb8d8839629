"""Each reward module works when loaded by file path, the way verl's workers load it."""

from __future__ import annotations

import ast
import importlib.util
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from judgeflow.rewards import REWARD_FUNCTION_NAME, REWARD_MODULES, reward_module_path

# A few cases per mode, at least one paid, so a loader mix-up cannot pass unnoticed.
CASES: dict[str, list[tuple[str, Any]]] = {
    "pointwise": [
        ("<think>ok</think><score>3</score>", {"helpfulness": 4}),
        ("<think>ok</think><score>9</score>", "4"),
        ("<think>truncated", 0),
    ],
    "pairwise": [
        ("<think>ok</think><better>b</better>", {"preference": "B"}),
        ("<think>ok</think><better>A</better>", "B"),
        ("<better>A</better><better>A</better>", "A"),
    ],
    "grrm": [
        (
            "why\n### Final Ranking:\nA > B = C\n### Scores:\nA: 8, B: 4, C: 4",
            '{"A": 9, "B": 6, "C": 4}',
        ),
        ("why\n### Final Ranking:\nA < B\n### Scores:\nA: 1, B: 2", {"A": 1, "B": 2}),
    ],
}
EXPECTED_KEYS = {
    "pointwise": {"score", "valid_answer", "pred"},
    "pairwise": {"score", "valid_answer", "pred"},
    "grrm": {"score", "valid_answer", "ranking_reward", "score_reward"},
}
#: The judges' modules: standard library only. Policy RLVR's (`rlvr/score.py`) imports judgeflow
#: and sympy, and verl's loader is run on it in tests/rewards/rlvr/test_score.py.
MODES = sorted(m for m in REWARD_MODULES if m != "rlvr")


def load_by_path(path: str) -> ModuleType:
    """Import a file under a fresh name, without judgeflow's package machinery."""
    spec = importlib.util.spec_from_file_location(f"reward_{uuid.uuid4().hex}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expected_results(mode: str) -> list[dict[str, float | int]]:
    module = importlib.import_module(f"judgeflow.rewards.{mode}")
    return [module.compute_score("src", sol, gt, extra_info={}) for sol, gt in CASES[mode]]


def test_every_mode_has_an_existing_absolute_path() -> None:
    assert MODES == ["grrm", "pairwise", "pointwise"]
    assert REWARD_MODULES["rlvr"].endswith("rewards/rlvr/score.py")
    for mode, path in REWARD_MODULES.items():
        assert Path(path).is_absolute() and Path(path).is_file()
        assert reward_module_path(mode) == path


def test_unknown_mode_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="grrm, pairwise, pointwise, rlvr"):
        reward_module_path("listwise")


@pytest.mark.parametrize("mode", MODES)
def test_module_imports_only_the_standard_library(mode: str) -> None:
    tree = ast.parse(Path(reward_module_path(mode)).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports break loading by path"
            imported.add((node.module or "").split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


@pytest.mark.parametrize("mode", MODES)
def test_loaded_by_path_gives_the_same_results(mode: str) -> None:
    module = load_by_path(reward_module_path(mode))
    results = [module.compute_score("src", sol, gt, extra_info={}) for sol, gt in CASES[mode]]
    assert results == expected_results(mode)
    assert all(set(result) == EXPECTED_KEYS[mode] for result in results)
    assert any(result["score"] > 0.0 for result in results)


@pytest.fixture
def no_cached_custom_module() -> Iterator[None]:
    """verl caches the first file it loads as sys.modules["custom_module"]; isolate each test."""
    saved = sys.modules.pop("custom_module", None)
    yield
    sys.modules.pop("custom_module", None)
    if saved is not None:
        sys.modules["custom_module"] = saved


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.usefixtures("no_cached_custom_module")
def test_verl_loader_gives_the_same_results(mode: str) -> None:
    pytest.importorskip("verl")
    omegaconf = pytest.importorskip("omegaconf")
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = omegaconf.OmegaConf.create(
        {
            "custom_reward_function": {
                "path": reward_module_path(mode),
                "name": REWARD_FUNCTION_NAME,
                "reward_kwargs": {},
            }
        }
    )
    reward_fn = get_custom_reward_fn(config)
    assert reward_fn is not None
    assert sys.modules["custom_module"].__file__ == reward_module_path(mode)
    # verl's reward managers call it with keywords.
    results = [
        reward_fn(data_source="src", solution_str=sol, ground_truth=gt, extra_info={})
        for sol, gt in CASES[mode]
    ]
    assert results == expected_results(mode)


def test_grrm_case_is_worth_what_the_rule_says() -> None:
    # Pairs AB ok, AC ok, BC (6 > 4 in truth, tie predicted) wrong: 2/3.
    # Margins AB |3-4|=1 0.6, AC |5-4|=1 0.6, BC |2-0|=2 0.2 -> 1.4 / 3.
    solution, truth = CASES["grrm"][0]
    module = load_by_path(reward_module_path("grrm"))
    result = module.compute_score("src", solution, truth)
    assert result["ranking_reward"] == pytest.approx(2 / 3)
    assert result["score_reward"] == pytest.approx(1.4 / 3)
