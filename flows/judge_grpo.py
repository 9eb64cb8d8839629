"""judge-grpo: train a pointwise or pairwise judge with GRPO.

download → prepare → evaluate (before) → [SFT → evaluate (sft)] → train (GRPO) → evaluate (after)
  → register → log

With `sft.enabled`, LLaMA-Factory fine-tunes model.path on the `messages` rows of `sft.source`
first, and GRPO starts from that model (lineage tags on the MLflow run).

`register` makes each trained model an MLflow model version (`judge-grpo-<mode>`, the SFT model
`judge-grpo-<mode>-sft`) with its lineage; `champion` moves to it only when it beats the current
champion on the same evaluation (tasks/register.py).

Every stage is cached on what it depends on (tasks/policies.py, judgeflow/caching.py): a
scheduled retraining on unchanged data reuses every stage and submits no job. The run's
`run-summary` artifact says, per stage, whether it ran or came from the cache.
"""

from typing import Any

from prefect import flow, get_run_logger

from flows.pipeline_run import PipelineRun
from judgeflow.config import load_config, with_policy
from judgeflow.modes import JudgeMode
from judgeflow.stages import sft_source_config, val_source_config
from tasks.data import download, prepare
from tasks.policies import cached
from tasks.sft import prepare_sft
from tasks.train import cancel_submitted_jobs


@flow(
    name="judge-grpo",
    log_prints=True,
    on_cancellation=[cancel_submitted_jobs],
    on_crashed=[cancel_submitted_jobs],
)
def judge_grpo(
    mode: JudgeMode = "pointwise",
    recipe: str | None = None,
    profile: str | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """`recipe` defaults to grpo-<mode>; `overrides` are `dotted.key=value` strings."""
    report = get_run_logger().warning
    cfg = load_config(
        recipe or f"grpo-{mode}", profile=profile, overrides=overrides or [], report=report
    )
    with PipelineRun(cfg) as run:
        manifest = run.step("download", cached(download), cfg)
        val_manifest = None
        if cfg.data.val_source:
            val_manifest = run.step("download[val]", cached(download), val_source_config(cfg))
        data = run.step("prepare", cached(prepare), cfg, manifest, val_manifest)
        run.record_data(manifest, data)
        run.evaluate("before", cfg, cfg.model.path, data)

        rl_cfg, tuned, mid = cfg, None, None
        if cfg.sft.enabled:
            sft_manifest = run.step("download[sft]", cached(download), sft_source_config(cfg))
            sft_data = run.step("prepare[sft]", cached(prepare_sft), cfg, sft_manifest)
            tuned = run.sft(cfg, sft_data.file, sft_data)
            rl_cfg = with_policy(cfg, tuned.model_dir)  # GRPO starts from the SFT model
            mid = run.evaluate("sft", rl_cfg, tuned.model_dir, data)

        trained = run.train(rl_cfg, data)
        after = run.evaluate("after", rl_cfg, trained.model.model_dir, data)

        if tuned:
            run.register("sft", cfg, data, tuned.model_dir, mid)
        run.register("final", rl_cfg, data, trained.model.model_dir, after)

    return run.finish(
        trained_in=[trained.mlflow_run_id, tuned.mlflow_run_id if tuned else ""],
        checkpoint=trained.model.model_dir,
        global_step=trained.model.global_step,
    )
