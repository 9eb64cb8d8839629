"""Small hand-written sample datasets shipped with judgeflow (for the tiny recipes and tests).

- `openjudge_pointwise.jsonl`: OpenJudge pointwise rows, helpfulness labels 0-4.
- `openjudge_pairwise.jsonl`: OpenJudge pairwise rows, preference A or B.
- `rewardbench2.jsonl`: raw RewardBench2-style rows (`id`, `prompt`, `chosen`, `rejected`,
  `subset`), including a few `Ties` rows that `prepare` filters out.
- `rlvr/open_instruct_mixed.jsonl`: policy RLVR rows in open-instruct's format (`messages`,
  `ground_truth`, `dataset`) for each verifier and one row with two; not under the tiny
  tokenizer's glob (`samples/*.jsonl`), so adding it changed no tiny model.
- `rlvr/tinyrlvr.jsonl`, `rlvr/tinyrlvr_val.jsonl`, `rlvr/tinyrlvr_sft.jsonl`: the tiny RLVR
  demo's task (training prompts, held-out prompts, a weak teacher's SFT replies), written by
  `judgeflow.dev.rlvr_demo_data`.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


_SUFFIXES = {".jsonl", ".json", ".parquet"}


def available() -> list[str]:
    """Names of the shipped sample files (a subfolder's as `rlvr/<file>`)."""
    return sorted(
        p.relative_to(_HERE).as_posix()
        for p in (*_HERE.iterdir(), *_HERE.glob("*/*"))
        if p.suffix in _SUFFIXES and p.is_file()
    )


def sample_path(name: str) -> Path:
    """The path of a shipped sample file, e.g. `sample_path("rewardbench2.jsonl")` or
    `sample_path("rlvr/tinyrlvr.jsonl")`."""
    if name not in available():
        raise FileNotFoundError(f"no sample named {name!r}; available: {', '.join(available())}")
    return _HERE / name
