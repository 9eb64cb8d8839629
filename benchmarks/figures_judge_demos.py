"""The regions rendered from the judge demos' results (`benchmarks/demo.py` seeds and rules for
pointwise, pairwise and GRRM; `benchmarks/zero_variance.py`)."""

from __future__ import annotations

from pathlib import Path

from figures_format import REPO, cell, raised, read_json
from stamp import describe

#: The tiny demo's validation subset of non-answers phrased as in no training row, as the
#: evaluation's metric keys spell it (`subset_key`).
UNSEEN_KEY = "tinyjudge_unseen-non-answer"


def demo_seeds_table(source: Path) -> str:
    """benchmarks/demo.py seeds: per mode and seed, the SFT model and the GRPO judge."""
    results = read_json(source)
    bar = results["bar"]
    primary = {"pointwise": "exact_match", "pairwise": "consistent_accuracy"}
    lines = [
        "| mode | data.seed | reward_mean SFT → GRPO | gain | format failures after | "
        "primary metric SFT → GRPO | unseen non-answers SFT → GRPO | meets the bar |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in results["runs"]:
        sft, after, metric = run["sft"], run["after"], primary[run["mode"]]
        lines.append(
            f"| {run['mode']} | {run['seed']} "
            f"| {sft['overall']['reward_mean']:.3f} → {after['overall']['reward_mean']:.3f} "
            f"| {run['reward_gain']:+.3f} | {after['overall']['format_failure_rate']:.3f} "
            f"| {metric} {sft['overall'][metric]:.3f} → {after['overall'][metric]:.3f} "
            f"| {sft['subsets'][UNSEEN_KEY][metric]:.3f} → {after['subsets'][UNSEEN_KEY][metric]:.3f} "
            f"| {'yes' if run['meets_bar'] else '**no**'} |"
        )
    met = sum(run["meets_bar"] for run in results["runs"])
    moved = [
        run["after"]["subsets"][UNSEEN_KEY][primary[run["mode"]]]
        - run["sft"]["subsets"][UNSEEN_KEY][primary[run["mode"]]]
        for run in results["runs"]
    ]
    lines += [
        "",
        f"On the unseen non-answers GRPO raised the primary metric in {raised(moved)}.",
        "",
        f"{met} of {len(results['runs'])} runs meet the bar (reward_mean at least "
        f"{bar['min_reward_gain']} above the SFT model, format failures at most "
        f"{bar['max_format_failure_rate']}). `benchmarks/results/demo-seeds.json`: "
        f"{describe(results)}, "
        f"{results['seconds'] / 60:.0f} min on {results['machine']['cpu']} "
        f"({results['machine']['cores']} cores).",
    ]
    return "\n".join(lines)


def grrm_seeds_table(source: Path) -> str:
    """benchmarks/demo.py seeds --modes grrm: per seed, the SFT model and the RLVR model."""
    results = read_json(source)
    lines = [
        "| data.seed | ranking_accuracy SFT → RLVR | format failures SFT → RLVR "
        "| reward_mean (0–2) SFT → RLVR |",
        "|---|---|---|---|",
    ]
    moved = []
    for run in results["runs"]:
        sft, after = run["sft"]["overall"], run["after"]["overall"]
        moved.append(after["ranking_accuracy"] - sft["ranking_accuracy"])
        lines.append(
            f"| {run['seed']} | {sft['ranking_accuracy']:.3f} → {after['ranking_accuracy']:.3f} "
            f"| {sft['format_failure_rate']:.3f} → {after['format_failure_rate']:.3f} "
            f"| {sft['reward_mean']:.3f} → {after['reward_mean']:.3f} |"
        )
    groups = int(results["runs"][0]["after"]["overall"]["n"])
    overrides = ", ".join(f"`{o}`" for o in results["overrides"]) or "the profile as shipped"
    lines += [
        "",
        f"With {overrides}: RLVR raised the ranking accuracy in {raised(moved, ',')}; one test "
        f"group of {groups} is {1 / groups:.4f}. `benchmarks/results/{source.name}`: "
        f"{describe(results)}.",
    ]
    return "\n".join(lines)


def demo_rules_table(source: Path) -> str:
    """benchmarks/demo.py rules: each one-line rule's primary metric, overall and per subset."""
    results = read_json(source)["rules"]
    lines = [
        "| rule | pointwise exact_match | … on unseen non-answers | "
        "pairwise consistent_accuracy | … on unseen non-answers |",
        "|---|---|---|---|---|",
    ]
    for rule, modes in results.items():
        pw, pr = modes["pointwise"], modes["pairwise"]
        unseen = "tinyjudge/unseen-non-answer"
        lines.append(
            f"| {cell(rule)} | {pw['overall']['exact_match']:.3f} "
            f"| {pw['subsets'][unseen]['exact_match']:.3f} "
            f"| {pr['overall']['consistent_accuracy']:.3f} "
            f"| {pr['subsets'][unseen]['consistent_accuracy']:.3f} |"
        )
    return "\n".join(lines)


def zero_variance_table(source: Path) -> str:
    """benchmarks/zero_variance.py: the tiny demos with and without zero-variance filtering."""
    results = read_json(source)
    if not results.get("complete"):
        raise ValueError(f"{source}: the benchmark did not finish; run it again")
    lines = [
        "| mode | data.seed | filtering | s per GRPO step | real_batch_size_ratio (mean of steps) "
        "| primary metric SFT → GRPO | format failures after |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in results["runs"]:
        lines.append(
            f"| {run['mode']} | {run['seed']} | {'on' if run['filter_zero_std_samples'] else 'off'} "
            f"| {run['seconds_per_step']:.2f} | {run['mean_real_batch_size_ratio']:.2f} "
            f"| {run['metric']} {run['sft']:.3f} → {run['after']:.3f} "
            f"| {run['after_format_failure_rate']:.3f} |"
        )
    summary = []
    for mode in dict.fromkeys(run["mode"] for run in results["runs"]):
        runs = [r for r in results["runs"] if r["mode"] == mode]
        per = {on: [r for r in runs if r["filter_zero_std_samples"] == on] for on in (False, True)}
        step = {on: sum(r["seconds_per_step"] for r in rs) / len(rs) for on, rs in per.items()}
        match = {on: sum(r["after"] for r in rs) / len(rs) for on, rs in per.items()}
        summary.append(
            f"{mode}: {step[False]:.2f} → {step[True]:.2f} s per step on average "
            f"({(step[True] / step[False] - 1) * 100:+.0f}%), {runs[0]['metric']} after GRPO "
            f"{match[False]:.3f} → {match[True]:.3f} on average over {len(per[True])} seeds"
        )
    lines += [
        "",
        "Without → with filtering: " + "; ".join(summary) + ".",
        "",
        f"`{source.relative_to(REPO)}`: {describe(results)}.",
    ]
    return "\n".join(lines)


def lora_table(source: Path) -> str:
    """benchmarks/lora.py: the tiny pointwise demo with full fine-tuning and with LoRA."""
    results = read_json(source)
    if not results.get("complete"):
        raise ValueError(f"{source}: the benchmark did not finish; run it again")
    lines = [
        "| data.seed | fine-tuning | GRPO trainable parameters | s per GRPO step "
        "| peak RSS SFT / GRPO (MiB) | SFT s | exact_match SFT → GRPO "
        "| reward_mean SFT → GRPO | format failures after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in results["runs"]:
        lines.append(
            f"| {run['seed']} | {'LoRA' if run['lora'] else 'full'} "
            f"| {run['grpo_trainable_params']:,.0f} | {run['grpo_seconds_per_step']:.2f} "
            f"| {run['sft_peak_rss_mib']:.0f} / {run['grpo_peak_rss_mib']:.0f} "
            f"| {run['sft_seconds']:.1f} "
            f"| {run['sft_exact_match']:.3f} → {run['after_exact_match']:.3f} "
            f"| {run['sft_reward_mean']:.3f} → {run['after_reward_mean']:.3f} "
            f"| {run['after_format_failure_rate']:.3f} |"
        )

    def mean(key: str, lora: bool) -> float:
        runs = [r[key] for r in results["runs"] if r["lora"] == lora]
        return sum(runs) / len(runs)

    seeds = len({r["seed"] for r in results["runs"]})
    learnt = sum(
        r["after_exact_match"] > r["sft_exact_match"] for r in results["runs"] if r["lora"]
    )
    lines += [
        "",
        f"Full → LoRA, means over {seeds} seeds: {mean('grpo_seconds_per_step', False):.2f} → "
        f"{mean('grpo_seconds_per_step', True):.2f} s per GRPO step, GRPO peak RSS "
        f"{mean('grpo_peak_rss_mib', False):.0f} → {mean('grpo_peak_rss_mib', True):.0f} MiB, "
        f"exact_match after GRPO {mean('after_exact_match', False):.3f} → "
        f"{mean('after_exact_match', True):.3f}; with LoRA GRPO raised exact_match above the "
        f"SFT model's on {learnt} of {seeds} seeds. LoRA's settings: "
        + ", ".join(f"`{s}`" for s in results["lora_sets"])
        + ".",
        "",
        f"`{source.relative_to(REPO)}`: {describe(results)}.",
    ]
    return "\n".join(lines)
