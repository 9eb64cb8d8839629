"""Benchmark: judgeflow's streaming GRRM preparation against two baselines written without it.

    .venv/bin/python benchmarks/grrm_prepare.py            # 20,000 groups, SFT and RL (M=4, K=4)
    .venv/bin/python benchmarks/grrm_prepare.py --groups 5000 --only ours --repeat 1

Each measurement runs in its own subprocess, so peak RSS (VmHWM) belongs to that run alone;
the RSS after imports is reported too, to separate library size from working memory. The
baselines:

- `pandas`: the GRRM reference scripts' shape: read the whole file with pandas, loop with
  `iterrows`, build one dict per output row, then `pd.DataFrame(rows).to_parquet`.
- `pyarrow`: the plain approach a competent engineer would write without pandas: stream the
  input with `ParquetFile.iter_batches`, loop over each batch's columns (as Python lists)
  building the output columns, and write each batch to one `ParquetWriter`. Memory is bounded
  by a batch; the strings are built in Python, row by row, with the same code as `pandas`.

Both reuse judgeflow's `augmentation_plan` only so that all three make the same random choices,
and `grrm_prompt_hash` (once per group) because the prompt hash is a definition, not an
implementation; the outputs are then compared row by row.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = [
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "translation", "quality",
    "source", "meaning", "fluent", "accurate", "grammar", "word", "choice", "omission",
    "addition", "style", "tone", "register", "terminology", "named", "entity",
]  # fmt: skip


def _text(rng: random.Random, low: int, high: int) -> str:
    target = rng.randint(low, high)
    words: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def generate(path: Path, groups: int, seed: int = 0) -> None:
    """A TowerBlocks-MT-Ranking-shaped parquet: 2-8 candidates, analyses of a few hundred chars."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    writer = None
    chunk = 1000
    for start in range(0, groups, chunk):
        rows = []
        for _ in range(min(chunk, groups - start)):
            n = rng.randint(2, 8)
            src, trg = rng.sample(["en", "de", "zh", "ru", "ja", "fr", "es"], 2)
            lines = [f"Translation {chr(65 + i)}: {_text(rng, 40, 90)}" for i in range(n)]
            if rng.random() < 0.7:
                lines.append(
                    "Final scores: " + ", ".join(str(rng.randint(0, 10)) for _ in range(n))
                )
            rows.append(
                {
                    "src_text": _text(rng, 60, 300),
                    "src_lang": src,
                    "trg_lang": trg,
                    "mt_texts": [_text(rng, 60, 300) for _ in range(n)],
                    "scores": [rng.randint(0, 10) for _ in range(n)],
                    "analysis": "\n".join(lines),
                }
            )
        table = pa.Table.from_pylist(rows)
        if writer is None:
            writer = pq.ParquetWriter(str(path), table.schema)
        writer.write_table(table)
    assert writer is not None
    writer.close()


# --------------------------------------------------------------------------- baselines

IMPLS = ("ours", "pandas", "pyarrow")

BASE_LANGS = {
    "en": "English", "zh": "Chinese", "de": "German", "ru": "Russian", "ko": "Korean",
    "ja": "Japanese", "fr": "French", "es": "Spanish", "pt": "Portuguese", "it": "Italian",
    "nl": "Dutch", "th": "Thai", "ro": "Romanian", "ar": "Arabic", "el": "Greek",
    "vi": "Vietnamese", "uk": "Ukrainian",
}  # fmt: skip
LETTERS = "ABCDEFGH"


def _base_prompt(src_lang: str, trg_lang: str, src: str, mts: list[str]) -> str:
    blocks = "".join(f"Translation {LETTERS[i]}:\n```\n{t}\n```\n" for i, t in enumerate(mts))
    return (
        f"Given a source text in {src_lang} and multiple translation candidates in {trg_lang}. "
        "Perform a step by step analysis and comparison of the translation quality for the "
        "candidates. Finally, rank and score the candidates with integer scores on a scale from "
        f"0 to 10.\n\nSource text:\n```\n{src}\n```\n\n{blocks}"
    )


def _base_rank(score_dict: dict[str, int]) -> str:
    items = sorted(score_dict.items(), key=lambda kv: (-kv[1], kv[0]))
    out = items[0][0]
    for (_, prev), (label, score) in itertools.pairwise(items):
        out += (" = " if score == prev else " > ") + label
    return out


