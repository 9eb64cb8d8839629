"""The demo's figures, as a user gets them: the README quotes nothing else about the tiny runs.

    .venv/bin/python benchmarks/demo.py tables     # the two tiny runs' tables (about 5 min)
    .venv/bin/python benchmarks/demo.py seeds      # data.seed 1, 2, 3 x both modes (about 20 min)
    .venv/bin/python benchmarks/demo.py seeds --modes grrm [--set KEY=VALUE …] --output NAME.json
    .venv/bin/python benchmarks/demo.py rules      # what one-line rules score on the demo data
    .venv/bin/python benchmarks/demo.py seeds --modes rlvr --output demo-seeds-rlvr.json
    .venv/bin/python benchmarks/demo.py rlvr-rules # what one-line rules score on the RLVR task
    .venv/bin/python benchmarks/demo.py judged     # a judge pays a policy, seeds 1-3 (about half an hour)

Every run is `judgeflow run grpo-<mode> --profile tiny [--set data.seed=S]` as a subprocess in
a fresh JUDGEFLOW_HOME (a temp dir; the tiny model built as `make demo`'s bootstrap builds it),
with nothing from the caller's environment pointing it at other services.

- `tables` writes what the two runs print, from the table's title to the last `registered` line,
  to benchmarks/results/demo-<mode>.txt; the README's quickstart shows these files and
  tests/test_quickstart.py (pointwise, `make demo` itself) and tests/flows/test_judge_grpo_flow.py
  (pairwise) check that today's runs print the same tables.
- `seeds` writes benchmarks/results/demo-seeds.json: per mode and seed the SFT model's and the
  GRPO judge's figures on the validation split (overall and per subset), and whether GRPO met
  the demo's bar (reward_mean at least `MIN_GAIN` above SFT, format failures at most
  `MAX_FORMAT_FAILURES`). A benchmark, not a test: it takes twenty minutes.
- `seeds --modes grrm` does the same for `judgeflow run grrm-full --profile tiny`, whose bar is
  RLVR raising the ranking accuracy over the SFT model; `--set` passes overrides to every run
  (recorded in the file) and `--output` names the file.
- `seeds --modes rlvr`: `judgeflow run rlvr --profile tiny`, whose bar is the held-out
  `verifiable_correct_rate` at least `MIN_GAIN` above the SFT model's, format failures at most
  `MAX_FORMAT_FAILURES`; `rlvr-rules` writes demo-rules-rlvr.json (`rlvr_demo_data.RULES`).
- `judged` writes demo-seeds-judged.json: in one fresh JUDGEFLOW_HOME, `judgeflow run
  rlvr-judged --profile tiny` per seed (the first run trains the judge taught by verifiers, then
  its policy; the next ones find the judge champion). The bar (issue 35): the held-out
  `verifiable_correct_rate` at least `MIN_JUDGED_GAIN` above the SFT start, format failures at
  most `MAX_FORMAT_FAILURES`, the judge paying the trained policy's held-out answers more than
  the start's, the hacking gate clear and the policy champion; how often the judge agrees with
  the verifiers on the held-out answers is recorded. Then `make demo`'s answer/non-answer judge
  and `--profile tiny-hackable`, which the gate must refuse. Answers of the SFT model and of the
  trained policy to the first held-out questions are kept as examples.
- `rules` writes benchmarks/results/demo-rules.json: `judgeflow.dev.demo_data.RULES` scored by
  the evaluation's own metric code on the validation files (overall and per subset).

benchmarks/readme.py renders the README's regions from these files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline import _env
from stamp import stamp

from judgeflow.modes import JUDGE_MODES

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
BIN = Path(sys.executable).parent
MODES = JUDGE_MODES
RECIPES = {
    "pointwise": "grpo-pointwise",
    "pairwise": "grpo-pairwise",
    "grrm": "grrm-full",
    "rlvr": "rlvr",
    "rlvr-judged": "rlvr-judged",
}
SEEDS = (1, 2, 3)
#: The demo's bar for GRPO, per seed and mode (issue 17).
MIN_GAIN = 0.15
MAX_FORMAT_FAILURES = 0.10
#: What `tables` keeps of a run's output: the comparison table(s) and the registry's decisions.
_TABLES = re.compile(r"^Judge on the validation split.*?(?=^\s*$|^Open the UIs)", re.M | re.S)
_RUN_ID = re.compile(r"MLflow run id : (\w+)")


def run_tiny(
    home: Path, mode: str, sets: Sequence[str] = (), profile: str = "tiny"
) -> tuple[str, dict[str, float]]:
    """Run the tiny profile (or `profile`) in `home`: the output and the run's MLflow metrics."""
    if not (home / "tiny-model" / "config.json").exists():
        subprocess.run(
            [BIN / "judgeflow", "dev", "tiny-model", str(home / "tiny-model")],
            env=_env(home),
            check=True,
            capture_output=True,
        )
    command = [str(BIN / "judgeflow"), "run", RECIPES[mode], "--profile", profile]
    for item in sets:
        command += ["--set", item]
    proc = subprocess.run(
        command, env=_env(home), capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{output[-4000:]}")
    run_id = _RUN_ID.search(output)
    if run_id is None:
        raise RuntimeError(f"{' '.join(command)} printed no MLflow run id:\n{output[-4000:]}")
    db = sqlite3.connect(f"file:{home / 'mlflow.db'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT key, value FROM latest_metrics WHERE run_uuid = ?", (run_id.group(1),)
        ).fetchall()
    finally:
        db.close()
    return output, dict(rows)


def printed_tables(output: str) -> str:
    """The part of a run's output the README shows: the tables and the registry's decisions."""
    found = _TABLES.search(output)
    if found is None:
        raise ValueError("the output has no 'Judge on the validation split' table")
    return found.group(0).rstrip() + "\n"


def tables() -> None:
    seconds = {}
    for mode in MODES:
        with tempfile.TemporaryDirectory(prefix="jf-demo-") as tmp:
            started = time.monotonic()
            output, _ = run_tiny(Path(tmp), mode)
            seconds[mode] = round(time.monotonic() - started, 1)
            text = printed_tables(output)
            parameters = _parameters(Path(tmp) / "tiny-model")
        _write_text(RESULTS / f"demo-{mode}.txt", text)
        print(f"({seconds[mode]:.0f} s)\n{text}")
    _write(
        "demo-tables.json",
        {
            # the printed tables this run wrote: tests/benchmarks/test_results_stamps.py holds
            # each .txt to its hash here
            "outputs": {f"demo-{m}.txt": _sha256(RESULTS / f"demo-{m}.txt") for m in MODES},
            "seconds": seconds,  # each run, after the tiny model was built
            "tiny_model_parameters": parameters,
        },
    )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _parameters(model_dir: Path) -> int:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    return sum(p.numel() for p in model.parameters())


def _figures(metrics: dict[str, float], label: str) -> dict[str, Any]:
    prefix = f"{label}/"
    overall = {
        k.removeprefix(prefix): v
        for k, v in metrics.items()
        if k.startswith(prefix) and "/" not in k.removeprefix(prefix)
    }
    subsets: dict[str, dict[str, float]] = {}
    for key, value in metrics.items():
        if key.startswith(f"{prefix}subset/"):
            subset, name = key.removeprefix(f"{prefix}subset/").rsplit("/", 1)
            subsets.setdefault(subset, {})[name] = value
    return {"overall": overall, "subsets": subsets}


def seeds(
    selected_modes: Sequence[str],
    selected_seeds: Sequence[int],
    overrides: Sequence[str] = (),
    output: str = "demo-seeds.json",
) -> None:
    runs = []
    started = time.monotonic()
    for mode in selected_modes:
        for seed in selected_seeds:
            t0 = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="jf-seed-") as tmp:
                _, metrics = run_tiny(Path(tmp), mode, [f"data.seed={seed}", *overrides])
            sft, after = _figures(metrics, "sft"), _figures(metrics, "after")
            gain = after["overall"]["reward_mean"] - sft["overall"]["reward_mean"]
            failures = after["overall"]["format_failure_rate"]
            if mode == "grrm":
                ranking = after["overall"]["ranking_accuracy"] - sft["overall"]["ranking_accuracy"]
                ok = ranking > 0 and failures <= sft["overall"]["format_failure_rate"]
            elif mode == "rlvr":  # a policy: its held-out verifiable_correct_rate (issue 27)
                primary = "verifiable_correct_rate"
                gain = after["overall"][primary] - sft["overall"][primary]
                ok = gain >= MIN_GAIN and failures <= MAX_FORMAT_FAILURES
            else:
                ok = gain >= MIN_GAIN and failures <= MAX_FORMAT_FAILURES
            seconds = round(time.monotonic() - t0, 1)
            gain_name = "verifiable_correct_gain" if mode == "rlvr" else "reward_gain"
            runs.append({"mode": mode, "seed": seed, "sft": sft, "after": after,
                         gain_name: gain, "meets_bar": ok, "seconds": seconds})  # fmt: skip
            shown = "verifiable_correct_rate" if mode == "rlvr" else "reward_mean"
            print(f"{mode} seed {seed}: {shown} {sft['overall'][shown]:.3f} -> "
                  f"{after['overall'][shown]:.3f} ({gain:+.3f}), format failures "
                  f"{failures:.3f}: {'meets' if ok else 'MISSES'} the bar", flush=True)  # fmt: skip
    _write(
        output,
        {
            "overrides": list(overrides),
            "bar": {"min_reward_gain": MIN_GAIN, "max_format_failure_rate": MAX_FORMAT_FAILURES,
                    "grrm": "ranking_accuracy above the SFT model's, format failures not above",
                    "rlvr": "verifiable_correct_rate at least min_reward_gain above the SFT "
                            "model's, format failures at most max_format_failure_rate"},
            "runs": runs,
            "seconds": round(time.monotonic() - started, 1),
        },
    )  # fmt: skip


