"""open-instruct's ``ifeval`` verifier (IFEvalG), instruction by instruction, at parity.

Each case in ``ifevalg_cases/*.json`` was worked out by running open-instruct's own
``open_instruct/IFEvalG`` (e6c3044) with ``ifevalg_cases/work_out.py``: whether its
``build_description`` accepts the arguments (or draws one at random, or raises) and whether its
``check_following`` says the response follows (or raises). judgeflow's builder must do the same,
refusing with :class:`DrawnAtRandom` where open-instruct would make an argument up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judgeflow.data.errors import DataError, DataValidationError
from judgeflow.data.rlvr import read_rlvr
from judgeflow.dev.nltk_punkt import PUNKT_FILES, default_nltk_data, install_punkt, punkt_installed
from judgeflow.rewards.rlvr import verify
from judgeflow.rewards.rlvr.ifevalg import INSTRUCTIONS, DrawnAtRandom
from judgeflow.rewards.rlvr.sandbox import VerifierSandbox

CASE_FILES = sorted((Path(__file__).parent / "ifevalg_cases").glob("*.json"))


def _cases() -> list[Any]:
    params = []
    for path in CASE_FILES:
        for number, case in enumerate(json.loads(path.read_text())):
            params.append(pytest.param(case, id=f"{path.stem}-{number}-{case['id']}"))
    return params


CASES = _cases()


def _kwargs(case: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (case.get("kwargs") or {}).items() if v is not None}


@pytest.mark.parametrize("case", CASES)
def test_each_instruction_is_built_and_checked_as_open_instructs(case: dict[str, Any]) -> None:
    build = INSTRUCTIONS[case["id"]]
    if case["build"] == "random":
        with pytest.raises(DrawnAtRandom):
            build(**_kwargs(case))
        return
    if case["build"].startswith("raises"):
        with pytest.raises(Exception) as raised:
            build(**_kwargs(case))
        assert not isinstance(raised.value, DrawnAtRandom), "open-instruct raised, not drew"
        return
    check = build(**_kwargs(case))
    if isinstance(case["follows"], str):  # "raises: …"
        with pytest.raises(Exception):  # noqa: B017  (open-instruct raised; its type may differ)
            check(case["response"])
        return
    assert check(case["response"]) is case["follows"]


def test_every_instruction_id_of_open_instructs_registry_has_cases_both_ways() -> None:
    """54 ids, as open-instruct's ``INSTRUCTION_DICT``; each with a case it follows and one it
    does not, worked out there."""
    assert len(INSTRUCTIONS) == 54
    outcomes: dict[str, set[Any]] = {name: set() for name in INSTRUCTIONS}
    for param in CASES:
        case = param.values[0]
        outcomes[case["id"]].add(case["follows"])
    assert {name for name, seen in outcomes.items() if not {True, False} <= seen} == set()


VERIFIER_CASES = json.loads((Path(__file__).parent / "ifevalg_verifier_cases.json").read_text())


@pytest.mark.parametrize("case", VERIFIER_CASES, ids=[c["why"] for c in VERIFIER_CASES])
def test_the_ifeval_verifier_scores_as_open_instructs(case: dict[str, Any]) -> None:
    """``verify("ifeval", …)`` against open-instruct's own ``IFEvalVerifier`` (worked out with
    ``work_out.py --verifier``): partial credit, thinking and answer tags removed, the label's
    forms, and where it raises."""
    expected = case["open_instruct"]
    if isinstance(expected, str):
        with pytest.raises(Exception):  # noqa: B017  (open-instruct raised)
            verify("ifeval", case["prediction"], case["label"])
        return
    assert verify("ifeval", case["prediction"], case["label"]) == pytest.approx(expected)


def _label(ids: list[str], kwargs: list[Any]) -> str:
    return str([{"instruction_id": ids, "kwargs": kwargs}])


def test_a_check_open_instruct_raises_on_pays_zero_in_the_sandbox_and_is_counted() -> None:
    label = _label(["keywords:existence"], [{"keywords": ["(cat"]}])
    with VerifierSandbox() as sandbox:
        raised = sandbox.score("ifeval", "a (cat", label)
        followed = sandbox.score("ifeval", "A cat. A dog.", _label(["punctuation:no_comma"], [{}]))
    assert (raised.score, raised.status) == (0.0, "error")
    assert "error" in raised.detail  # re.error: the keyword is not a regular expression
    assert (followed.score, followed.status) == (1.0, "ok")
    assert raised.status in sandbox.counts


def _rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _row(label: Any, prompt: str = "Write about cats.") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}], "ground_truth": label,
            "dataset": "ifeval"}  # fmt: skip


def test_ifeval_rows_are_prepared_with_their_label_as_open_instruct_reads_it(
    tmp_path: Path,
) -> None:
    text = _label(["keywords:existence", "punctuation:no_comma"], [{"keywords": ["cat"]}, None])
    as_json = [{"instruction_id": ["change_case:english_lowercase"], "kwargs": [{}]}]
    data = _rows(tmp_path / "if.jsonl", [_row(text), _row(as_json, "Write about dogs.")])
    read = read_rlvr(data)
    assert [ex.verifiers for ex in read.examples] == [("ifeval",), ("ifeval",)]
    assert read.examples[0].labels == (text,)
    kept = read.examples[1].labels[0]  # a list in JSON data: kept as the text of that list
    assert verify("ifeval", "all lowercase here", kept) == 1.0
    assert verify("ifeval", "Not lowercase", kept) == 0.0


@pytest.mark.parametrize(
    ("label", "said"),
    [
        (_label(["keywords:existence"], [{"keywords": None}]),
         "ifeval: keywords:existence: argument 'keywords' is missing, and open-instruct would "
         "draw it at random"),
        (_label(["length_constraints:number_words"], [{"num_words": 50, "relation": "exactly"}]),
         "ifeval: length_constraints:number_words: relation must be one of"),
        (_label(["keywords:existence", "punctuation:no_comma"], [{"keywords": ["cat"]}]),
         "ifeval: 2 instruction ids but 1 kwargs: open-instruct would score the first 1 only"),
        (_label(["keywords:nonesuch"], [{}]), "ifeval: no ifeval instruction 'keywords:nonesuch'"),
        (_label(["punctuation:no_comma"], [{"letter": "a"}]), "ifeval: TypeError"),
        ("not a list", "ifeval: SyntaxError"),
        ('{"func_name": "validate_lowercase"}', "remap this dataset to ifeval_old"),
    ],
)  # fmt: skip
def test_an_ifeval_label_open_instruct_could_not_score_surely_is_refused_naming_the_row(
    tmp_path: Path, label: str, said: str
) -> None:
    data = _rows(tmp_path / "if.jsonl", [_row(_label(["punctuation:no_comma"], [{}])), _row(label)])
    with pytest.raises(DataValidationError) as err:
        read_rlvr(data)
    [issue] = err.value.issues
    assert (issue.file, issue.row, issue.field) == (str(data), 1, "ground_truth")  # 0-based
    assert said in issue.message, issue.message


def test_ifeval_rows_without_nltks_punkt_tables_are_refused_saying_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "no_nltk_data")])
    data = _rows(tmp_path / "if.jsonl", [_row(_label(["punctuation:no_comma"], [{}]))])
    with pytest.raises(
        DataError, match=r"1 row\(s\) are scored by ifeval.*judgeflow dev nltk-punkt"
    ):
        read_rlvr(data)
    gsm8k = {
        "messages": [{"role": "user", "content": "1+1?"}],
        "ground_truth": "2",
        "dataset": "gsm8k",
    }
    assert len(read_rlvr(_rows(tmp_path / "g.jsonl", [gsm8k])).examples) == 1  # others need none


def test_the_environment_has_nltks_english_punkt_tables_as_pinned() -> None:
    """The bootstrap put them in this environment (``judgeflow dev nltk-punkt``), each file
    with its pinned hash, where NLTK finds them: sentences are counted as open-instruct's are."""
    from judgeflow.rewards.rlvr.ifevalg.text import count_sentences, punkt_available

    assert punkt_installed(default_nltk_data())
    assert punkt_available()
    assert count_sentences("Dr. Smith arrived at 3 p.m. on Monday. He left.") == 2


