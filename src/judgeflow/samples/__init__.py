"""Small hand-written sample datasets shipped with judgeflow (for the tiny recipes and tests).

- `openjudge_pointwise.jsonl`: OpenJudge pointwise rows, helpfulness labels 0-4.
- `openjudge_pairwise.jsonl`: OpenJudge pairwise rows, preference A or B.
- `rewardbench2.jsonl`: raw RewardBench2-style rows (`id`, `prompt`, `chosen`, `rejected`,
  `subset`), including a few `Ties` rows that `prepare` filters out.
- `rlvr/open_instruct_mixed.jsonl`: policy RLVR rows in open-instruct's format (`messages`,
  `ground_truth`, `dataset`) for each verifier and one row with two; not under the tiny
  tokenizer's glob (`samples/*.jsonl`), so adding it changed no tiny model.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    """Names of the shipped sample files."""
    return sorted(p.name for p in _HERE.iterdir() if p.suffix in {".jsonl", ".json", ".parquet"})


def sample_path(name: str) -> Path:
    """The path of a shipped sample file, e.g. `sample_path("rewardbench2.jsonl")`."""
    path = _HERE / name
    if path.name != name or not path.is_file():
        raise FileNotFoundError(f"no sample named {name!r}; available: {', '.join(available())}")
    return path
