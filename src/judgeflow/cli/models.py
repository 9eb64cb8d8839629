"""`judgeflow evaluate` and `judgeflow models`: what a model measures. `evaluate` scores a judge
or a policy on a data file (the work is `judgeflow.cli.evaluate`'s) and records the numbers on
its registered version; `models` lists the registered versions with their gate's metric, or
prints one version's card. `typer_app` registers the commands."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from judgeflow.cli.common import (
    ModelArgument,
    ProfileOption,
    SetOption,
    fail,
    user_errors,
    wide_console,
)
from judgeflow.config import list_recipes, load_config
from judgeflow.config.hints import config_override
from judgeflow.modes import MODES
from judgeflow.registry.paying_judge import TAG_REWARD_JUDGE, TAG_REWARD_JUDGE_PANEL

#: The command line's choices, made from `judgeflow.modes` (typer needs an Enum).
ModeChoice = StrEnum("ModeChoice", {m: m for m in MODES})  # type: ignore[misc]


def evaluate_cmd(
    model: ModelArgument,
    data: Annotated[
        str,
        typer.Option(
            "--data",
            "-d",
            help="Prepared verl parquet or raw judge, GRRM or RLVR data (any source URI).",
        ),
    ],
    mode: Annotated[
        ModeChoice | None,
        typer.Option(help="The model's kind (rlvr: a policy); a registered version knows its own."),
    ] = None,
    recipe: Annotated[
        str | None, typer.Option(help="Recipe for the settings (default: the version's own).")
    ] = None,
    profile: ProfileOption = None,
    set_: SetOption = None,
    allow_overlap: Annotated[
        bool, typer.Option(help="Score rows the model trained on (reported) instead of refusing.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Folder for predictions, details, PNGs.")
    ] = None,
) -> None:
    """Evaluate a judge or an RLVR policy: metrics by subset, predictions, pictures (+ MLflow)."""
    from judgeflow.cli.evaluate import default_output_dir, evaluate_model
    from judgeflow.config.secrets import keep_url_credentials

    overrides = [*(set_ or []), *(["evaluation.allow_overlap=true"] if allow_overlap else [])]
    out_dir = output or default_output_dir()
    data = keep_url_credentials(data)  # shown and stored without them; the download finds them
    try:
        result = evaluate_model(
            model, data, mode=mode.value if mode else None, recipe=recipe, profile=profile,
            overrides=overrides, output_dir=out_dir,
        )  # fmt: skip
    except user_errors() as exc:
        raise fail(exc, config_override) from None
    _print_evaluation(result, out_dir)


def _print_evaluation(result: Any, out_dir: Path) -> None:
    from judgeflow.console import evaluation_tables

    out = wide_console()
    named = f"{result.model}" + (f" ({result.version})" if result.version else "")
    out.rule(f"[bold]{named}")
    out.print(f"weights   : {result.model_dir}")
    out.print(f"evaluated : {result.eval_file} ({int(result.metrics.get('eval/n', 0))} rows)")
    overlap = result.details.get("overlap") or {}
    checked = result.details.get("decontamination")
    if checked == "unchecked":
        out.print(
            "[yellow]overlap   : unchecked: the model has no lineage file (judgeflow-lineage.json: "
            "a base model, or weights without it), so what it trained on is unknown[/]"
        )
    elif checked == "overlap-allowed":
        out.print(
            f"[yellow]overlap   : {overlap['overlapping_rows']} rows the model trained on were "
            f"scored (--allow-overlap); kept as evaluation set {result.details.get('eval_set')}, "
            "apart from clean numbers[/]"
        )
    else:
        out.print("overlap   : checked: none with the model's training data")
    for table in evaluation_tables(result, result.mode):
        out.print(table)
    if result.mlflow_run_id:
        out.print(f"MLflow run: {result.mlflow_run_id} (experiment judgeflow-evaluate)")
    out.print(f"files     : {out_dir}")


def models_cmd(
    name: Annotated[
        str | None,
        typer.Argument(
            help="A recipe (grpo-pointwise) or registered model; default: all. "
            "A version (models:/NAME@champion, models:/NAME/2): its model card."
        ),
    ] = None,
) -> None:
    """Registered judges and policies: versions, aliases, the gate's metric, decision and
    lineage (which judge paid a policy, which policies a judge paid); for one version, its model
    card (lineage, evaluation, how to use it)."""
    from rich.table import Table

    from judgeflow.config.redaction import strip_credentials
    from judgeflow.registry.models import ModelRegistry

    registry = ModelRegistry()
    if name is not None and name.startswith("models:/"):
        try:
            version = registry.resolve(name)
        except user_errors() as exc:
            raise fail(exc) from None
        _print_model_card(version, name)
        return
    try:
        names = _registered_names(registry, name)
    except user_errors() as exc:
        raise fail(exc) from None
    out = wide_console()
    if not names:
        out.print("no registered models yet: a pipeline run registers its model at the end")
        return
    paid = _policies_paid(registry)
    for registered in names:
        table = Table(title=registered, title_justify="left")
        columns = ["version", "aliases", "metric", "value", "decision", "data", "parent", "run"]
        versions = registry.versions(registered)
        judge_of = any(v.tags.get(TAG_REWARD_JUDGE) for v in versions)
        paid_any = any(paid.get(v.ref) for v in versions)
        columns += ["paid by"] * judge_of + ["paid policies"] * paid_any
        for column in columns:
            table.add_column(column, overflow="fold")
        for v in versions:
            metric = v.tags.get("judgeflow.primary_metric", "")
            value = (v.evaluation(v.tags.get("judgeflow.eval_set")) or {}).get(metric)
            decision = "forced" if v.tags.get("judgeflow.forced") == "true" else (
                "promoted" if v.tags.get("judgeflow.promoted") == "true" else "challenger"
            )  # fmt: skip
            table.add_row(
                v.version, ", ".join(v.aliases), metric,
                "" if value is None else f"{value:.4f}", decision,
                strip_credentials(v.tags.get("judgeflow.data.source", "")),  # older versions' tags
                v.tags.get("judgeflow.parent_version", ""),
                (v.run_id or "")[:12],
                *([v.tags.get(TAG_REWARD_JUDGE, "").removeprefix("models:/")] if judge_of else []),
                *([", ".join(paid.get(v.ref, []))] if paid_any else []),
            )  # fmt: skip
        out.print(table)


#: The lineage a version's card shows: tag -> label.
CARD_LINEAGE = {
    "judgeflow.recipe": "recipe",
    "judgeflow.data.source": "data",
    "judgeflow.data.manifest_hash": "data hash",
    "judgeflow.config_hash": "config hash",
    "judgeflow.code_version": "code",
    "judgeflow.git_commit": "git commit",
    "judgeflow.start_model": "started from",
    "judgeflow.parent_version": "parent version",
    "judgeflow.mlflow_run_id": "MLflow run",
    "judgeflow.slurm_job_ids": "Slurm jobs",
    "judgeflow.decision": "gate",
    TAG_REWARD_JUDGE: "paid by judge",
    "judgeflow.reward.judge_run_id": "judge's run",
    "judgeflow.reward.judge_data_hash": "judge's data",
}


def _print_model_card(version: Any, uri: str) -> None:
    """One version: what it is, where it came from, how it measured, and how to use it."""
    from rich.markdown import Markdown

    from judgeflow.config.redaction import strip_credentials

    out = wide_console()
    aliases = f" ({', '.join(version.aliases)})" if version.aliases else ""
    out.rule(f"[bold]{version.ref}{aliases}")
    out.print(f"{'mode':<15}: {version.tags.get('judgeflow.mode', '')}")
    out.print(f"{'weights':<15}: {strip_credentials(version.model_uri)}")
    for tag, label in CARD_LINEAGE.items():
        if version.tags.get(tag):
            out.print(f"{label:<15}: {strip_credentials(version.tags[tag])}", highlight=False)
    from judgeflow.registry.models import ModelRegistry

    policies = _policies_paid(ModelRegistry()).get(version.ref)
    if policies:
        out.print(f"{'paid policies':<15}: {', '.join(policies)}", highlight=False)
    if version.description:
        out.print(Markdown(version.description))
    out.print(f"\n[bold]Use it[/]: mlflow.pyfunc.load_model({uri!r}).predict(frame)")
    out.print(f"  REST : mlflow models serve -m {uri} --env-manager local -p 5001")
    out.print(f"  batch: judgeflow judge {uri} --data FILE --output verdicts.parquet")


def _policies_paid(registry: Any) -> dict[str, list[str]]:
    """Judge version (`NAME/VERSION`) -> the policy versions it paid (their
    `judgeflow.reward.judge` tag, or `judgeflow.reward.judge_panel`'s list), across every
    registered model."""
    paid: dict[str, list[str]] = {}
    for name in registry.names():
        for v in registry.versions(name):
            panel = v.tags.get(TAG_REWARD_JUDGE_PANEL, "").split(", ")
            for judge in filter(None, [v.tags.get(TAG_REWARD_JUDGE), *panel]):
                paid.setdefault(judge.removeprefix("models:/"), []).append(v.ref)
    return {judge: sorted(policies) for judge, policies in paid.items()}


def _registered_names(registry: Any, name: str | None) -> list[str]:
    """All judgeflow models; a recipe's model and its SFT model; or one registered name."""
    if name is None:
        return list(registry.names())
    if name in list_recipes():
        base = load_config(name).registered_model_name
        return [n for n in (base, f"{base}-sft") if registry.versions(n)] or [base]
    return [name]