def _base_response(analysis: str, scores: list[int]) -> str:
    analysis = analysis.strip()
    lines = analysis.splitlines()
    keys = ["Score", "score", "Scoring", "scoring", "Ranking", "ranking"]
    if lines and any(k in lines[-1] for k in keys):
        lines = lines[:-1]
    analysis = "\n".join(lines)
    score_dict = {LETTERS[i]: s for i, s in enumerate(scores)}
    rank = _base_rank(score_dict)
    order = rank[::4]
    scores_str = ", ".join(f"{c}: {score_dict[c]}" for c in order)
    return f"{analysis}\n\n### Final Ranking:\n\n{rank}\n\n### Scores:\n\n{scores_str}\n"


def _base_lang(code: str) -> str:
    return BASE_LANGS[code] if len(code) == 2 else code


def pandas_baseline(kind: str, input_path: str, output_path: str, m: int, k: int, seed: int) -> int:
    import pandas as pd

    from judgeflow.data.grrm import augmentation_plan
    from judgeflow.data.grrm.augment import _group_rng
    from judgeflow.data.prompt_hashes import grrm_prompt_hash

    df = pd.read_parquet(input_path)
    items: list[dict[str, Any]] = []
    for group_id, row in df.iterrows():
        mts = list(row["mt_texts"])
        scores = [int(s) for s in row["scores"]]
        if len(mts) != len(scores) or not 2 <= len(mts) <= 8:
            raise ValueError(f"row {group_id}: bad group")
        src_lang, trg_lang = _base_lang(row["src_lang"]), _base_lang(row["trg_lang"])
        prompt_hash = grrm_prompt_hash(row["src_text"])
        if kind == "sft":
            prompt = _base_prompt(src_lang, trg_lang, row["src_text"], mts)
            items.append(
                {
                    "messages": [
                        {"role": "user", "content": prompt},
                        {"role": "assistant", "content": _base_response(row["analysis"], scores)},
                    ],
                    "group_id": group_id,
                    "prompt_hash": prompt_hash,
                }
            )
            continue
        plan = augmentation_plan(len(mts), m, k, _group_rng(seed, int(group_id)))
        for kind_name, idx in plan:
            sub_mts = [mts[i] for i in idx]
            truth = {LETTERS[j]: scores[i] for j, i in enumerate(idx)}
            items.append(
                {
                    "data_source": "TowerBlocks-MT-Ranking.ranking_score",
                    "prompt": [
                        {
                            "role": "user",
                            "content": _base_prompt(src_lang, trg_lang, row["src_text"], sub_mts),
                        }
                    ],
                    "ability": "grrm/ranking",
                    "reward_model": {"style": "rule", "ground_truth": json.dumps(truth)},
                    "extra_info": {
                        "split": "train",
                        "index": len(items),
                        "group_id": group_id,
                        "candidate_indices": list(idx),
                        "augmentation": kind_name,
                        "src_lang": row["src_lang"],
                        "trg_lang": row["trg_lang"],
                        "prompt_hash": prompt_hash,
                    },
                }
            )
    pd.DataFrame(items).to_parquet(output_path, index=False)
    return len(items)


