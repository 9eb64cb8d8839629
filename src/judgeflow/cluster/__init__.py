"""Where a stage runs: this machine or a Slurm allocation (submitit), with Ray inside.

handle = submit(spec, cluster_config)      # returns at once
result = watch(handle, on_log=print)       # or handle.result()
"""

from judgeflow.cluster.job import JobFailed, JobSpec
from judgeflow.cluster.monitor import JobProgress, watch
from judgeflow.cluster.submit import JobHandle, JobState, render_sbatch, submit

__all__ = [
    "JobFailed",
    "JobHandle",
    "JobProgress",
    "JobSpec",
    "JobState",
    "render_sbatch",
    "submit",
    "watch",
]