@pytest.mark.slow
def test_nltk_punkt_installs_the_tables_from_the_package_index_whole(tmp_path: Path) -> None:
    folder = install_punkt(tmp_path / "nltk_data")
    assert sorted(p.name for p in folder.iterdir()) == sorted(PUNKT_FILES)
    assert punkt_installed(tmp_path / "nltk_data")
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no staging left


def test_the_linear_scans_find_what_ifevals_quadratic_regexes_find() -> None:
    """The placeholder, bullet, title and postscript checks scan in linear time where IFEvalG's
    regular expressions (quoted here) take quadratic time on a long run of "[", blank lines or
    "<"; on random text built from the characters those patterns turn on, the counts and
    answers are the regexes'."""
    import random
    import re

    from judgeflow.rewards.rlvr.ifevalg import original

    def bullets(text: str) -> int:
        return len(re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE)) + len(
            re.findall(r"^\s*-.*$", text, flags=re.MULTILINE)
        )

    def has_title(text: str) -> bool:
        return any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", text))

    postscripts = {
        "P.P.S": r"\s*p\.\s?p\.\s?s.*$",
        "P.S.": r"\s*p\.\s?s\..*$",
    }
    rng = random.Random(0)
    alphabet = "[]<>*- \n\t.pPsSa"
    for _ in range(4000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert original._placeholders(text) == len(re.findall(r"\[.*?\]", text)), text
        bullet_check = INSTRUCTIONS["detectable_format:number_bullet_lists"](
            num_bullets=bullets(text)
        )
        assert bullet_check(text), text
        assert original._has_title(text) == has_title(text), text
        for marker, pattern in postscripts.items():
            check = INSTRUCTIONS["detectable_content:postscript"](postscript_marker=marker)
            expected = bool(re.findall(pattern, text.lower(), flags=re.MULTILINE))
            assert check(text) == expected, (marker, text)


def test_an_ifevalg_label_remapped_to_ifeval_old_is_refused_saying_which_verifier_reads_it(
    tmp_path: Path,
) -> None:
    """The rlvr preset remaps `ifeval` to `ifeval_old` for Tulu 3's data; current data's
    `ifeval` rows under that remap are refused, saying so."""
    label = _label(["punctuation:no_comma"], [{}])
    data = _rows(tmp_path / "if.jsonl", [_row(label)])
    with pytest.raises(DataValidationError) as err:
        read_rlvr(data, remap_verifier={"ifeval": "ifeval_old"})
    [issue] = err.value.issues
    assert "IFEvalG's, which the ifeval verifier scores" in issue.message, issue.message
    assert read_rlvr(data).examples[0].verifiers == ("ifeval",)  # without the remap
