"""rlvr-judged: a policy trained with GRPO, paid by a judge judgeflow trained.

[train the judge (and its panel's), when it has no champion and the recipe says how]
→ pin the judge → download
→ prepare → check the judge's training questions → evaluate (before)
→ [SFT → evaluate (sft)] → train (GRPO, paid by the judge and the verifiers) → evaluate (after)
→ the hacking gate → register (no champion when the gate suspects the policy) → log

The steps between prepare and register are the GRPO pipelines' own (flows/pipeline_run.py); what
only a judge-paid policy does (pinning the judge, the judge's training questions, the hacking
gate) is here.

`reward.judge` names the judge (`models:/judge-grpo-pointwise@champion` by default); the run pins
the version it resolves to, so the MLflow run, the cache keys and the registered policy all name
one judge (`judgeflow.reward.judge`). Rows whose `dataset` is one of `reward.judge_datasets` are
scored by it, all rollouts of a step at once; other rows by their verifiers. The evaluations
report what the judge paid (`reward_mean`, `judge_reward_mean`) beside `reference_f1`, the answers
against the rows' references, which the judge never sees. The hacking gate
(`judgeflow.evaluation.hacking`) decides before the registry: a policy whose independent measure
did not improve with confidence over its start, or whose answers degenerated, is `suspected`
(tag `judgeflow.reward.hacking`, the summary's `hacking`) and is not made champion.
"""

from typing import Any

from prefect import flow, get_run_logger

from flows.judge_grpo import judge_grpo
from flows.pipeline_run import PipelineRun, finish_grpo, fit_steps, prepare_steps, register_steps
from judgeflow.config import load_config
from judgeflow.evaluation.hacking import hacking_gate
from judgeflow.registry.judge_first import judge_trained, judges_to_train
from judgeflow.registry.paying_judge import pin_judge
from judgeflow.retries import retried
from judgeflow.stages import records
from tasks.train import cancel_submitted_jobs


@flow(
    name="rlvr-judged",
    log_prints=True,
    on_cancellation=[cancel_submitted_jobs],
    on_crashed=[cancel_submitted_jobs],
)
def rlvr_judged(
    recipe: str = "rlvr-judged",
    profile: str | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """`overrides` are `dotted.key=value` strings, as `judgeflow run --set` takes them."""
    logger = get_run_logger()
    cfg = load_config(recipe, profile=profile, overrides=overrides or [], report=logger.warning)
    if cfg.mode != "rlvr" or not cfg.reward.paid_by_judge:
        raise ValueError(
            f"recipe {recipe!r} is not judge-paid (mode={cfg.mode}, no reward.judge): "
            "the rlvr-judged flow trains a policy a judge pays; run it with the rlvr flow"
        )
    # A judge with no champion yet, whose recipe the policy's names, is trained first (each of
    # a panel's judges too, apart)
    for first in retried(lambda: judges_to_train(cfg), "look up the paying judges"):
        logger.info("%s has no champion yet: training it first (%s)", first.name, first.command)
        judge_trained(
            first, judge_grpo(recipe=first.recipe, profile=first.profile, overrides=first.overrides)
        )
    # The judge version `reward.judge` resolves to, pinned: the cache keys and every stage name it
    cfg, judge = retried(lambda: pin_judge(cfg), "resolve the paying judge")
    with PipelineRun(cfg, tags=judge.tags() if judge else None) as run:
        data = prepare_steps(run, cfg)
        overlap = None
        if judge is not None and judge.weights:  # evaluated on questions the judge trained on?
            overlap = records.record_judge_overlap(run.tracker, cfg, str(judge.weights), data)
        models = fit_steps(run, cfg, data)
        # Did the policy answer better by a measure the judge never sees, without degenerating?
        hacking = hacking_gate(
            (models.start or {}).get("rows", []), (models.after or {}).get("rows", []),
            run.metrics, start=models.start_label,
        )  # fmt: skip
        records.record_hacking(run.tracker, hacking)
        (logger.warning if hacking["status"] != "clear" else logger.info)(
            "hacking gate: %s", hacking["message"]
        )
        said = {
            "suspected": "reward hacking suspected",
            "unchecked": "the hacking gate could not check it",
        }
        refusal = f"{said.get(hacking['status'])} ({'; '.join(hacking['reasons'])})"
        register_steps(run, cfg, models, refusal if hacking["status"] != "clear" else None)
    paid = {"paid_by": judge.to_dict(), "judge_overlap": overlap} if judge else {}
    return finish_grpo(run, models, hacking=hacking, **paid)
