"""GRRM data preparation: SFT and RL parquet content, augmentation, validation, reports.

Expected texts are written out by hand from docs/design/prompts.md, "GRRM" (prompt, target,
augmentation).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgeflow.data import (
    DataError,
    DataFileNotFoundError,
    DataValidationError,
    prepare_grrm_rl,
    prepare_grrm_sft,
)
from judgeflow.data.grrm_template import (
    UNUSUAL_WHITESPACE,
    clean_analysis,
    ranking_line,
    render_grrm_target,
    scores_line,
)
from judgeflow.data.prompt_hashes import grrm_prompt_hash
from judgeflow.rewards.grrm import compute_score

GROUP_1 = {
    "src_text": "Der Hund {bellt}.",
    "src_lang": "de",
    "trg_lang": "English",
    "mt_texts": ["The dog barks.", "The dog is barking.", "Dog bark."],
    "scores": [8, 8, 3],
    "analysis": (
        "  A is accurate.\nB is accurate too.\nC drops the article.\n\n"
        "Final scores: A 8, B 8, C 3  \n"
    ),
}
GROUP_2 = {
    "src_text": "你好",
    "src_lang": "zh",
    "trg_lang": "en",
    "mt_texts": ["Hi", "Hello"],
    "scores": [5, 9],
    "analysis": "B is best.\nA is fine.",
}

PROMPT_1 = """\
Given a source text in German and multiple translation candidates in English. Perform a step by step analysis and comparison of the translation quality for the candidates. Finally, rank and score the candidates with integer scores on a scale from 0 to 10.

Source text:
```
Der Hund {bellt}.
```

Translation A:
```
The dog barks.
```
Translation B:
```
The dog is barking.
```
Translation C:
```
Dog bark.
```
"""
# The last analysis line holds "score": dropped; the blank line before it stays (as the reference).
TARGET_1 = (
    "A is accurate.\nB is accurate too.\nC drops the article.\n"
    "\n\n### Final Ranking:\n\nA = B > C\n\n### Scores:\n\nA: 8, B: 8, C: 3\n"
)
PROMPT_2 = """\
Given a source text in Chinese and multiple translation candidates in English. Perform a step by step analysis and comparison of the translation quality for the candidates. Finally, rank and score the candidates with integer scores on a scale from 0 to 10.

Source text:
```
你好
```

