"""The regions rendered from the policy demos' results (`benchmarks/demo.py` seeds --modes rlvr,
rlvr-rules, judged) and from the paying judge's throughput (`benchmarks/run.py --only
judge-reward`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from figures_format import cell, minutes, raised, read_json
from stamp import describe


def rlvr_seeds_table(source: Path) -> str:
    """benchmarks/demo.py seeds --modes rlvr: per seed, the SFT policy and the GRPO policy on the
    held-out prompts, overall and per verifier."""
    results = read_json(source)
    bar = results["bar"]
    metric = "verifiable_correct_rate"
    verifiers = sorted(results["runs"][0]["after"]["subsets"])
    lines = [
        f"| data.seed | {metric} SFT → GRPO | gain | "
        + " | ".join(f"{v} SFT → GRPO" for v in verifiers)
        + " | format failures SFT → GRPO | meets the bar |",
        "|---|---|---|" + "---|" * len(verifiers) + "---|---|",
    ]
    for run in results["runs"]:
        sft, after = run["sft"], run["after"]
        per = " | ".join(
            f"{sft['subsets'][v][metric]:.3f} → {after['subsets'][v][metric]:.3f}"
            for v in verifiers
        )
        lines.append(
            f"| {run['seed']} | {sft['overall'][metric]:.3f} → {after['overall'][metric]:.3f} "
            f"| {run['verifiable_correct_gain']:+.3f} | {per} "
            f"| {sft['overall']['format_failure_rate']:.3f} → "
            f"{after['overall']['format_failure_rate']:.3f} "
            f"| {'yes' if run['meets_bar'] else '**no**'} |"
        )
    met = sum(run["meets_bar"] for run in results["runs"])
    seconds = [run["seconds"] for run in results["runs"]]
    per_verifier = "; ".join(
        f"{v} ({int(results['runs'][0]['after']['subsets'][v]['n'])} held-out prompts, one is "
        f"{1 / results['runs'][0]['after']['subsets'][v]['n']:.3f}): raised it in "
        + raised(
            [r["after"]["subsets"][v][metric] - r["sft"]["subsets"][v][metric]
             for r in results["runs"]]
        )
        for v in verifiers
    )  # fmt: skip
    lines += [
        "",
        f"Per verifier, GRPO's change on the held-out prompts: {per_verifier}.",
        "",
        f"{met} of {len(results['runs'])} runs meet the bar ({metric} at least "
        f"{bar['min_reward_gain']} above the SFT policy's, format failures at most "
        f"{bar['max_format_failure_rate']}); each run took {minutes(min(seconds))} to "
        f"{minutes(max(seconds))}. `benchmarks/results/{source.name}`: {describe(results)}, "
        f"on {results['machine']['cpu']} ({results['machine']['cores']} cores).",
    ]
    return "\n".join(lines)


def judged_seeds_table(source: Path) -> str:
    """benchmarks/demo.py judged: per seed, the policy paid by the judge taught by verifiers, on
    the held-out prompts the verifiers measure; then the hackable setup the gate must refuse."""
    results = read_json(source)
    bar = results["bar"]
    lines = [
        "| data.seed | paid by | held-out measure, SFT → GRPO | gain | judge pays the held-out "
        "answers, SFT → GRPO | judge agrees with the verifiers on those answers, SFT → GRPO | format "
        "failures | hacking gate | champion | meets the bar |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in [*results["runs"], results["hackable"]]:
        sft, after = run["sft"]["overall"], run["after"]["overall"]
        primary, view = run["primary"], run["judge_view"]
        hackable = run is results["hackable"]
        label = f"{run['seed']}, tiny-hackable¹" if hackable else str(run["seed"])
        agree = [view[label].get("agreement_with_verifiers") for label in ("sft", "after")]
        paid_by = " and ".join(f"`{ref}`" for ref in [run["paid_by"], *run.get("judge_panel", [])])
        lines.append(
            f"| {label} | {paid_by} | {primary} {sft[primary]:.3f} → "
            f"{after[primary]:.3f} | {run['gain']:+.3f} | "
            f"{view['sft']['judge_paid_mean']:.3f} → {view['after']['judge_paid_mean']:.3f} | "
            f"{'–' if None in agree else f'{agree[0]:.0%} → {agree[1]:.0%}'} | "
            f"{run['format_failure_rate']:.3f} | "
            f"{run['hacking_gate'] if run['hacking_gate'] == 'clear' else '**suspected**'} | "
            f"{'yes' if run['champion'] else '**no**'} | "
            f"{'–' if hackable else 'yes' if run['meets_bar'] else '**no**'} |"
        )
    met = sum(run["meets_bar"] for run in results["runs"])
    seconds = [run["seconds"] for run in results["runs"]]
    first = results["runs"][0]
    lines += [
        "",
        f"{met} of {len(results['runs'])} runs meet the bar (held-out verifiable_correct_rate "
        f"at least {bar['min_verifiable_correct_gain']} above the SFT start, format failures at "
        f"most {bar['max_format_failure_rate']}, {bar['judge_paid']}, the gate {bar['gate']}). "
        f"The first run trained its judge{'s' if first.get('judge_panel') else ''} first: "
        f"{'yes' if first['trained_the_judge_first'] else '**no**'}; it took "
        f"{minutes(first['seconds'])}, the others {minutes(min(seconds[1:] or seconds))} to "
        f"{minutes(max(seconds[1:] or seconds))}. ¹ `make demo`'s answer/non-answer judge "
        "paying a policy on its own questions (held-out measure: `reference_f1`). "
        f"`benchmarks/results/{source.name}`: {describe(results)}, on "
        f"{results['machine']['cpu']} ({results['machine']['cores']} cores).",
    ]
    per_verifier = [
        f"- {run['seed']}: "
        + ", ".join(
            f"{v} ({int(after['n'])} prompts) {run['sft']['subsets'][v][run['primary']]:.3f} → "
            f"{after[run['primary']]:.3f}"
            for v, after in sorted(run["after"].get("subsets", {}).items())
        )
        for run in results["runs"]
        if run["after"].get("subsets")
    ]
    if per_verifier:
        lines += ["", "Per verifier, the held-out measure SFT → GRPO, per run:", "", *per_verifier]
    said = [
        f"- {run['seed']}{', tiny-hackable' if run is results['hackable'] else ''}: "
        f"{cell(run['hacking_gate_says'])}"
        for run in [*results["runs"], results["hackable"]]
        if run.get("hacking_gate_says")
    ]
    if said:
        lines += [
            "",
            "What the hacking gate said (`judgeflow.reward.hacking`), per run:",
            "",
            *said,
        ]
    return "\n".join(lines)


def judged_examples(source: Path) -> str:
    """benchmarks/demo.py judged: the first held-out questions, answered by the SFT policy and
    by the judge-paid policy of the first seed (the verifiers' verdict beside each), and by the
    tiny-hackable policy."""
    hacked = read_json(source)["hackable"]

    def paid(a: Mapping[str, Any]) -> str:
        return f"{cell(a['answer'])} (judge {a['judge_paid']:.2f}, F1 {a['reference_f1']:.2f})"

    lines = judged_seed_examples(source).splitlines()
    hackable = "| question (reference) | SFT policy | GRPO policy, tiny-hackable |"
    lines += ["", *_answers_table(hackable, hacked["examples"], paid)]
    return "\n".join(lines)


def judged_seed_examples(source: Path) -> str:
    """benchmarks/demo.py judged: the first held-out questions, answered by the SFT policy and by
    the judge-paid policy of the first seed: the verifiers' verdict and what the judge would pay
    beside each."""
    first = read_json(source)["runs"][0]

    def verified(a: Mapping[str, Any]) -> str:
        judge = a.get("judge_paid")  # what the judge would pay it (it never paid held-out rows)
        would = f", the judge would pay {judge:.2f}" if judge is not None else ""
        return f"{cell(a['answer'])} ({'right' if a['verifiers'] else 'wrong'}{would})"

    header = (
        f"| question (right answer) | SFT policy | GRPO policy paid by the judge (seed "
        f"{first['seed']}) |"
    )
    return "\n".join(_answers_table(header, first["examples"], verified))


def _answers_table(
    header: str, examples: Mapping[str, Any], shown: Callable[[Mapping[str, Any]], str]
) -> list[str]:
    """One row per held-out question: the SFT policy's answer and the trained policy's, each as
    `shown` writes it."""
    lines = [header, "|---|---|---|"]
    for sft, after in zip(examples["sft"], examples["after"], strict=True):
        lines.append(
            f"| {cell(sft['question'])} ({cell(sft['reference'])}) | {shown(sft)} | {shown(after)} |"
        )
    return lines


def judge_throughput_table(source: Path) -> str:
    """benchmarks/run.py --only judge-reward: rollouts a judge scores per second, batched per
    step against one call per rollout."""
    results = read_json(source)
    lines = [
        "| judge | rollouts | one by one | batched per step | speed-up |",
        "|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        lines.append(
            f"| {row['judge']} | {row['rollouts']} | {row['one_by_one_per_s']:.1f}/s | "
            f"{row['batched_per_s']:.1f}/s (batch {row['batch_size']}) | "
            f"×{row['batched_per_s'] / row['one_by_one_per_s']:.1f} |"
        )
    lines += [
        "",
        f"`benchmarks/results/{source.name}`: {describe(results)}, on "
        f"{results['machine']['cpu']} ({results['machine']['cores']} cores).",
    ]
    return "\n".join(lines)


def rlvr_rules_table(source: Path) -> str:
    """benchmarks/demo.py rlvr-rules: what one-line rules score on the held-out prompts."""
    results = read_json(source)["rules"]
    metric = "verifiable_correct_rate"
    verifiers = sorted(next(iter(results.values()))["subsets"])
    lines = [
        f"| rule | {metric} | " + " | ".join(verifiers) + " |",
        "|---|---|" + "---|" * len(verifiers),
    ]
    for rule, scored in results.items():
        per = " | ".join(f"{scored['subsets'][v][metric]:.3f}" for v in verifiers)
        lines.append(f"| {cell(rule)} | {scored['overall'][metric]:.3f} | {per} |")
    return "\n".join(lines)


def gpu_policy_examples(source: Path) -> str:
    """benchmarks/gpu_policy.py: held-out questions answered by the SFT start and, per seed, by
    the policy the tiny judge paid (the verifiers' verdict beside each), from the GPU runs."""
    results = read_json(source)
    judged = [r for r in results["runs"] if r.get("kind") == "judged" and "after" in r]
    seeds = " | ".join(f"paid by the judge, seed {r['seed']}" for r in judged)
    lines = [f"| question (right answer) | SFT start | {seeds} |",
             "|---|---|" + "---|" * len(judged)]  # fmt: skip

    def shown(example: Mapping[str, Any]) -> str:
        verdict = "right" if example["reward"] > 0 else "wrong"
        return f"`{cell(example['completion'])}` ({verdict})"

    for i, start in enumerate(judged[0]["before"]["examples"]):
        question = cell(start["question"].split("?")[0] + "?")
        right = cell(", ".join(start["label"]))
        after = " | ".join(shown(r["after"]["examples"][i]) for r in judged)
        lines.append(f"| {question} ({right}) | {shown(start)} | {after} |")
    return "\n".join(lines)
