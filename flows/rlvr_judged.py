"""rlvr-judged: a policy trained with GRPO, paid by a judge judgeflow trained.

pin the judge → download → prepare → check the judge's training questions → evaluate (before)
→ [SFT → evaluate (sft)] → train (GRPO, paid by the judge and the verifiers) → evaluate (after)
→ register → compare the judge's reward with the independent measure → log

The steps between prepare and register are the GRPO pipelines' own (flows/pipeline_run.py); what
only a judge-paid policy does (pinning the judge, the judge's training questions, the hacking
check) is here.

`reward.judge` names the judge (`models:/judge-grpo-pointwise@champion` by default); the run pins
the version it resolves to, so the MLflow run, the cache keys and the registered policy all name
one judge (`judgeflow.reward.judge`). Rows whose `dataset` is one of `reward.judge_datasets` are
scored by it, all rollouts of a step at once; other rows by their verifiers. The evaluations
report what the judge paid (`reward_mean`, `judge_reward_mean`) beside `reference_f1`, the answers
against the rows' references, which the judge never sees: the champion gate uses it, and the run
summary's `hacking` says whether the two moved apart.
"""

from typing import Any

from prefect import flow, get_run_logger

from flows.pipeline_run import PipelineRun, finish_grpo, prepare_steps, train_steps
from judgeflow.config import load_config
from judgeflow.evaluation.hacking import hacking_check
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
    # The judge version `reward.judge` resolves to, pinned: the cache keys and every stage name it
    cfg, judge = retried(lambda: pin_judge(cfg), "resolve the paying judge")
    with PipelineRun(cfg, tags=judge.tags() if judge else None) as run:
        data = prepare_steps(run, cfg)
        overlap = None
        if judge is not None and judge.weights:  # evaluated on questions the judge trained on?
            overlap = records.record_judge_overlap(run.tracker, cfg, str(judge.weights), data)
        models = train_steps(run, cfg, data)
    hacking = hacking_check(run.metrics)  # did the judge's reward and the measure move apart?
    paid = {"paid_by": judge.to_dict(), "judge_overlap": overlap} if judge else {}
    summary = finish_grpo(run, models, hacking=hacking, **paid)
    if hacking.get("status") == "hacked":
        logger.warning(hacking["message"])
    elif hacking.get("message"):
        logger.info("judge-paid: %s", hacking["message"])
    return summary