def pyarrow_baseline(
    kind: str, input_path: str, output_path: str, m: int, k: int, seed: int, batch_size: int = 1024
) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from judgeflow.data.grrm import augmentation_plan
    from judgeflow.data.grrm.augment import _group_rng
    from judgeflow.data.prompt_hashes import grrm_prompt_hash

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    writer: pq.ParquetWriter | None = None
    group_id = written = 0
    source = pq.ParquetFile(input_path)
    names = ["src_text", "src_lang", "trg_lang", "mt_texts", "scores", "analysis"]
    for batch in source.iter_batches(batch_size=batch_size, columns=names):
        cols: dict[str, list[Any]] = {name: [] for name in _PA_COLUMNS[kind]}
        for src, src_code, trg_code, mts, raw_scores, analysis in zip(
            *(batch.column(name).to_pylist() for name in names), strict=True
        ):
            scores = [int(s) for s in raw_scores]
            if len(mts) != len(scores) or not 2 <= len(mts) <= 8:
                raise ValueError(f"row {group_id}: bad group")
            src_lang, trg_lang = _base_lang(src_code), _base_lang(trg_code)
            prompt_hash = grrm_prompt_hash(src)
            if kind == "sft":
                cols["user"].append(_base_prompt(src_lang, trg_lang, src, mts))
                cols["assistant"].append(_base_response(analysis, scores))
                cols["group_id"].append(group_id)
                cols["prompt_hash"].append(prompt_hash)
            else:
                for kind_name, idx in augmentation_plan(len(mts), m, k, _group_rng(seed, group_id)):
                    sub_mts = [mts[i] for i in idx]
                    truth = {LETTERS[j]: scores[i] for j, i in enumerate(idx)}
                    cols["content"].append(_base_prompt(src_lang, trg_lang, src, sub_mts))
                    cols["ground_truth"].append(json.dumps(truth))
                    cols["index"].append(written + len(cols["index"]))
                    cols["group_id"].append(group_id)
                    cols["candidate_indices"].append(list(idx))
                    cols["augmentation"].append(kind_name)
                    cols["src_lang"].append(src_code)
                    cols["trg_lang"].append(trg_code)
                    cols["prompt_hash"].append(prompt_hash)
            group_id += 1
        n = len(cols["group_id"])
        one = pa.array(range(n + 1), pa.int32())  # list offsets: one message per row
        if kind == "sft":
            roles = pa.array(["user", "assistant"] * n)
            contents = pa.array([c for pair in zip(cols["user"], cols["assistant"], strict=True)
                                 for c in pair], pa.string())  # fmt: skip
            two = pa.array(range(0, 2 * n + 1, 2), pa.int32())  # two messages per row
            table = pa.table({
                "messages": pa.ListArray.from_arrays(two, pa.StructArray.from_arrays(
                    [roles, contents], fields=list(message))),
                "group_id": pa.array(cols["group_id"], pa.int64()),
                "prompt_hash": pa.array(cols["prompt_hash"], pa.string()),
            })  # fmt: skip
        else:
            table = pa.table({
                "data_source": pa.array(["TowerBlocks-MT-Ranking.ranking_score"] * n),
                "prompt": pa.ListArray.from_arrays(one, pa.StructArray.from_arrays(
                    [pa.array(["user"] * n), pa.array(cols["content"], pa.string())],
                    fields=list(message))),
                "ability": pa.array(["grrm/ranking"] * n),
                "reward_model": pa.StructArray.from_arrays(
                    [pa.array(["rule"] * n), pa.array(cols["ground_truth"], pa.string())],
                    names=["style", "ground_truth"]),
                "extra_info": pa.StructArray.from_arrays(
                    [pa.array(["train"] * n), pa.array(cols["index"], pa.int64()),
                     pa.array(cols["group_id"], pa.int64()),
                     pa.array(cols["candidate_indices"], pa.list_(pa.int64())),
                     *(pa.array(cols[c], pa.string())
                       for c in ("augmentation", "src_lang", "trg_lang", "prompt_hash"))],
                    names=["split", "index", "group_id", "candidate_indices", "augmentation",
                           "src_lang", "trg_lang", "prompt_hash"]),
            })  # fmt: skip
        if writer is None:
            writer = pq.ParquetWriter(output_path, table.schema)
        writer.write_table(table)
        written += n
    if writer is not None:
        writer.close()
    return written


# The per-batch column lists of `pyarrow_baseline`.
_PA_COLUMNS = {
    "sft": ["user", "assistant", "group_id", "prompt_hash"],
    "rl": ["content", "ground_truth", "index", "group_id", "candidate_indices", "augmentation",
           "src_lang", "trg_lang", "prompt_hash"],
}  # fmt: skip


# --------------------------------------------------------------------------- one measured run