#: The judge-paid loop's bar (issue 35): the held-out verifiable_correct_rate at least this much
#: above the policy's start, format failures at most MAX_FORMAT_FAILURES, the judge's pay up,
#: the hacking gate clear and the policy champion.
MIN_JUDGED_GAIN = 0.10
#: The judge-paid demo's held-out questions (the tiny profile's data.val_source), with verifiers.
JUDGED_HELD_OUT = "rlvr/tinyrlvr_val.jsonl"
#: The rlvr-judged recipe's registered policy name (each seed's gets `-seed-N`).
JUDGED_POLICY = "rlvr-judged-policy"
_PAID_BY = re.compile(r"paid by +: (\S+)")
_PANEL = re.compile(r"judge panel +: (.+?) \(each rollout")
_GATE = re.compile(r"hacking gate +: (clear|suspected)(.*)")
_CHAMPION = re.compile(
    # the policy's own line: not its SFT model's (`…-sft`, the first version of its name)
    rf"registered +: {JUDGED_POLICY}(?:-seed-\d+)? v\d+ (promoted|first version|already champion)"
)
_TRAINED_FIRST = re.compile(r"has no champion yet: training it first")
_EXAMPLES = 6


def _predictions(home: Path, run_id: str, label: str) -> list[dict[str, Any]]:
    """The evaluation `label`'s rows of the run (`eval/<label>_predictions.json`), by index."""
    import mlflow

    path = mlflow.artifacts.download_artifacts(
        run_id=run_id,
        artifact_path=f"eval/{label}_predictions.json",
        tracking_uri=f"sqlite:///{home / 'mlflow.db'}",
        dst_path=str(home / "answers" / run_id / label),
    )
    table = json.loads(Path(path).read_text())
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    return sorted(rows, key=lambda r: int(r["index"]))


