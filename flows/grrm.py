"""grrm: a group ranking reward model for machine translation.

    download → prepare (SFT, RL train, RL test) → SFT → evaluate → RLVR from the SFT model → evaluate
      → register → log

`stage` picks the part to run: `sft`, `rlvr` or `full`. `rlvr` starts from the newest SFT model of
the same lineage (same data and SFT settings, found in MLflow), or from `model.path` when an
override sets it. Every stage is cached as in judge-grpo: an unchanged retraining submits no job.
`register` makes the SFT model a version of `grrm-sft` and the RLVR model one of `grrm` (its parent
the SFT version); `champion` moves only to a version better on the same evaluation.
With `data.shards` > 1 the augmented RL train split is prepared by the `prepare-grrm-rl-sharded`
subflow on Ray (`data.ray_address`, local by default) first; its bytes are the same either way.
"""

from typing import Any, Literal

from prefect import flow, get_run_logger

from flows.pipeline_run import PipelineRun
from flows.prepare_sharded import prepare_rl_train
from judgeflow.config import load_config, with_policy
from judgeflow.stages import val_source_config
from tasks.data import download
from tasks.grrm import find_sft_model, prepare_grrm
from tasks.policies import cached
from tasks.train import cancel_submitted_jobs


@flow(
    name="grrm",
    log_prints=True,
    on_cancellation=[cancel_submitted_jobs],
    on_crashed=[cancel_submitted_jobs],
)
def grrm(
    recipe: str = "grrm-full",
    stage: Literal["sft", "rlvr", "full"] = "full",
    profile: str | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    report = get_run_logger().warning
    cfg = load_config(recipe, profile=profile, overrides=overrides or [], report=report)
    model_dir = cfg.model.path
    with PipelineRun(cfg) as run:
        manifest = run.step("download", cached(download), cfg)
        rl_train = prepare_rl_train(run.steps, cfg, manifest)  # data.shards > 1: on Ray
        val_manifest = None
        if cfg.data.val_source:
            val_manifest = run.step("download[val]", cached(download), val_source_config(cfg))
        data = run.step("prepare", cached(prepare_grrm), cfg, manifest, rl_train, val_manifest)
        run.record_grrm_data(manifest, data)

        if stage in ("sft", "full"):
            tuned = run.sft(cfg, data.sft_file)
            model_dir = tuned.model_dir
            tuned_eval = run.evaluate("sft", with_policy(cfg, model_dir), model_dir, data.rl)
            run.register("sft", cfg, data.rl, model_dir, tuned_eval)
        elif not any(o.startswith("model.path=") for o in overrides or []):
            model_dir = find_sft_model(cfg, data.sft_file)  # RLVR only: this lineage's SFT

        if stage in ("rlvr", "full"):
            rl_cfg = with_policy(cfg, model_dir)
            if stage == "rlvr":
                run.evaluate("before", rl_cfg, model_dir, data.rl)
            trained = run.train(rl_cfg, data.rl)
            model_dir = trained.model.model_dir
            after = run.evaluate("after", rl_cfg, model_dir, data.rl)
            run.register("final", rl_cfg, data.rl, model_dir, after)

    return run.finish(stage=stage, checkpoint=model_dir)
