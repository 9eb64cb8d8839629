"""Using a trained judge: verdicts on unlabeled rows, and the MLflow model each registered
version is.

- `verdicts`: the prompt the judge was trained on, its reply parsed by the reward's own parser
  (pointwise `score`, pairwise `better` judged in both orders with `consistent`);
- `pyfunc`: `JudgeModel`, the MLflow pyfunc that `mlflow.pyfunc.load_model("models:/…")` and
  `mlflow models serve` load, and `save_judge_model`, which the registry calls for each version.
"""

from judgeflow.inference.verdicts import INPUT_COLUMNS, judge, judge_prompts, parse_reply

__all__ = ["INPUT_COLUMNS", "judge", "judge_prompts", "parse_reply"]