def _held_out(sample: str) -> list[dict[str, Any]]:
    from judgeflow.samples import sample_path

    return [json.loads(line) for line in Path(sample_path(sample)).read_text().splitlines()]


def _judge_on_held_out(
    home: Path, judge_refs: Sequence[str], rows: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """The paying judges' own view of the held-out answers (they never paid them: the verifiers
    measure those rows): what they would pay the start's and the trained policy's answers (a
    panel: the lowest of its judges' scores, as it pays), and how often that verdict (a score of
    2 or more: pays) agrees with the verifiers'; each judge of a panel alone beside it."""
    from judgeflow.dev.verified_judge_data import judge_query
    from judgeflow.inference.judge_reward import JudgedItem, LocalJudge, judge_scores, panel_scores
    from judgeflow.registry.models import ModelRegistry
    from judgeflow.registry.paying_judge import _recorded_max_new_tokens
    from judgeflow.rewards.rlvr.verifiers import remove_thinking_section

    tracking = f"sqlite:///{home / 'mlflow.db'}"
    judges = {}
    for ref in judge_refs:
        version = ModelRegistry(tracking).resolve(ref)
        tokens = _recorded_max_new_tokens(version.run_id, tracking) or 32
        judges[ref] = LocalJudge(
            version.model_uri, "pointwise", max_new_tokens=tokens, batch_size=32
        )
    questions = _held_out(JUDGED_HELD_OUT)
    out: dict[str, Any] = {}
    for label, answered in rows.items():
        items = [  # shown as it is shown a training question: with its reference
            JudgedItem(judge_query(questions[int(r["index"])]),
                       remove_thinking_section(r["completion"]), "", str(r["index"]))
            for r in answered
        ]  # fmt: skip
        right = [float(r.get("verifiable_reward", 0.0)) > 0 for r in answered]
        found = {ref: judge_scores(judge, items) for ref, judge in judges.items()}
        views = {"panel": panel_scores(list(found.values())).scores}
        views |= {ref: each.scores for ref, each in found.items()}
        out[label] = {}
        for name, scores in views.items():
            paid = [s if s is not None else 0.0 for s in scores]
            agree = [
                (s is not None and s >= 0.5) == ok for s, ok in zip(scores, right, strict=True)
            ]
            view = {"judge_paid_mean": sum(paid) / len(paid),
                    "agreement_with_verifiers": sum(agree) / len(agree),
                    "judge_format_failures": scores.count(None)}  # fmt: skip
            if name == "panel":
                out[label].update(view)
                # what it would pay each answer, for the examples (not written as a figure)
                out[label]["_paid"] = {
                    int(r["index"]): s for r, s in zip(answered, scores, strict=True)
                }
            elif len(judges) > 1:
                out[label].setdefault("judges", {})[name] = view
    return out


def _examples(
    answered: Sequence[dict[str, Any]], questions: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The answers shown: the first `_EXAMPLES` held-out rows, split evenly between the rows'
    verifiers where they have several (animal and number questions alike)."""
    kinds = list(dict.fromkeys(str(q.get("dataset")) for q in questions))
    each = _EXAMPLES // len(kinds)
    return [
        row
        for kind in kinds
        for row in [r for r in answered if questions[int(r["index"])].get("dataset") == kind][:each]
    ]


def _judged_run(home: Path, sets: Sequence[str], profile: str = "tiny") -> dict[str, Any]:
    t0 = time.monotonic()
    output, metrics = run_tiny(home, "rlvr-judged", sets, profile=profile)
    run_id = _RUN_ID.search(output).group(1)  # type: ignore[union-attr]  # run_tiny checked it
    paid_by = _PAID_BY.search(output)
    panel = _PANEL.search(output)
    gate = _GATE.search(output)
    sft, after = _figures(metrics, "sft"), _figures(metrics, "after")
    rows = {label: _predictions(home, run_id, label) for label in ("sft", "after")}
    verified = profile == "tiny"
    if verified:  # held-out rows with verifiers: the judge's view is computed beside them
        primary = "verifiable_correct_rate"
        refs = [paid_by.group(1), *(panel.group(1).split(", ") if panel else [])]
        judged = _judge_on_held_out(home, refs, rows) if paid_by else {}
        questions = _held_out(JUDGED_HELD_OUT)
    else:  # the judge's own questions: it paid the held-out rows, reference_f1 beside it
        primary = "reference_f1"
        judged = {label: {"judge_paid_mean": (sft if label == "sft" else after)["overall"][
            "reward_mean"]} for label in rows}  # fmt: skip
        questions = _held_out("rlvr_judged/tinyjudged_val.jsonl")
    paid = {label: view.pop("_paid", {}) for label, view in judged.items()}
    gain = after["overall"][primary] - sft["overall"][primary]
    failures = after["overall"].get("format_failure_rate", 0.0)
    paid_gain = judged["after"]["judge_paid_mean"] - judged["sft"]["judge_paid_mean"]
    champion = bool(_CHAMPION.search(output))
    return {
        "profile": profile,
        "overrides": list(sets),
        "trained_the_judge_first": bool(_TRAINED_FIRST.search(output)),
        "paid_by": paid_by.group(1) if paid_by else None,
        "judge_panel": panel.group(1).split(", ") if panel else [],
        "sft": sft,
        "after": after,
        "primary": primary,
        "gain": gain,
        "judge_view": judged,
        "judge_paid_gain": paid_gain,
        "format_failure_rate": failures,
        "hacking_gate": gate.group(1) if gate else None,
        "hacking_gate_says": (gate.group(1) + gate.group(2)).strip() if gate else None,
        "champion": champion,
        "meets_bar": (
            gain >= MIN_JUDGED_GAIN
            and failures <= MAX_FORMAT_FAILURES
            and paid_gain > 0
            and champion
            and bool(gate)
            and gate.group(1) == "clear"
        ),
        "examples": {
            label: [
                {
                    "question": questions[int(r["index"])]["messages"][0]["content"],
                    "reference": questions[int(r["index"])]["ground_truth"],
                    "answer": r["completion"],
                    "verifiers": float(r.get("verifiable_reward", 0.0)) > 0 if verified else None,
                    # verified: what the judge would pay (it never paid held-out rows)
                    "judge_paid": paid[label].get(int(r["index"])) if verified else r["reward"],
                    "reference_f1": round(float(r.get("reference_f1", 0.0)), 3),
                }
                for r in _examples(answered, questions)
            ]
            for label, answered in rows.items()
        },
        "seconds": round(time.monotonic() - t0, 1),
    }


def judged(selected_seeds: Sequence[int], overrides: Sequence[str] = ()) -> None:
    """A judge pays a policy. In one fresh JUDGEFLOW_HOME: `judgeflow run rlvr-judged --profile
    tiny` per seed (the first trains the judge taught by verifiers, the others find it
    champion), each seed's policy registered under its own name (`JUDGED_POLICY-seed-N`), so
    that the registry weighs it against its own start, not against an earlier seed's policy;
    then `make demo`'s answer/non-answer judge and `--profile tiny-hackable`, which
    the hacking gate must refuse."""
    started = time.monotonic()
    runs = []
    with tempfile.TemporaryDirectory(prefix="jf-judged-") as tmp:
        home = Path(tmp)
        for seed in selected_seeds:
            sets = [f"data.seed={seed}", f"register.model_name={JUDGED_POLICY}-seed-{seed}"]
            run = {"seed": seed, **_judged_run(home, [*sets, *overrides])}
            runs.append(run)
            view = run["judge_view"]
            print(f"rlvr-judged seed {seed}: verifiable_correct_rate "
                  f"{run['sft']['overall']['verifiable_correct_rate']:.3f} -> "
                  f"{run['after']['overall']['verifiable_correct_rate']:.3f}, judge pays "
                  f"{view['sft']['judge_paid_mean']:.3f} -> {view['after']['judge_paid_mean']:.3f}"
                  f", gate {run['hacking_gate']}, champion {run['champion']}: "
                  f"{'meets' if run['meets_bar'] else 'MISSES'} the bar", flush=True)  # fmt: skip
        t0 = time.monotonic()
        run_tiny(home, "pointwise")  # make demo's judge: judge-grpo-pointwise@champion
        judge_seconds = round(time.monotonic() - t0, 1)
        seed = selected_seeds[0]
        hacked = {"seed": seed, **_judged_run(home, [f"data.seed={seed}", *overrides],
                                              profile="tiny-hackable")}  # fmt: skip
        print(f"tiny-hackable: hacking gate {hacked['hacking_gate']}, champion "
              f"{'yes' if hacked['champion'] else 'no'}")  # fmt: skip
    _write(
        "demo-seeds-judged.json",
        {
            "overrides": list(overrides),
            "bar": {
                "min_verifiable_correct_gain": MIN_JUDGED_GAIN,
                "max_format_failure_rate": MAX_FORMAT_FAILURES,
                "judge_paid": "the judge pays the trained policy's held-out answers more than "
                "the start's",
                "gate": "clear, and the policy champion",
            },
            "hackable_judge_seconds": judge_seconds,
            "runs": runs,
            "hackable": hacked,
            "seconds": round(time.monotonic() - started, 1),
        },
    )


def rules() -> None:
    """Each rule as a judge: its verdicts go through the evaluation's own scoring."""
    from judgeflow.data import prepare_judge
    from judgeflow.dev.demo_data import RULES
    from judgeflow.evaluation import evaluation_rows, judge_rows, read_rows
    from judgeflow.evaluation.metrics import summarise
    from judgeflow.samples import sample_path

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="jf-rules-") as tmp:
        for mode in MODES:
            val = Path(tmp) / f"{mode}.parquet"
            prepare_judge(mode, [sample_path(f"tinyjudge_{mode}_val.jsonl")], val,
                          both_orders=mode == "pairwise")  # fmt: skip
            rows = evaluation_rows(mode, read_rows(val))
            for name, helpful in RULES.items():
                completions = [_rule_verdict(mode, row, helpful) for row in rows]
                metrics, details = summarise(mode, judge_rows(mode, rows, completions), 1)
                out.setdefault(name, {})[mode] = {
                    "overall": {k.removeprefix("eval/"): v for k, v in metrics.items()
                                if "/subset/" not in k},
                    "subsets": {s["subset"]: s for s in details["subsets"]},
                }  # fmt: skip
    _write("demo-rules.json", {"rules": out})


def rlvr_rules() -> None:
    """`judgeflow.dev.rlvr_demo_data.RULES` as policies on the held-out prompts, scored by the
    evaluation's own code with the tiny profile's reward rules."""
    from judgeflow.config import load_config
    from judgeflow.data.rlvr import prepare_rlvr
    from judgeflow.dev.rlvr_demo_data import RULES
    from judgeflow.evaluation import judge_rows, read_rows
    from judgeflow.evaluation.metrics import summarise
    from judgeflow.samples import sample_path

    cfg = load_config("rlvr", profile="tiny")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="jf-rules-") as tmp:
        val = Path(tmp) / "val.parquet"
        prepare_rlvr([sample_path("rlvr/tinyrlvr_val.jsonl")], val)
        rows = read_rows(val)
        for name, rule in RULES.items():
            completions = [rule(row["prompt"][-1]["content"]) for row in rows]
            judged = judge_rows("rlvr", rows, completions, cfg.rlvr.reward_kwargs())
            metrics, details = summarise("rlvr", judged, 1)
            out[name] = {
                "overall": {k.removeprefix("eval/"): v for k, v in metrics.items()
                            if "/subset/" not in k},
                "subsets": {s["subset"]: s for s in details["subsets"]},
            }  # fmt: skip
    _write("demo-rules-rlvr.json", {"rules": out})


