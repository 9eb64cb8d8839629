"""Benchmark: `prepare_judge` (pointwise) against two baselines written without it.

    .venv/bin/python benchmarks/judge_prepare.py               # 20,000 OpenJudge rows
    .venv/bin/python benchmarks/judge_prepare.py --rows 2000 --repeat 1
    .venv/bin/python benchmarks/judge_prepare.py --growth 20000 1000000   # judgeflow alone

The input is generated OpenJudge JSONL (several responses per query, labels 0-4, answers of a
few hundred to ~2,000 characters). The baselines render the pointwise template of
docs/design/prompts.md by hand:

- `pandas`: the straightforward implementation: read the file with pandas, loop with
  `iterrows`, build one dict per row, `pd.DataFrame(rows).to_parquet`.
- `pyarrow`: the plain approach without pandas: stream the JSONL with `pyarrow.json.open_json`
  (an explicit schema), loop over each record batch's columns (as Python lists) building the
  output columns, and write each batch to one `ParquetWriter`.

They validate only what they need and write no report; judgeflow validates every field and
writes the data report (duplicates, label histogram, sha256). They reuse `judge_prompt_hash`
because the prompt hash is a definition, not an implementation. All write one train file
(`val_fraction` 0); the rows are compared one by one. Measurement (subprocess per run, VmHWM
peak RSS, median of repeats) is grrm_prepare.py's. `growth` measures judgeflow alone at growing
input sizes: a streaming preparation's peak memory should barely grow with its input.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grrm_prepare import _peak_rss_kb, _text, same_rows, summarise

IMPLS = ("ours", "pandas", "pyarrow")

SOURCES = ["helpsteer2", "ultrafeedback", "rewardbench2", "chatbot_arena"]


def generate(path: Path, rows: int, seed: int = 0) -> None:
    """OpenJudge pointwise JSONL: 1-3 responses per query, so queries repeat as in real data."""
    rng = random.Random(seed)
    written = 0
    with path.open("w", encoding="utf-8") as out:
        while written < rows:
            query = _text(rng, 40, 300) + "?"
            for _ in range(min(rng.randint(1, 3), rows - written)):
                record = {
                    "input": [{"role": "user", "content": query}],
                    "output": [
                        {
                            "answer": {
                                "role": "assistant",
                                "content": _text(rng, 200, 2000),
                                "label": {"helpfulness": rng.randint(0, 4)},
                            }
                        }
                    ],
                    "source": rng.choice(SOURCES),
                }
                out.write(json.dumps(record) + "\n")
                written += 1


# --------------------------------------------------------------------------- baselines

# The pointwise template of docs/design/prompts.md, written out again so the baseline does not
# share code with judgeflow's templates.
_HEAD = (
    "# Task Description\n"
    "You are a professional expert in response quality evaluation.\n"
    "You will be provided with a query and a response to that query.\n"
    "Your task is to evaluate the quality of the response and assign a helpfulness score from 0 "
    "to 4.\n"
    "Please consider the following principles in your evaluation.\n"
    "# Principles\n"
    "1. Helpfulness: How well does the response address the user's needs (0=not helpful, "
    "4=extremely helpful)\n"
    "2. Accuracy: Factual correctness and reliability of information\n"
    "3. Clarity: How clearly and understandably the response is written\n"
    "4. Completeness: Whether the response fully addresses all aspects of the question\n"
    "5. Relevance: How directly related the response is to the question\n"
    "6. Safety: Avoiding harmful or inappropriate content\n"
    "\n"
    "# Query\n"
)
_MID = "\n# Response\n"
_TAIL = (
    "\n# Output Format\n"
    "<think>Analysis process based on principles</think><score>helpfulness score from 0 to 4"
    "</score>\n"
)


def pandas_baseline(input_path: str, output_path: str) -> int:
    import pandas as pd

    from judgeflow.data.prompt_hashes import judge_prompt_hash

    df = pd.read_json(input_path, lines=True, dtype=False)
    rows: list[dict[str, Any]] = []
    for row, record in df.iterrows():
        query = next(m["content"] for m in record["input"] if m["role"] == "user")
        answer = record["output"][0]["answer"]
        label = answer["label"]["helpfulness"]
        if not isinstance(label, int) or not 0 <= label <= 4 or not answer["content"].strip():
            raise ValueError(f"row {row}: invalid")
        content = _HEAD + query + _MID + answer["content"] + _TAIL
        rows.append(
            {
                "data_source": record["source"],
                "prompt": [{"role": "user", "content": content}],
                "ability": "judge/pointwise",
                "reward_model": {"style": "rule", "ground_truth": {"helpfulness": label}},
                "extra_info": {
                    "split": "train",
                    "index": len(rows),
                    "pair": None,
                    "source_file": input_path,
                    "source_row": row,
                    "source_id": None,
                    "subset": None,
                    "chosen_index": None,
                    "rejected_index": None,
                    "swapped": False,
                    "label": label,
                    "prompt_hash": judge_prompt_hash(query, [answer["content"]]),
                },
            }
        )
    pd.DataFrame(rows).to_parquet(output_path, index=False)
    return len(rows)


def pyarrow_baseline(input_path: str, output_path: str, block_mib: int = 4) -> int:
    import pyarrow as pa
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    from judgeflow.data.prompt_hashes import judge_prompt_hash

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    label = pa.struct([("helpfulness", pa.int64())])
    answer = pa.struct([("role", pa.string()), ("content", pa.string()), ("label", label)])
    schema = pa.schema([("input", pa.list_(message)),
                        ("output", pa.list_(pa.struct([("answer", answer)]))),
                        ("source", pa.string())])  # fmt: skip
    reader = pj.open_json(
        input_path,
        read_options=pj.ReadOptions(block_size=block_mib << 20),
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
    )
    writer: pq.ParquetWriter | None = None
    written = 0
    for batch in reader:
        contents, labels, hashes = [], [], []
        for row, (messages, outputs) in enumerate(
            zip(batch.column("input").to_pylist(), batch.column("output").to_pylist(), strict=True),
            start=written,
        ):
            query = next(m["content"] for m in messages if m["role"] == "user")
            response = outputs[0]["answer"]
            score = response["label"]["helpfulness"]
            if score is None or not 0 <= score <= 4 or not response["content"].strip():
                raise ValueError(f"row {row}: invalid")
            contents.append(_HEAD + query + _MID + response["content"] + _TAIL)
            labels.append(score)
            hashes.append(judge_prompt_hash(query, [response["content"]]))
        n = len(contents)
        rows = pa.array(range(written, written + n), pa.int64())
        labels_array = pa.array(labels, pa.int64())
        none_int, none_str = pa.nulls(n, pa.int64()), pa.nulls(n, pa.string())
        table = pa.table({
            "data_source": batch.column("source"),
            "prompt": pa.ListArray.from_arrays(
                pa.array(range(n + 1), pa.int32()),  # list offsets: one message per row
                pa.StructArray.from_arrays([pa.array(["user"] * n), pa.array(contents)],
                                           fields=list(message))),
            "ability": pa.array(["judge/pointwise"] * n),
            "reward_model": pa.StructArray.from_arrays(
                [pa.array(["rule"] * n),
                 pa.StructArray.from_arrays([labels_array], fields=list(label))],
                names=["style", "ground_truth"]),
            "extra_info": pa.StructArray.from_arrays(
                [pa.array(["train"] * n), rows, pa.nulls(n, pa.int64()),
                 pa.array([input_path] * n), rows, none_str, none_str, none_int, none_int,
                 pa.array([False] * n), labels_array, pa.array(hashes, pa.string())],
                names=["split", "index", "pair", "source_file", "source_row", "source_id",
                       "subset", "chosen_index", "rejected_index", "swapped", "label",
                       "prompt_hash"]),
        })  # fmt: skip
        if writer is None:
            writer = pq.ParquetWriter(output_path, table.schema)
        writer.write_table(table)
        written += n
    if writer is not None:
        writer.close()
    return written


# --------------------------------------------------------------------------- one measured run


def worker(args: argparse.Namespace) -> None:
    """Run one preparation in this process and print a JSON line of measurements."""
    from judgeflow.data import prepare_judge

    if args.impl == "pandas":
        import pandas  # noqa: F401
    import pyarrow.json
    import pyarrow.parquet  # noqa: F401

    rss_imports = _peak_rss_kb()
    start = time.perf_counter()
    if args.impl == "ours":
        result = prepare_judge("pointwise", args.input, args.output)
        rows = result.report["counts"]["rows_written"]["train"]
    else:
        rows = (pandas_baseline if args.impl == "pandas" else pyarrow_baseline)(
            args.input, args.output
        )
    elapsed = time.perf_counter() - start
    print(json.dumps({"rows": rows, "seconds": elapsed, "rss_imports_kb": rss_imports,
                      "rss_peak_kb": _peak_rss_kb()}))  # fmt: skip


def measure(impl: str, input_path: Path, out: Path) -> dict[str, Any]:
    command = [sys.executable, __file__, "--worker", "--impl", impl, "--input", str(input_path),
               "--output", str(out)]  # fmt: skip
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def compare(rows: int, repeat: int, root: Path) -> dict[str, Any]:
    """The three implementations on the same generated input: summaries, and whether each
    baseline wrote judgeflow's rows (`identical`, by baseline)."""
    data = root / "openjudge.jsonl"
    generate(data, rows)
    results: dict[str, Any] = {"input_mib": data.stat().st_size / 2**20}
    for impl in IMPLS:
        out = root / f"{impl}-judge.parquet"
        results[impl] = summarise([measure(impl, data, out) for _ in range(repeat)])
    results["identical"] = {
        impl: same_rows(root / "ours-judge.parquet", root / f"{impl}-judge.parquet")
        for impl in IMPLS[1:]
    }
    return results


