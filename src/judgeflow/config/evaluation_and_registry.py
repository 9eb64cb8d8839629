"""How a trained model is judged and kept: its evaluation, and the MLflow registry's champion gate
that reads it."""

from __future__ import annotations

from pydantic import Field, model_validator

from judgeflow.config.section import Section


class EvaluationConfig(Section):
    """The judge's evaluation before training, after SFT and after GRPO."""

    enabled: bool = Field(
        True, description="evaluate the judge before training, after SFT and after GRPO"
    )
    gpus: int = Field(
        1, ge=0, description="GPUs of the evaluation job, on one node (not the training allocation)"
    )
    max_new_tokens: int = Field(2048, gt=0, description="longest generated answer, in tokens")
    temperature: float = Field(0.0, ge=0, description="sampling temperature; 0: greedy")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling share")
    limit: int | None = Field(None, gt=0, description="evaluate at most this many rows")
    batch_size: int = Field(
        8,
        gt=0,
        description="prompts per generation batch (TRL runs; verl uses grpo.val_batch_size)",
    )
    samples: int = Field(
        1, gt=0, description="completions per item, averaged; >1 needs temperature"
    )
    rows_per_verl_run: int = Field(
        4096,
        gt=0,
        description="judging on GPUs (verl): rows one verl run judges; verl and vLLM start "
        "once a run, and a lost node loses at most one run's rows",
    )
    allow_overlap: bool = Field(
        False,
        description="score rows whose prompt the model trained on (reported) instead of refusing",
    )

    @model_validator(mode="after")
    def _sampling(self) -> EvaluationConfig:
        if self.samples > 1 and self.temperature == 0:
            raise ValueError(
                "evaluation.samples > 1 needs evaluation.temperature > 0 (greedy repeats)"
            )
        return self


class RegisterConfig(Section):
    """The MLflow model registry: every trained model becomes a version; `champion` moves only
    to a version that beats the current champion on the same evaluation."""

    enabled: bool = Field(True, description="register the trained model(s) as MLflow versions")
    model_name: str | None = Field(
        None, description="registered model; unset: the recipe name (SFT models: <name>-sft)"
    )
    primary_metric: str | None = Field(
        None,
        description="the gate's metric; unset: exact_match (pointwise), consistent_accuracy "
        "(pairwise), ranking_accuracy (grrm)",
    )
    margin: float = Field(
        0.0, ge=0, description="the new version must beat the champion by more than this"
    )
    force: bool = Field(False, description="promote whatever the numbers say (recorded as forced)")
