"""Running a judge over rows and what is made of its verdicts.

- `judge`: a judge's completions scored by the same reward code training is paid by
- `metrics`: the counts per mode (primary metric first), from the scored rows
- `plots`: the evaluation's files (predictions, details, PNGs) for a folder of artifacts
- `decontamination`: what a model trained on (its lineage file) and the check that evaluation
  never scores a model on a prompt it trained on
"""

from judgeflow.evaluation.judge import (
    JudgeEvaluation,
    evaluate_judge,
    evaluation_rows,
    judge_rows,
    params_from,
    read_rows,
    score_judgements,
)
from judgeflow.evaluation.metrics import PRIMARY_METRIC
from judgeflow.evaluation.plots import write_evaluation_artifacts

__all__ = [
    "PRIMARY_METRIC",
    "JudgeEvaluation",
    "evaluate_judge",
    "evaluation_rows",
    "judge_rows",
    "params_from",
    "read_rows",
    "score_judgements",
    "write_evaluation_artifacts",
]
