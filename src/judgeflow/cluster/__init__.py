"""Where a stage runs: this machine or a Slurm allocation (submitit), with Ray inside.

handle = submit(spec, cluster_config)      # returns at once
result = watch(handle, on_log=print)       # or handle.result()
"""

from judgeflow.cluster.monitor import StageProgress, watch
from judgeflow.cluster.stage import StageFailed, StageSpec
from judgeflow.cluster.submit import JobState, StageHandle, render_sbatch, submit

__all__ = [
    "JobState",
    "StageFailed",
    "StageHandle",
    "StageProgress",
    "StageSpec",
    "render_sbatch",
    "submit",
    "watch",
]
