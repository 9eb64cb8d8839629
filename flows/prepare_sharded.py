"""prepare-grrm-rl-sharded: the GRRM RL preparation of a large input, fanned out over Ray.

    plan (cut at batch boundaries) → prepare shard × N (Ray tasks, in parallel) → merge

The parquet and report are the bytes `prepare_grrm_rl` writes in one process (why:
`judgeflow.data.shards`). The task runner is picked when the flow is called, from the config:
`prepare_rl_train(steps, cfg, manifest)`, the grrm flow's step, runs it with `data.shards` tasks
on a local Ray sized to the shards by default, or on an existing cluster by address
(`data.ray_address`: `ray://head:10001`, `auto`; `RAY_ADDRESS` too, as Ray reads it).

Ray runs the tasks by reference (module and name), so its workers must import `tasks.grrm` and
`judgeflow`: a local Ray starts them with this interpreter, whose editable install puts the
checkout on `sys.path` (nothing is uploaded); a cluster needs judgeflow installed in its image.
The shards' files go next to the output, so with remote workers that must be shared storage.
"""

from __future__ import annotations

import os
from typing import Any

from prefect import Flow, flow
from prefect_ray import RayTaskRunner

from judgeflow.config import RunConfig
from judgeflow.data import GrrmPrepareResult
from judgeflow.stages import grrm_rl_train_preparation
from judgeflow.storage import Manifest
from tasks.grrm import merge_grrm_shards, plan_grrm_shards, prepare_grrm_rl_shard


@flow(name="prepare-grrm-rl-sharded", log_prints=True)
def prepare_grrm_rl_sharded(
    input: str, output: str, shards: int, options: dict[str, Any]
) -> GrrmPrepareResult:
    """`prepare_grrm_rl(input, output, **options)` in `shards` Ray tasks (fewer for a small input)."""
    plan = plan_grrm_shards(input, output, shards, options)
    results = prepare_grrm_rl_shard.map(plan.shards)
    return merge_grrm_shards(plan, results)


def ray_runner(
    shards: int, address: str | None = None, init_kwargs: dict[str, Any] | None = None
) -> RayTaskRunner:
    """A Ray task runner for `shards` shard tasks.

    With an address it connects (and leaves the cluster running); without one it starts a
    local Ray with one CPU per shard up to the machine's count, which the runner shuts down
    when the flow ends. The local dashboard is off (the Prefect UI shows the shards);
    `init_kwargs` go to `ray.init` and override these defaults.
    """
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        return RayTaskRunner(address=address, init_kwargs=init_kwargs)
    local = {"num_cpus": min(shards, os.cpu_count() or 1), "include_dashboard": False}
    return RayTaskRunner(init_kwargs={**local, **(init_kwargs or {})})


def on_ray(
    shards: int, address: str | None = None, init_kwargs: dict[str, Any] | None = None
) -> Flow[..., GrrmPrepareResult]:
    """`prepare_grrm_rl_sharded` with its Ray task runner (see `ray_runner`)."""
    return prepare_grrm_rl_sharded.with_options(
        task_runner=ray_runner(shards, address, init_kwargs)
    )


def prepare_rl_train(
    steps: Any, cfg: RunConfig, manifest: Manifest, init_kwargs: dict[str, Any] | None = None
) -> GrrmPrepareResult | None:
    """The grrm flow's `prepare[rl_train]` step: with `data.shards` > 1, the augmented RL train
    split of `manifest` prepared by `prepare_grrm_rl_sharded` in that many Ray tasks, on
    `data.ray_address` (a local Ray without one), run through `steps` (the flow's
    `StageRecorder`); None with one shard (the prepare stage does it in one process)."""
    if cfg.data.shards <= 1:
        return None
    rl = grrm_rl_train_preparation(cfg, manifest)
    sharded = on_ray(cfg.data.shards, cfg.data.ray_address, init_kwargs)
    shards = cfg.data.shards
    return steps("prepare[rl_train]", sharded, rl.input, rl.output, shards, rl.options)