def _peak_rss_kb() -> int:
    """This process's own RSS high-water mark (VmHWM; `ru_maxrss` would include the parent's,
    inherited at fork)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def worker(args: argparse.Namespace) -> None:
    """Run one preparation in this process and print a JSON line of measurements."""
    import judgeflow.data.grrm as grrm

    if args.impl == "pandas":
        import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    rss_imports = _peak_rss_kb()
    start = time.perf_counter()
    if args.impl == "ours":
        if args.kind == "sft":
            result = grrm.prepare_grrm_sft(args.input, args.output)
        else:
            result = grrm.prepare_grrm_rl(
                args.input, args.output, subgroup_augment=args.m, shuffle_augment=args.k,
                seed=args.seed,
            )  # fmt: skip
        rows = result.report["counts"]["rows_written"]
    else:
        run = pandas_baseline if args.impl == "pandas" else pyarrow_baseline
        rows = run(args.kind, args.input, args.output, args.m, args.k, args.seed)
    elapsed = time.perf_counter() - start
    peak = _peak_rss_kb()
    print(json.dumps({"rows": rows, "seconds": elapsed, "rss_imports_kb": rss_imports,
                      "rss_peak_kb": peak}))  # fmt: skip


def measure(impl: str, kind: str, input_path: Path, out: Path, m: int, k: int) -> dict[str, Any]:
    command = [
        sys.executable, __file__, "--worker", "--impl", impl, "--kind", kind,
        "--input", str(input_path), "--output", str(out), "--m", str(m), "--k", str(k),
    ]  # fmt: skip
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median time of repeated runs (a 2-core machine is noisy), their range, the highest peak."""
    times = sorted(r["seconds"] for r in runs)
    return {
        "rows": runs[0]["rows"],
        "seconds": statistics.median(times),
        "low": times[0],
        "high": times[-1],
        "rss_imports_kb": max(r["rss_imports_kb"] for r in runs),
        "rss_peak_kb": max(r["rss_peak_kb"] for r in runs),
    }


def same_rows(a: Path, b: Path) -> bool:
    """Row-by-row equality of two parquet files, streamed (schemas may differ in detail)."""
    import pyarrow.parquet as pq

    def rows(path: Path) -> Any:
        for batch in pq.ParquetFile(str(path)).iter_batches(batch_size=2048):
            yield from batch.to_pylist()

    sentinel = object()
    from itertools import zip_longest

    return all(x == y for x, y in zip_longest(rows(a), rows(b), fillvalue=sentinel))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=20000)
    parser.add_argument("--m", type=int, default=4, help="subgroup_augment (RL)")
    parser.add_argument("--k", type=int, default=4, help="shuffle_augment (RL)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=IMPLS, nargs="+", default=None)
    parser.add_argument("--kinds", default="sft,rl")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--impl", default="ours", help=argparse.SUPPRESS)
    parser.add_argument("--kind", default="sft", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    impls = args.only or IMPLS
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = root / "input.parquet"
        generate(data, args.groups)
        size_mb = os.path.getsize(data) / 2**20
        print(
            f"input: {args.groups} groups, {size_mb:.1f} MiB parquet; RL with M={args.m} K={args.k}"
        )
        for kind in args.kinds.split(","):
            results = {}
            for impl in impls:
                out = root / f"{impl}-{kind}.parquet"
                runs = [measure(impl, kind, data, out, args.m, args.k) for _ in range(args.repeat)]
                r = results[impl] = summarise(runs)
                print(
                    f"  {kind:3} {impl:8}: {r['rows']:>8} rows in {r['seconds']:6.2f} s "
                    f"(median of {len(runs)}: {r['low']:.2f}-{r['high']:.2f}) = "
                    f"{args.groups / r['seconds']:>7.0f} groups/s, {r['rows'] / r['seconds']:>7.0f} "
                    f"rows/s; peak RSS {r['rss_peak_kb'] / 1024:5.0f} MiB "
                    f"(after imports {r['rss_imports_kb'] / 1024:.0f} MiB)"
                )
            for impl in ("pandas", "pyarrow"):
                if "ours" not in results or impl not in results:
                    continue
                ours, base = results["ours"], results[impl]
                speedup = base["seconds"] / ours["seconds"]
                worst = base["low"] / ours["high"]  # fastest baseline run vs slowest of ours
                equal = same_rows(root / f"ours-{kind}.parquet", root / f"{impl}-{kind}.parquet")
                print(
                    f"  {kind:3} vs {impl:7}: speed-up x{speedup:.1f} (medians; worst pairing "
                    f"x{worst:.1f}); identical rows: {equal}"
                )


if __name__ == "__main__":
    main()