Translation A:
```
Hi
```
Translation B:
```
Hello
```
"""
TARGET_2 = "B is best.\nA is fine.\n\n### Final Ranking:\n\nB > A\n\n### Scores:\n\nB: 9, A: 5\n"


def write_parquet(path: Path, rows: list[dict[str, Any]], schema: pa.Schema | None = None) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    path.write_text(text, encoding="utf-8")
    return path


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    return pq.read_table(str(path)).to_pylist()


def group(n: int, seed: int = 0) -> dict[str, Any]:
    """A valid group of n candidates with distinct texts."""
    return {
        "src_text": f"source {seed}",
        "src_lang": "en",
        "trg_lang": "de",
        "mt_texts": [f"candidate {seed}-{i}" for i in range(n)],
        "scores": [(seed + 3 * i) % 11 for i in range(n)],
        "analysis": f"analysis {seed}",
    }


# ---------------------------------------------------------------------------- SFT


def test_sft_rows_are_byte_exact(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", [GROUP_1, GROUP_2])
    result = prepare_grrm_sft(source, tmp_path / "out" / "sft.parquet")
    rows = read_rows(result.output_path)
    assert rows == [
        {
            "messages": [
                {"role": "user", "content": PROMPT_1},
                {"role": "assistant", "content": TARGET_1},
            ],
            "group_id": 0,
            "prompt_hash": grrm_prompt_hash("Der Hund {bellt}."),
        },
        {
            "messages": [
                {"role": "user", "content": PROMPT_2},
                {"role": "assistant", "content": TARGET_2},
            ],
            "group_id": 1,
            "prompt_hash": grrm_prompt_hash("你好"),
        },
    ]


def test_sft_same_from_jsonl_with_other_column_names(tmp_path: Path) -> None:
    renamed = [
        {"src": g["src_text"], "sl": g["src_lang"], "tl": g["trg_lang"], "mts": g["mt_texts"],
         "sc": g["scores"], "why": g["analysis"]}
        for g in (GROUP_1, GROUP_2)
    ]  # fmt: skip
    source = write_jsonl(tmp_path / "in.jsonl", renamed)
    result = prepare_grrm_sft(
        source, tmp_path / "sft.parquet", src_key="src", src_lang_key="sl", trg_lang_key="tl",
        mt_key="mts", score_key="sc", analysis_key="why",
    )  # fmt: skip
    contents = [[m["content"] for m in r["messages"]] for r in read_rows(result.output_path)]
    assert contents == [[PROMPT_1, TARGET_1], [PROMPT_2, TARGET_2]]


@pytest.mark.parametrize(
    ("analysis", "cleaned"),
    [
        ("Good.\nRanking: A > B", "Good."),
        ("Good.\nscoring done", "Good."),
        ("Good.\nOverall: fine", "Good.\nOverall: fine"),  # no verdict word: kept
        ("Scores are close.\nFinal.", "Scores are close.\nFinal."),  # only the last line counts
        ("Good.\r\nBad.", "Good.\nBad."),  # splitlines + "\n".join, as the reference
        ("\n\n  Good.\n\nSCORE A", "Good.\n\nSCORE A"),  # case-sensitive words
    ],
)
def test_sft_analysis_clean_up(tmp_path: Path, analysis: str, cleaned: str) -> None:
    source = write_parquet(tmp_path / "in.parquet", [{**GROUP_2, "analysis": analysis}])
    rows = read_rows(prepare_grrm_sft(source, tmp_path / "sft.parquet").output_path)
    assert rows[0]["messages"][1]["content"] == cleaned + TARGET_2.removeprefix(
        "B is best.\nA is fine."
    )


def test_sft_ties_and_tiers(tmp_path: Path) -> None:
    rows = [{**group(5), "scores": [4, 9, 4, 9, 0], "analysis": "x"}]
    source = write_parquet(tmp_path / "in.parquet", rows)
    target = read_rows(prepare_grrm_sft(source, tmp_path / "sft.parquet").output_path)[0]
    assert target["messages"][1]["content"] == (
        "x\n\n### Final Ranking:\n\nB = D > A = C > E\n\n### Scores:\n\nB: 9, D: 9, A: 4, C: 4, E: 0\n"
    )


def test_sft_target_scores_two_with_the_reward(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", [GROUP_1, GROUP_2])
    sft = read_rows(prepare_grrm_sft(source, tmp_path / "sft.parquet").output_path)
    rl = read_rows(prepare_grrm_rl(source, tmp_path / "rl.parquet").output_path)
    for s, r in zip(sft, rl, strict=True):
        truth = r["reward_model"]["ground_truth"]
        assert compute_score("grrm", s["messages"][1]["content"], truth)["score"] == 2.0


def test_integral_float_scores_are_integers(tmp_path: Path) -> None:
    schema = pa.schema([*(pa.field(k, pa.string()) for k in ("src_text", "src_lang", "trg_lang")),
                        pa.field("mt_texts", pa.list_(pa.string())),
                        pa.field("scores", pa.list_(pa.float64())),
                        pa.field("analysis", pa.string())])  # fmt: skip
    good = {**GROUP_2, "scores": [5.0, 9.0]}
    source = write_parquet(tmp_path / "in.parquet", [good], schema)
    rows = read_rows(prepare_grrm_sft(source, tmp_path / "sft.parquet").output_path)
    assert rows[0]["messages"][1]["content"] == TARGET_2
    rl = read_rows(prepare_grrm_rl(source, tmp_path / "rl.parquet").output_path)
    assert rl[0]["reward_model"]["ground_truth"] == '{"A": 5, "B": 9}'

    bad = write_parquet(tmp_path / "bad.parquet", [{**GROUP_2, "scores": [5.5, 9.0]}], schema)
    with pytest.raises(DataValidationError) as info:
        prepare_grrm_sft(bad, tmp_path / "sft2.parquet")
    assert (info.value.row, info.value.field) == (0, "scores[0]")
    assert "5.5" in info.value.message


# ---------------------------------------------------------------------------- RL


def test_rl_original_row_is_byte_exact(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", [GROUP_1, GROUP_2])
    result = prepare_grrm_rl(source, tmp_path / "rl.parquet", split="val", data_source="tb")
    assert read_rows(result.output_path) == [
        {
            "data_source": "tb",
            "prompt": [{"role": "user", "content": PROMPT_1}],
            "ability": "grrm/ranking",
            "reward_model": {"style": "rule", "ground_truth": '{"A": 8, "B": 8, "C": 3}'},
            "extra_info": {"split": "val", "index": 0, "group_id": 0,
                           "candidate_indices": [0, 1, 2], "augmentation": "original",
                           "src_lang": "de", "trg_lang": "English",
                           "prompt_hash": grrm_prompt_hash("Der Hund {bellt}.")},
        },
        {
            "data_source": "tb",
            "prompt": [{"role": "user", "content": PROMPT_2}],
            "ability": "grrm/ranking",
            "reward_model": {"style": "rule", "ground_truth": '{"A": 5, "B": 9}'},
            "extra_info": {"split": "val", "index": 1, "group_id": 1,
                           "candidate_indices": [0, 1], "augmentation": "original",
                           "src_lang": "zh", "trg_lang": "en",
                           "prompt_hash": grrm_prompt_hash("你好")},
        },
    ]  # fmt: skip


def test_rl_exhaustive_augmentation_of_three(tmp_path: Path) -> None:
    """n = 3 with K, M larger than possible: every row is determined, only the order is random."""
    source = write_parquet(tmp_path / "in.parquet", [GROUP_1])
    result = prepare_grrm_rl(
        source, tmp_path / "rl.parquet", subgroup_augment=10, shuffle_augment=10, seed=3
    )
    rows = read_rows(result.output_path)
    got = Counter(
        (r["extra_info"]["augmentation"], tuple(r["extra_info"]["candidate_indices"]),
         r["reward_model"]["ground_truth"])
        for r in rows
    )  # fmt: skip
    expected = Counter(
        [
            ("original", (0, 1, 2), '{"A": 8, "B": 8, "C": 3}'),
            ("shuffle", (0, 2, 1), '{"A": 8, "B": 3, "C": 8}'),
            ("shuffle", (1, 0, 2), '{"A": 8, "B": 8, "C": 3}'),
            ("shuffle", (1, 2, 0), '{"A": 8, "B": 3, "C": 8}'),
            ("shuffle", (2, 0, 1), '{"A": 3, "B": 8, "C": 8}'),
            ("shuffle", (2, 1, 0), '{"A": 3, "B": 8, "C": 8}'),
            ("subgroup", (0, 1), '{"A": 8, "B": 8}'),
            ("subgroup-shuffle", (1, 0), '{"A": 8, "B": 8}'),
            ("subgroup", (0, 2), '{"A": 8, "B": 3}'),
            ("subgroup-shuffle", (2, 0), '{"A": 3, "B": 8}'),
            ("subgroup", (1, 2), '{"A": 8, "B": 3}'),
            ("subgroup-shuffle", (2, 1), '{"A": 3, "B": 8}'),
        ]
    )
    assert got == expected
    assert rows[0]["extra_info"]["augmentation"] == "original"
    assert [r["extra_info"]["index"] for r in rows] == list(range(12))
    assert result.report["augmentation"] == {
        "original": 1, "shuffle": 5, "subgroup": 3, "subgroup-shuffle": 3,
    }  # fmt: skip
    # A subgroup keeps the original relative order and is relabelled from A (hand-written).
    row = next(r for r in rows if r["extra_info"]["candidate_indices"] == [2, 0])
    assert row["prompt"][0]["content"] == PROMPT_1.split("Translation A:")[0] + (
        "Translation A:\n```\nDog bark.\n```\nTranslation B:\n```\nThe dog barks.\n```\n"
    )


def test_rl_augmentation_counts_for_every_size(tmp_path: Path) -> None:
    k, m = 4, 4
    rows_in = [group(n, seed=n) for n in range(2, 9)]
    source = write_parquet(tmp_path / "in.parquet", rows_in)
    result = prepare_grrm_rl(
        source, tmp_path / "rl.parquet", subgroup_augment=m, shuffle_augment=k, seed=7
    )
    rows = read_rows(result.output_path)
    by_group: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_group[r["extra_info"]["group_id"]].append(r["extra_info"])
    expected_total = 0
    for gid, infos in by_group.items():
        n = len(rows_in[gid]["mt_texts"])
        assert infos[0]["augmentation"] == "original"
        assert infos[0]["candidate_indices"] == list(range(n))
        shuffles = [tuple(i["candidate_indices"]) for i in infos if i["augmentation"] == "shuffle"]
        assert len(shuffles) == min(k, math.factorial(n) - 1)
        assert len(set(shuffles)) == len(shuffles) and tuple(range(n)) not in shuffles
        assert all(sorted(s) == list(range(n)) for s in shuffles)
        subgroups = [
            tuple(i["candidate_indices"]) for i in infos if i["augmentation"] == "subgroup"
        ]
        proper = 2**n - n - 2 if n > 2 else 0
        assert len(subgroups) == min(m, proper)
        assert len(set(subgroups)) == len(subgroups)
        assert all(2 <= len(s) < n and list(s) == sorted(s) for s in subgroups)
        # Each subgroup is followed by its own shuffles: min(K, s! - 1) distinct orders.
        expected = 1 + min(k, math.factorial(n) - 1)
        current: tuple[int, ...] | None = None
        seen: dict[tuple[int, ...], list[tuple[int, ...]]] = defaultdict(list)
        for info in infos:
            order = tuple(info["candidate_indices"])
            if info["augmentation"] == "subgroup":
                current = order
            elif info["augmentation"] == "subgroup-shuffle":
                assert current is not None and sorted(order) == list(current)
                seen[current].append(order)
        for subset in subgroups:
            orders = seen[subset]
            assert len(orders) == len(set(orders)) == min(k, math.factorial(len(subset)) - 1)
            assert subset not in orders
            expected += 1 + len(orders)
        assert len(infos) == expected
        expected_total += expected
    assert len(rows) == expected_total == result.report["counts"]["rows_written"]
    kinds = Counter(r["extra_info"]["augmentation"] for r in rows)
    assert result.report["augmentation"] == {
        kind: kinds[kind] for kind in ("original", "shuffle", "subgroup", "subgroup-shuffle")
    }


def test_rl_rows_trace_back_to_their_candidates(tmp_path: Path) -> None:
    rows_in = [group(n, seed=n) for n in (3, 5, 8)]
    source = write_parquet(tmp_path / "in.parquet", rows_in)
    rows = read_rows(
        prepare_grrm_rl(
            source, tmp_path / "rl.parquet", subgroup_augment=3, shuffle_augment=3, seed=1
        ).output_path
    )
    for r in rows:
        g = rows_in[r["extra_info"]["group_id"]]
        idx = r["extra_info"]["candidate_indices"]
        labels = "ABCDEFGH"[: len(idx)]
        truth = json.loads(r["reward_model"]["ground_truth"])
        assert truth == {label: g["scores"][i] for label, i in zip(labels, idx, strict=True)}
        blocks = "".join(
            f"Translation {label}:\n```\n{g['mt_texts'][i]}\n```\n"
            for label, i in zip(labels, idx, strict=True)
        )
        assert r["prompt"][0]["content"].endswith("```\n\n" + blocks)


def test_rl_perfect_answer_scores_two(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", [GROUP_1, GROUP_2, group(6, seed=2)])
    rows = read_rows(
        prepare_grrm_rl(
            source, tmp_path / "rl.parquet", subgroup_augment=2, shuffle_augment=2
        ).output_path
    )
    for r in rows:
        truth = json.loads(r["reward_model"]["ground_truth"])
        scores = list(truth.values())
        answer = (
            f"Some analysis.\n\n### Final Ranking:\n\n{ranking_line(scores)}"
            f"\n\n### Scores:\n\n{scores_line(scores)}\n"
        )
        result = compute_score(r["data_source"], answer, r["reward_model"]["ground_truth"])
        assert result["score"] == 2.0 and result["valid_answer"] == 1


def test_rl_is_reproducible_and_seeded(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", [group(n, seed=n) for n in range(2, 9)] * 3)

    def run(name: str, **kwargs: Any) -> pa.Table:
        return pq.read_table(
            prepare_grrm_rl(
                source, tmp_path / name, subgroup_augment=4, shuffle_augment=4, **kwargs
            ).output_path
        )

    first, again = run("a.parquet", seed=5), run("b.parquet", seed=5)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    # Batch boundaries do not change the rows (one generator per group).
    assert run("c.parquet", seed=5, batch_size=2).equals(first)
    assert pq.ParquetFile(tmp_path / "c.parquet").num_row_groups == 11  # streamed: 21 groups / 2
    other = run("d.parquet", seed=6)
    assert other.column("extra_info").to_pylist() != again.column("extra_info").to_pylist()


def test_rl_without_augmentation_is_one_row_per_group(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", [group(n, seed=n) for n in range(2, 9)])
    result = prepare_grrm_rl(source, tmp_path / "rl.parquet")
    assert result.report["counts"]["rows_written"] == 7
    assert result.report["augmentation"] == {
        "original": 7, "shuffle": 0, "subgroup": 0, "subgroup-shuffle": 0,
    }  # fmt: skip


# ---------------------------------------------------------------------------- validation

INVALID = [
    ({"mt_texts": ["a", "b", "c"], "scores": [1, 2]}, "length_mismatch", "scores"),
    ({"mt_texts": ["only"], "scores": [1]}, "candidate_count", "mt_texts"),
    ({"mt_texts": [f"t{i}" for i in range(9)], "scores": [1] * 9}, "candidate_count", "mt_texts"),
    ({"scores": [5, 7.5]}, "score", "scores[1]"),
    ({"scores": [5, 11]}, "score", "scores[1]"),
    ({"src_lang": "xx"}, "language", "src_lang"),
    ({"trg_lang": "e"}, "language", "trg_lang"),
    ({"mt_texts": ["a", None], "scores": [1, 2]}, "missing", "mt_texts[1]"),
    ({"src_text": " \t"}, "text", "src_text"),
    ({"analysis": "Score: A 5, B 9"}, "analysis", "analysis"),
    ({"analysis": None}, "missing", "analysis"),
]


def invalid_rows() -> list[dict[str, Any]]:
    """Valid rows at 0, 2, 4, …; invalid ones (INVALID in order) at 1, 3, 5, …"""
    rows: list[dict[str, Any]] = []
    for i, (change, _, _) in enumerate(INVALID):
        rows += [group(2, seed=i), {**group(2, seed=i), **change}]
    return rows


def test_invalid_rows_are_all_listed_with_file_row_and_field(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", invalid_rows())
    out = tmp_path / "sft.parquet"
    out.write_bytes(b"previous")
    with pytest.raises(DataValidationError) as info:
        prepare_grrm_sft(source, out)
    err = info.value
    assert err.total == len(INVALID)
    assert [(i.file, i.row, i.field) for i in err.issues] == [
        (str(source), 2 * k + 1, field) for k, (_, _, field) in enumerate(INVALID)
    ]
    assert "row 1, field 'scores'" in str(err) and "has 2 scores for 3 candidates" in str(err)
    assert "unknown language code 'xx'" in str(err)
    assert out.read_bytes() == b"previous"  # nothing published
    assert not list(tmp_path.glob(".sft.parquet.*"))  # no temporary file left


def test_skip_invalid_counts_and_lists_drops(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", invalid_rows())
    result = prepare_grrm_sft(source, tmp_path / "sft.parquet", skip_invalid=True)
    rows = read_rows(result.output_path)
    assert [r["group_id"] for r in rows] == list(range(0, 2 * len(INVALID), 2))
    report = json.loads(Path(result.report_path).read_text())
    assert report == result.report
    assert report["counts"] == {
        "rows_read": 2 * len(INVALID), "rows_used": len(INVALID),
        "rows_dropped": len(INVALID), "rows_written": len(INVALID),
    }  # fmt: skip
    expected = Counter(reason for _, reason, _ in INVALID)
    assert report["dropped"]["by_reason"] == {
        reason: expected[reason]
        for reason in ("json", "missing", "text", "language", "candidate_count",
                       "length_mismatch", "score", "analysis")
    }  # fmt: skip
    assert [(d["row"], d["reason"], d["field"]) for d in report["dropped"]["listed"]] == [
        (2 * k + 1, reason, field) for k, (_, reason, field) in enumerate(INVALID)
    ]
    digest = hashlib.sha256(Path(result.output_path).read_bytes()).hexdigest()
    assert report["output"] == {"path": result.output_path, "rows": len(INVALID), "sha256": digest}
    assert report["candidates"]["2"] == len(INVALID) and report["language_pairs"] == {
        "en-de": len(INVALID)
    }
    assert report["kind"] == "grrm-sft" and report["augmentation"] is None


#: Analyses where Python's strip/splitlines and a plain "\n" split could disagree: parquet
#: batches clean them in Arrow (or fall back), JSONL with `clean_analysis`; results must match.
TRICKY_ANALYSES = [
    "Good.\u2028Score: 5",  # a Unicode line separator ends the verdict line's predecessor
    "\xa0Good.\nscore\xa0",  # no-break spaces are stripped by Python
    "Good.\r\nRanking A",
    "Good.\x1cScores",  # a file separator is a line break for splitlines
    "\u3000\u3000",  # only (ideographic) whitespace: blank
    "\xa0\nScore: A 1",  # blank once the verdict line goes
    "ok\n\n  \nScoring",
    "only Score",  # the whole analysis is the verdict line: blank
    "Good.\n Final ranking: B",
    "\ttab\tScore\t",
    "Scores in the middle\nthen the end",
    "Good.\n\n",
    "line\x0bverdict ranking",  # a vertical tab breaks lines too
    "Über gut.\nScoré",  # not a verdict word
    "x\nscoring\ny\nRanking",
    "Good.\u0085ranking",  # NEL
    "Good. Score\u00a0\n",
    "  \n\t ",
]


def test_unusual_whitespace_is_every_other_python_whitespace() -> None:
    """The Arrow clean-up handles " \t\n" only; every other character that Python's strip or
    splitlines treats specially must be in UNUSUAL_WHITESPACE (so such texts fall back)."""
    special = {chr(c) for c in range(0x110000) if chr(c).isspace()} - set(" \t\n")
    breaks = {c for c in map(chr, range(0x110000)) if len(f"a{c}b".splitlines()) > 1}
    assert set(UNUSUAL_WHITESPACE) == special
    assert breaks - {"\n"} <= special


def test_analysis_columns_of_other_arrow_types(tmp_path: Path) -> None:
    """Large and dictionary-encoded strings are texts; a number column is not (every row fails)."""
    texts = ["B is best.\nA is fine.\nScore: B 9", "Good.\u2028Ranking"]
    base = {k: [GROUP_2[k]] * 2 for k in ("src_text", "src_lang", "trg_lang", "mt_texts", "scores")}
    expected = ["B is best.\nA is fine.", "Good."]
    for column in (pa.array(texts, pa.large_string()), pa.array(texts).dictionary_encode()):
        source = tmp_path / "in.parquet"
        pq.write_table(pa.table({**base, "analysis": column}), source)
        rows = read_rows(prepare_grrm_sft(source, tmp_path / "sft.parquet").output_path)
        assert [r["messages"][1]["content"] for r in rows] == [
            e + TARGET_2.removeprefix("B is best.\nA is fine.") for e in expected
        ]
    pq.write_table(pa.table({**base, "analysis": pa.array([1, 2])}), source)
    with pytest.raises(DataValidationError) as info:
        prepare_grrm_sft(source, tmp_path / "sft.parquet")
    assert [(i.row, i.field, i.message) for i in info.value.issues] == [
        (0, "analysis", "must be a string"), (1, "analysis", "must be a string"),
    ]  # fmt: skip


def test_sft_targets_match_the_one_row_renderer(tmp_path: Path) -> None:
    """Batches render the ranking and scores lines in Arrow: every target must equal
    `render_grrm_target` (ties, tiers, any size, negative and huge scores without a range)."""
    rng = random.Random(7)
    rows = []
    for i in range(3000):  # batches of 256: the first ones small ranges, then huge ones too
        n = rng.randint(2, 8)
        pools = [(0, 2), (0, 10), (-3, 3)] + ([(-(2**62), 2**62)] if i >= 1536 else [])
        pool = rng.choice(pools)
        rows.append({**group(n, seed=i), "scores": [rng.randint(*pool) for _ in range(n)]})
    rows.append({**group(3), "scores": [-(2**63), 2**63 - 1, -(2**63)]})
    source = write_parquet(tmp_path / "in.parquet", rows)
    result = prepare_grrm_sft(source, tmp_path / "sft.parquet", score_range=None, batch_size=256)
    targets = [r["messages"][1]["content"] for r in read_rows(result.output_path)]
    assert targets == [render_grrm_target(r["analysis"], r["scores"]) for r in rows]


def test_columnar_and_row_checks_agree(tmp_path: Path) -> None:
    """The parquet path checks columns in Arrow, JSONL row by row: same verdicts, same rows."""
    rows = [
        *invalid_rows(),
        {**group(3), "scores": [1, None, 2]},
        {**group(3), "scores": None},
        {**group(3), "mt_texts": None},
        {**group(3), "src_text": None},
        {**group(3), "src_lang": None},
        {**group(3), "src_lang": "  "},
        {**group(3), "scores": [-1, 2, 3]},
        {**group(3), "mt_texts": []},
        {**group(3), "analysis": "   \n "},
        {**group(3), "trg_lang": "Klingon"},
        *({**group(3, seed=k), "analysis": text} for k, text in enumerate(TRICKY_ANALYSES)),
    ]
    pq_result = prepare_grrm_sft(
        write_parquet(tmp_path / "in.parquet", rows), tmp_path / "a.parquet", skip_invalid=True
    )
    js_result = prepare_grrm_sft(
        write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "b.parquet", skip_invalid=True
    )
    strip = [
        {k: v for k, v in d.items() if k != "file"} for d in pq_result.report["dropped"]["listed"]
    ]
    assert strip == [
        {k: v for k, v in d.items() if k != "file"} for d in js_result.report["dropped"]["listed"]
    ]
    assert read_rows(pq_result.output_path) == read_rows(js_result.output_path)
    valid_tricky = sum(bool(clean_analysis(text).strip()) for text in TRICKY_ANALYSES)
    assert 0 < valid_tricky < len(TRICKY_ANALYSES)  # both kinds are in the test
    assert pq_result.report["counts"]["rows_written"] == len(INVALID) + 1 + valid_tricky


def test_jsonl_rows_are_line_numbers_and_bad_values_are_reported(tmp_path: Path) -> None:
    lines = [
        group(2),
        "",  # blank: skipped, still counted as a line
        {**group(2), "scores": [True, 3]},
        "{not json",
        {**group(2), "scores": ["7", 3]},
        [1, 2],
    ]
    source = write_jsonl(tmp_path / "in.jsonl", lines)
    with pytest.raises(DataValidationError) as info:
        prepare_grrm_rl(source, tmp_path / "rl.parquet")
    assert [(i.row, i.field) for i in info.value.issues] == [
        (2, "scores[0]"), (3, None), (4, "scores[0]"), (5, None),
    ]  # fmt: skip
    assert "True" in str(info.value) and "not valid JSON" in str(info.value)


def test_missing_column_file_and_bad_output_name(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", [GROUP_2])
    with pytest.raises(DataError, match=r"missing column\(s\) \['translations'\]"):
        prepare_grrm_rl(source, tmp_path / "rl.parquet", mt_key="translations")
    with pytest.raises(DataFileNotFoundError):
        prepare_grrm_sft(tmp_path / "nope.parquet", tmp_path / "sft.parquet")
    with pytest.raises(DataError, match=r"\.parquet"):
        prepare_grrm_sft(source, tmp_path / "sft.json")
    with pytest.raises(DataError, match="shuffle_augment"):
        prepare_grrm_rl(source, tmp_path / "rl.parquet", shuffle_augment=-1)


def test_nothing_left_is_an_error(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", [{**GROUP_2, "src_lang": "xx"}])
    with pytest.raises(DataError, match="no groups left"):
        prepare_grrm_sft(source, tmp_path / "sft.parquet", skip_invalid=True)
    assert not (tmp_path / "sft.parquet").exists()


def test_rl_report(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "in.parquet", [GROUP_1, GROUP_2])
    result = prepare_grrm_rl(
        source, tmp_path / "rl.parquet", subgroup_augment=1, shuffle_augment=1, seed=2
    )
    report = json.loads((tmp_path / "rl.report.json").read_text())
    assert report["kind"] == "grrm-rl"
    assert report["parameters"] == {
        "src_key": "src_text", "src_lang_key": "src_lang", "trg_lang_key": "trg_lang",
        "mt_key": "mt_texts", "score_key": "scores", "subgroup_augment": 1,
        "shuffle_augment": 1, "seed": 2, "split": "train",
        "data_source": "TowerBlocks-MT-Ranking.ranking_score", "skip_invalid": False,
        "score_range": [0, 10], "input_format": "auto",
    }  # fmt: skip
    # group 1 (n=3): 1 + 1 shuffle + 1 subgroup (+1 shuffle); group 2 (n=2): 1 + 1 shuffle
    assert report["augmentation"] == {
        "original": 2, "shuffle": 2, "subgroup": 1, "subgroup-shuffle": 1,
    }  # fmt: skip
    assert report["counts"]["rows_written"] == 6 == len(read_rows(result.output_path))
    assert report["language_pairs"] == {"de-English": 1, "zh-en": 1}


def test_permutation_helpers_cover_all_orders() -> None:
    """`augmentation_plan` with K >= n! - 1 yields every non-identity order exactly once."""
    import random

    from judgeflow.data import augmentation_plan

    for n in (2, 3, 4):
        plan = augmentation_plan(n, 0, 10**6, random.Random(0))
        orders = [idx for kind, idx in plan if kind == "shuffle"]
        assert sorted(orders) == sorted(itertools.permutations(range(n)))[1:]


def test_a_failure_mid_write_publishes_nothing(tmp_path: Path) -> None:
    """Tables are encoded in a background thread while the next batch renders: a failure on
    either side surfaces in the caller, and the previous file stays as it was."""
    from judgeflow.data.grrm import SFT_SCHEMA
    from judgeflow.data.grrm.write import _write_tables

    out = tmp_path / "sft.parquet"
    out.write_bytes(b"previous")
    table = pa.Table.from_pylist(
        [{"messages": [{"role": "user", "content": "x"}], "group_id": 0}], schema=SFT_SCHEMA
    )

    def source_fails_after_a_write() -> Any:
        yield table
        yield table
        raise OSError("input went away")

    with pytest.raises(OSError, match="input went away"):
        _write_tables(str(out), SFT_SCHEMA, source_fails_after_a_write(), lambda: None)
    wrong = pa.table({"other": [1]})
    with pytest.raises(ValueError, match="schema"):  # raised by the background write
        _write_tables(str(out), SFT_SCHEMA, [table, wrong, table], lambda: None)
    assert out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sft.parquet"]


def test_long_texts_are_written_plain_and_short_strings_with_a_dictionary(tmp_path: Path) -> None:
    """Prompt/target contents and ground truths are unique per row: no dictionary (a failed try
    costs time) and no min/max statistics; roles, sources and languages are dictionary-encoded.
    Guards the column paths given to the writer (a wrong path would be silently ignored)."""
    source = write_parquet(tmp_path / "in.parquet", [GROUP_1, GROUP_2])
    outputs = {
        "sft": prepare_grrm_sft(source, tmp_path / "sft.parquet").output_path,
        "rl": prepare_grrm_rl(source, tmp_path / "rl.parquet").output_path,
    }
    long_texts = {"messages.list.element.content", "prompt.list.element.content",
                  "reward_model.ground_truth"}  # fmt: skip
    short_strings = {"messages.list.element.role", "prompt.list.element.role", "data_source",
                     "ability", "reward_model.style", "extra_info.split",
                     "extra_info.augmentation", "extra_info.src_lang", "extra_info.trg_lang",
                     "prompt_hash", "extra_info.prompt_hash"}  # fmt: skip
    seen = set()
    for path in outputs.values():
        group0 = pq.ParquetFile(path).metadata.row_group(0)
        for i in range(group0.num_columns):
            column = group0.column(i)
            name = column.path_in_schema
            seen.add(name)
            dictionary = "RLE_DICTIONARY" in column.encodings
            if name in long_texts:
                assert not dictionary and not column.is_stats_set, name
            else:
                assert column.is_stats_set, name
                assert dictionary == (name in short_strings), name
    assert long_texts | short_strings <= seen


# ---------------------------------------------------------------------------- prompt hashes


def test_every_augmented_row_carries_its_groups_prompt_hash(tmp_path: Path) -> None:
    groups = [group(5, seed=1), group(3, seed=2), group(2, seed=3)]
    source = write_parquet(tmp_path / "in.parquet", groups)
    result = prepare_grrm_rl(
        source, tmp_path / "rl.parquet", subgroup_augment=3, shuffle_augment=2, seed=4
    )
    rows = read_rows(result.output_path)
    by_group: dict[int, set[str]] = defaultdict(set)
    for row in rows:
        by_group[row["extra_info"]["group_id"]].add(row["extra_info"]["prompt_hash"])
    assert by_group == {i: {grrm_prompt_hash(g["src_text"])} for i, g in enumerate(groups)}
    assert len(rows) > 3 * len(groups)  # augmented: several rows share each hash
    sft = read_rows(prepare_grrm_sft(source, tmp_path / "sft.parquet").output_path)
    assert [r["prompt_hash"] for r in sft] == [grrm_prompt_hash(g["src_text"]) for g in groups]


def test_the_batch_hasher_is_grrm_prompt_hash() -> None:
    from judgeflow.data.prompt_hashes import grrm_prompt_hashes

    texts = [
        "Der Hund {bellt}.", "  der HUND\t{bellt}. ", "Plain ASCII, Mixed Case.", "two  spaces",
        " lead", "trail ", "line\nbreak", "x\x1cy", "x\x0by", "\x7fcontrol\x00", "", " ",
        "ﬁne", "你好", "a\u2003b", "A\u00a0B", "\u00a8x", "Straße", "ÅNGSTRÖM",
    ]  # fmt: skip
    hashes = grrm_prompt_hashes(pa.array(texts, pa.string()))
    assert hashes == [grrm_prompt_hash(t) for t in texts]
    assert hashes[0] == hashes[1] and hashes[10] == hashes[11]
    rng = random.Random(5)  # and random texts over every kind of character the fast path skips
    alphabet = "aZ .,{" + "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x00" + UNUSUAL_WHITESPACE + "ﬁ¨ßÄ你"
    texts = ["".join(rng.choices(alphabet, k=rng.randint(0, 12))) for _ in range(3000)]
    texts += ["".join(rng.choices("aZ .", k=rng.randint(0, 12))) for _ in range(3000)]
    assert grrm_prompt_hashes(pa.array(texts)) == [grrm_prompt_hash(t) for t in texts]


def test_report_counts_duplicated_groups_not_their_augmented_rows(tmp_path: Path) -> None:
    planted = {**group(4, seed=9), "src_text": "  SOURCE 1\n"}  # group(…, seed=1)'s, re-spaced
    rows_in = [group(3, seed=0), group(4, seed=1), group(2, seed=2), planted]
    source = write_parquet(tmp_path / "in.parquet", rows_in)
    for kind, result in (
        ("rl", prepare_grrm_rl(source, tmp_path / "rl.parquet", shuffle_augment=3, split="val")),
        ("sft", prepare_grrm_sft(source, tmp_path / "sft.parquet")),
    ):
        split = "val" if kind == "rl" else "train"
        assert result.report["duplicates"] == {
            "listed_limit": 10,
            "within": {
                split: {
                    "unit": "group",
                    "units": 4,
                    "count": 2,
                    "prompts": 1,
                    "listed": [
                        {
                            "prompt_hash": grrm_prompt_hash("source 1"),
                            "n": 2,
                            "occurrences": [
                                {"file": str(source), "row": 1},
                                {"file": str(source), "row": 3},
                            ],
                        }
                    ],
                }
            },
            "across": {},
        }, kind


def test_prompt_units_read_back_one_per_group(tmp_path: Path) -> None:
    from judgeflow.data.grrm import grrm_prompt_units

    groups = [group(4, seed=1), group(3, seed=2)]
    source = write_parquet(tmp_path / "in.parquet", groups)
    rl = prepare_grrm_rl(source, tmp_path / "rl.parquet", subgroup_augment=2, shuffle_augment=2)
    sft = prepare_grrm_sft(source, tmp_path / "sft.parquet")
    for path in (rl.output_path, sft.output_path):
        units = grrm_prompt_units(path, str(source))
        assert list(units.hashes) == [grrm_prompt_hash(g["src_text"]) for g in groups]
        assert units.locate(1) == {"file": str(source), "row": 1}
