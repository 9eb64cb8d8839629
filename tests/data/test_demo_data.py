"""The tiny demo's sample data is what `judgeflow.dev.demo_data` writes, and has the shape the
demo relies on and the demo page (docs/getting-started/demo.md) describes: disjoint SFT, RL and
validation questions, a weak teacher, balanced labels, and validation non-answers phrased as no
training row is."""

from __future__ import annotations

import json
from pathlib import Path

from judgeflow.config import load_config
from judgeflow.dev.demo_data import (
    N_SFT_QUESTIONS,
    N_VAL_QUESTIONS,
    SEEN_NON_ANSWERS,
    TEACHER_COMMITS,
    TEACHER_PICKS_B,
    UNSEEN_NON_ANSWERS,
    demo_rows,
    write_demo_data,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "src" / "judgeflow" / "samples"


def test_shipped_samples_are_exactly_the_generators_output(tmp_path: Path) -> None:
    for path in write_demo_data(tmp_path):
        shipped = SAMPLES / path.relative_to(tmp_path)
        assert shipped.read_bytes() == path.read_bytes(), (
            f"{shipped}: run `judgeflow dev demo-data`"
        )


def _query(row: dict) -> str:
    if "input" in row:
        return row["input"][0]["content"]
    return row["messages"][0]["content"].split("# Query\n", 1)[1].split("\n# Response", 1)[0]


def _responses(row: dict) -> list[str]:
    if "output" in row:
        return [o["answer"]["content"] for o in row["output"]]
    content = row["messages"][0]["content"]
    if "# Response A\n" in content:
        a = content.split("# Response A\n", 1)[1].split("\n# Response B\n", 1)
        return [a[0], a[1].split("\n# Output Format", 1)[0]]
    return [content.split("# Response\n", 1)[1].split("\n# Output Format", 1)[0]]


def test_sft_rl_and_validation_questions_are_disjoint_and_the_teacher_is_weak() -> None:
    rows = demo_rows()
    for mode in ("pointwise", "pairwise"):
        rl = {_query(r) for r in rows[mode]}
        sft = {_query(r) for r in rows[f"{mode}_sft"]}
        val = {_query(r) for r in rows[f"{mode}_val"]}
        assert rl and sft and val and not rl & sft and not val & (rl | sft)
        assert (len(sft), len(val)) == (N_SFT_QUESTIONS, N_VAL_QUESTIONS)
    rl_labels = [r["output"][0]["answer"]["label"]["helpfulness"] for r in rows["pointwise"]]
    assert sorted(set(rl_labels)) == [0, 4] and rl_labels.count(4) == rl_labels.count(0)
    prefs = [r["output"][0]["answer"]["label"]["preference"] for r in rows["pairwise"]]
    assert prefs.count("A") == prefs.count("B")  # balanced even without --balance-positions
    # The teacher mostly hedges (3 / 1) and favours A: there is something left for GRPO.
    said = [r["messages"][-1]["content"] for r in rows["pointwise_sft"]]
    hedged = sum("<score>3</score>" in s or "<score>1</score>" in s for s in said)
    assert hedged / len(said) > 0.5
    picks_a = sum(
        "<better>A</better>" in r["messages"][-1]["content"] for r in rows["pairwise_sft"]
    )
    assert picks_a / len(rows["pairwise_sft"]) > 0.5 + (0.5 - TEACHER_PICKS_B) / 2


def test_grrm_tiny_rows_are_valid_grrm_groups() -> None:
    for split in ("train", "test"):
        for line in (SAMPLES / "grrm_tiny" / f"{split}.jsonl").read_text().splitlines():
            row = json.loads(line)
            assert len(row["mt_texts"]) == len(row["scores"]) == 2
            assert row["analysis"].startswith(("A ", "B "))


def test_unseen_non_answers_are_only_in_validation_and_reported_as_their_own_subset() -> None:
    rows = demo_rows()
    first_words = {text.split()[0].strip(",.") for text in SEEN_NON_ANSWERS}
    assert not first_words & {text.split()[0].strip(",.") for text in UNSEEN_NON_ANSWERS}
    for mode in ("pointwise", "pairwise"):
        trained = {t for name in (mode, f"{mode}_sft") for r in rows[name] for t in _responses(r)}
        assert not trained & set(UNSEEN_NON_ANSWERS)
        assert set(SEEN_NON_ANSWERS) <= trained
        val = rows[f"{mode}_val"]
        by_subset: dict[str, set[str]] = {}
        for row in val:
            by_subset.setdefault(row["source"], set()).update(_responses(row))
        assert by_subset["tinyjudge/unseen-non-answer"] & set(UNSEEN_NON_ANSWERS)
        assert not by_subset["tinyjudge/seen-non-answer"] & set(UNSEEN_NON_ANSWERS)
        # a third of the validation rows (pointwise) or pairs (pairwise) is unseen
        unseen = [r for r in val if r["source"] == "tinyjudge/unseen-non-answer"]
        assert len(unseen) * 3 == len(val)


def test_the_demo_page_describes_the_data_as_generated() -> None:
    rows = demo_rows()
    questions = {_query(r) for name in ("pointwise", "pointwise_sft", "pointwise_val")
                 for r in rows[name]}  # fmt: skip
    rl = {_query(r) for r in rows["pointwise"]}
    readme = (REPO / "docs/getting-started/demo.md").read_text(encoding="utf-8")
    for said in (
        f"{len(questions)} short questions",
        f"RL* (`tinyjudge_<mode>.jsonl`, {len(rl)} questions)",
        f"SFT* (`tinyjudge_<mode>_sft.jsonl`, {N_SFT_QUESTIONS} questions)",
        f"(`tinyjudge_<mode>_val.jsonl`, {N_VAL_QUESTIONS} questions",
        f"drawn from {len(SEEN_NON_ANSWERS)}\n  phrasings",
        f"one of {len(UNSEEN_NON_ANSWERS)} non-answers",
        f"only {TEACHER_PICKS_B:.0%} of the pairs",
        f"the right extreme only {TEACHER_COMMITS:.0%} of the time",
    ):
        assert said in readme, said


def test_the_docs_state_the_tiny_profiles_settings() -> None:
    """The settings the demo and GRRM pages quote are the tiny profiles'."""
    pages = ("docs/getting-started/demo.md", "docs/how-to/grrm.md")
    readme = " ".join(" ".join((REPO / p).read_text(encoding="utf-8") for p in pages).split())
    pointwise = load_config("grpo-pointwise", profile="tiny")
    pairwise = load_config("grpo-pairwise", profile="tiny")
    grrm = load_config("grrm-full", profile="tiny")
    for said in (
        f"trains {pointwise.grpo.max_steps} GRPO steps with TRL",
        f"{grrm.sft.num_train_epochs:g} SFT epochs, then {grrm.grpo.max_steps} gentle RLVR "
        f"steps at lr {grrm.grpo.learning_rate:.0e}".replace("e-0", "e-"),
        f"With {pairwise.sft.num_train_epochs:g} SFT epochs the SFT judge",
    ):
        assert said in readme, said