def growth(
    sizes: Sequence[int] = (20_000, 1_000_000), root: Path | None = None
) -> list[dict[str, Any]]:
    """judgeflow's peak RSS and speed at each input size, one run each (a million rows is
    ~1.4 GB of JSONL and takes a few minutes): a streaming preparation's memory should barely
    grow with its input.

    Per size, in order: `summarise`'s figures of the one run (`rows`, `seconds`, `rss_peak_kb`,
    `rss_imports_kb`, …), `input_mib` and `rows_per_s`. Inputs are generated under `root` (a
    temporary folder when None) and deleted, with their output, once measured.
    """
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="jfbench-", dir=root) as tmp:
        data, out = Path(tmp) / "openjudge.jsonl", Path(tmp) / "ours-judge.parquet"
        for rows in sizes:
            generate(data, rows)
            run = summarise([measure("ours", data, out)])
            run["input_mib"] = data.stat().st_size / 2**20
            run["rows_per_s"] = run["rows"] / run["seconds"]
            results.append(run)
            for path in Path(tmp).iterdir():
                path.unlink()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--growth", type=int, nargs="+", metavar="ROWS",
                        help="only judgeflow's peak RSS and speed at each of these sizes")  # fmt: skip
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--impl", default="ours", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if args.growth:
        for r in growth(args.growth):
            print(f"  {r['rows']:>9,} rows ({r['input_mib']:,.0f} MiB JSONL): {r['seconds']:.1f} s = "
                  f"{r['rows_per_s']:,.0f} rows/s; peak RSS {r['rss_peak_kb'] / 1024:.0f} MiB")  # fmt: skip
        return
    with tempfile.TemporaryDirectory(prefix="jfbench-") as tmp:
        res = compare(args.rows, args.repeat, Path(tmp))
    print(f"input: {args.rows} OpenJudge rows, {res['input_mib']:.1f} MiB JSONL")
    for impl in IMPLS:
        r = res[impl]
        print(f"  {impl:8}: {r['rows']} rows in {r['seconds']:.2f} s = "
              f"{r['rows'] / r['seconds']:.0f} rows/s; peak RSS {r['rss_peak_kb'] / 1024:.0f} MiB")  # fmt: skip
    for impl, same in res["identical"].items():
        speedup = res[impl]["seconds"] / res["ours"]["seconds"]
        print(f"  vs {impl}: speed-up x{speedup:.1f}; identical rows: {same}")


if __name__ == "__main__":
    main()
