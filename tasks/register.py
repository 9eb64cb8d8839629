"""Register tasks: a trained model becomes an MLflow model version; the champion gate decides.

`register` records a model version and the gate's decision; the flows call it through
`flows.pipeline_run.register_model`, which first evaluates the current champion when it has no
numbers on this run's evaluation set (`evaluate[champion]`, cached like any evaluation). The
decision shows in the `registry` artifact, the run summary and the flow's return value.

All three steps run under one lock per registered model (`registry_lock`, in the core's
`stages.register`): a run that found and measured champion v1 must decide against v1, not
against a v2 another run promoted meanwhile. A second run registering the same model waits for
the first run's decision (and logs that it waits), then sees it. `register` refuses to run
without it.
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from judgeflow.cluster import submitted
from judgeflow.config import RunConfig
from judgeflow.stages.register import (
    holds_registry_lock,
    register_stage,
    registered_name,
)
from tasks.policies import BACKOFF, JITTER, retry_transient

_retrying: dict[str, Any] = {
    "retries": 3,
    "retry_delay_seconds": BACKOFF,
    "retry_jitter_factor": JITTER,
    "retry_condition_fn": retry_transient,
}


@task(name="register", task_run_name="register[{kind}]", **_retrying)
def register(
    cfg: RunConfig,
    run_id: str,
    model_dir: str,
    kind: str,
    evaluation: dict[str, Any] | None,
    champion_evaluation: dict[str, Any] | None = None,
    comparison: list[dict[str, Any]] | None = None,
    refusal: str | None = None,
) -> dict[str, Any]:
    """The model version and the gate's decision (`promoted`, `reason`, the numbers);
    `refusal` keeps it from becoming champion (a judge-paid policy the hacking gate suspects).

    Call it under `registry_lock` (`register_model` does, from the champion's lookup on): the
    gate reads the champion, then moves the alias, and two runs in between would both see the
    old champion (or none) and the later alias would win, whatever its numbers. Called without
    the lock, it fails before reading anything.
    """
    name = registered_name(cfg, kind)
    if not holds_registry_lock(name):
        raise RuntimeError(
            f"register[{kind}] was called without the lock of registered model {name}: call it "
            "through register_model (flows/pipeline_run.py), which holds registry_lock from the "
            "champion's lookup to the decision"
        )
    jobs = (
        submitted.by_stage(cfg.cluster.shared_dir, str(flow_run.get_id()))
        if cfg.cluster.backend != "local"
        else {}
    )
    decision = register_stage(
        cfg,
        run_id=run_id,
        model_dir=model_dir,
        kind=kind,
        evaluation=evaluation,
        champion_evaluation=champion_evaluation,
        job_ids=jobs.get("sft" if kind == "sft" else "train", []),
        comparison=comparison or [],
        refusal=refusal,
    )
    create_markdown_artifact(
        key=f"registry-{kind}",
        markdown=_markdown(decision.to_dict()),
        description=f"{decision.name} v{decision.version}: {decision.verdict}",
    )
    return decision.to_dict()


def _markdown(decision: dict[str, Any]) -> str:
    def shown(value: Any) -> str:
        return "–" if value is None else f"{value:.4f}"

    champion = decision.get("champion_version")
    return "\n".join(
        [
            f"# {decision['name']} v{decision['version']}: {decision['verdict']}",
            "",
            decision["reason"],
            "",
            "| | version | " + decision["metric"] + " |",
            "|---|---|---|",
            f"| this run | v{decision['version']} | {shown(decision['value'])} |",
            f"| champion before | {'v' + champion if champion else '–'} | "
            f"{shown(decision.get('champion_value'))} |",
            "",
            f"margin {decision['margin']:g}; forced: {str(decision['forced']).lower()}; "
            f"evaluation set `{decision.get('eval_set') or '–'}`; "
            f"decontamination: {decision.get('decontamination') or '–'}",
            "",
            f"[the version in MLflow]({decision['url']})" if decision.get("url") else "",
        ]
    )