def _rule_verdict(mode: str, row: dict[str, Any], helpful: Any) -> str:
    """The rule's verdict on an evaluation row, written as the judge writes one."""
    from judgeflow.data.templates import parse_pairwise, parse_pointwise

    content = row["prompt"][-1]["content"]
    if mode == "pointwise":
        query, response = parse_pointwise(content) or ("", "")
        score = 4 if helpful(query, response) else 0
        return f"<think>rule</think><score>{score}</score>"
    query, response_a, response_b = parse_pairwise(content) or ("", "", "")
    a, b = helpful(query, response_a), helpful(query, response_b)
    return f"<think>rule</think><better>{'B' if b and not a else 'A'}</better>"


#: This run's stamp (benchmarks/stamp.py), taken as it starts.
_STAMP: dict[str, Any] = {}


def _write(name: str, payload: dict[str, Any]) -> None:
    payload = {**(_STAMP or stamp("benchmarks/demo.py")), **payload}
    _write_text(RESULTS / name, json.dumps(payload, indent=2, sort_keys=False) + "\n")


def _write_text(path: Path, text: str) -> None:
    """Whole or not at all: written under a temporary name, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    print(f"wrote {path.relative_to(REPO)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("tables", "seeds", "rules", "rlvr-rules", "judged"))
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(RECIPES))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an override for every run (seeds)",
    )
    parser.add_argument("--output", default="demo-seeds.json", help="file in benchmarks/results")
    args = parser.parse_args(argv)
    _STAMP.update(
        stamp(" ".join(["benchmarks/demo.py", *(sys.argv[1:] if argv is None else argv)]))
    )
    if args.what == "tables":
        tables()
    elif args.what == "seeds":
        seeds(args.modes, args.seeds, args.overrides, args.output)
    elif args.what == "rlvr-rules":
        rlvr_rules()
    elif args.what == "judged":
        judged(args.seeds, args.overrides)
    else:
        rules()
    return 0


if __name__ == "__main__":
    sys.exit(main())
