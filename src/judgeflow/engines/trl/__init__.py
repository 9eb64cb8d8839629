"""GRPO with TRL's `GRPOTrainer`: the local (CPU / one GPU) engine for the judge recipes.

It reads the same verl RL parquet and scores with the same verl `compute_score` functions as the
cluster engine, so a run here differs from a verl run only in scale. Metrics leave through an
injected sink (the caller decides where they go: MLflow, a list in a test), never through TRL's
own integrations.

    params = params_from(cfg, output_dir)          # mapping: the run config as GRPO knobs
    result = train_grpo(params, train_file, metrics_sink=sink)   # training: resumes on its own

Every optimizer step appends the prepared rows it trained on to `data_order.jsonl` in the output
directory (`read_data_order`): an audit trail of what the model saw, in order, across resumes.
"""

from judgeflow.engines.trl.checkpoints import last_complete_checkpoint
from judgeflow.engines.trl.data_order import DATA_ORDER_FILE, read_data_order
from judgeflow.engines.trl.logs import MetricsSink, Progress, map_trl_logs, step_line
from judgeflow.engines.trl.mapping import GrpoParams, params_from
from judgeflow.engines.trl.reward_adapter import reward_functions
from judgeflow.engines.trl.training import TrainResult, load_rl_parquet, train_grpo

__all__ = [
    "DATA_ORDER_FILE",
    "GrpoParams",
    "MetricsSink",
    "Progress",
    "TrainResult",
    "last_complete_checkpoint",
    "load_rl_parquet",
    "map_trl_logs",
    "params_from",
    "read_data_order",
    "reward_functions",
    "step_line",
    "train_grpo",
]
