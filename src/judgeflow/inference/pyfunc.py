"""Each registered version as a standard MLflow model: `mlflow.pyfunc.load_model("models:/…")`,
`mlflow models serve -m models:/NAME@champion --env-manager local`, Spark UDFs.

The model directory holds no weights: its `model_config` says where they are (the artifact store,
local or s3://) and how the judge was trained (mode, generation length). `load_context` resolves
them, through `ArtifactStore.fetch`'s verified cache for a remote store, and `predict` takes a
DataFrame (`INPUT_COLUMNS`) and returns one verdict per row (`judgeflow.inference.verdicts`).
Asked `params={"identify": true}`, it says instead which weights it serves (`served_model`,
one row per row, nothing generated): what a served judge's client pins a judge-paid run to.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd
from mlflow.models import ModelSignature
from mlflow.pyfunc import PythonModel
from mlflow.types import ColSpec, DataType, ParamSchema, ParamSpec, Schema
from mlflow.types.schema import Array, TensorSpec

from judgeflow.data.io import is_url
from judgeflow.engines.generate import Generator
from judgeflow.inference.verdicts import INPUT_COLUMNS, judge
from judgeflow.storage import local_weights

__all__ = ["JudgeModel", "save_judge_model", "signature"]

_EXAMPLES: dict[str, dict[str, list[Any]]] = {
    "pointwise": {
        "query": ["What is the capital of France?"],
        "response": ["The capital of France is Paris."],
    },
    "pairwise": {
        "query": ["What is the capital of France?"],
        "response_a": ["Paris."],
        "response_b": ["Lyon, I think."],
    },
    "grrm": {
        "source": ["Das Haus ist klein."],
        "translations": [["The house is small.", "The home is little.", "House small is."]],
        "source_lang": ["de"],
        "target_lang": ["en"],
    },
}
#: The model's code as MLflow stores it beside MLmodel; judgeflow must be importable where it loads.
_MODEL_CODE = """\
from mlflow.models import set_model

from judgeflow.inference.pyfunc import JudgeModel

set_model(JudgeModel())
"""
_OUTPUTS: dict[str, list[ColSpec]] = {
    "pointwise": [ColSpec("long", "score", required=False)],
    "pairwise": [ColSpec("string", "better", required=False), ColSpec("boolean", "consistent")],
    "grrm": [
        ColSpec("string", "ranking", required=False),
        ColSpec(Array(DataType.long), "scores", required=False),
    ],
}
#: Input columns that are not strings: GRRM's translations, a list per row.
_LIST_INPUTS = {"translations"}


def signature(mode: str, max_new_tokens: int) -> ModelSignature:
    """Inputs by mode; the verdict, `reasoning` and `valid` out; `max_new_tokens` a parameter,
    and `identify` (the weights served, instead of verdicts)."""
    if mode not in INPUT_COLUMNS:
        raise ValueError(f"mode {mode!r}: judges are pointwise, pairwise or grrm")
    inputs: list[ColSpec | TensorSpec] = [
        ColSpec(Array(DataType.string) if column in _LIST_INPUTS else "string", column)
        for column in INPUT_COLUMNS[mode]
    ]
    return ModelSignature(
        inputs=Schema(inputs),
        outputs=Schema(
            [*_OUTPUTS[mode], ColSpec("string", "reasoning"), ColSpec("boolean", "valid")]
        ),
        params=ParamSchema(
            [
                ParamSpec("max_new_tokens", "long", max_new_tokens),
                ParamSpec("identify", "boolean", False),
            ]
        ),
    )


def served_weights(model_uri: str, weights: str) -> str:
    """Which weights a judge serves: a store URI as given (without credentials), a local folder
    with a marker of its files (`caching.model_version`: a model rebuilt there is another)."""
    from judgeflow.caching import model_version
    from judgeflow.config.redaction import strip_credentials

    if is_url(model_uri):
        return strip_credentials(model_uri)
    return f"{model_uri}@{model_version(weights)[:16]}"


class JudgeModel(PythonModel):
    """A pointwise, pairwise or GRRM judge: a DataFrame of rows in, a DataFrame of verdicts out."""

    #: The signature validates the input; MLflow's type-hint validation (which would warn at
    #: every import that `predict` has no hints) is skipped, as for MLflow's own ChatModel.
    _skip_type_hint_validation = True

    #: Where the replies come from: `load_context` makes an `HFGenerator` over the weights (which
    #: load on the first `predict`). Any `Generator` may stand in, e.g. on the instance that
    #: `mlflow.pyfunc.load_model(uri).unwrap_python_model()` returns (tests give known replies).
    generator: Generator

    def load_context(self, context: Any) -> None:
        from judgeflow.engines.generate import HFGenerator

        config = dict(context.model_config or {})
        self.mode = config["mode"]
        self.max_new_tokens = int(config["max_new_tokens"])
        weights = local_weights(config["model_uri"], config.get("storage_root"))
        self.served_model = served_weights(config["model_uri"], weights)
        if config.get("instance"):  # a judge served for one job says which (stages.served_judge)
            self.served_model += f" instance {config['instance']}"
        self.generator = HFGenerator(weights, batch_size=int(config.get("batch_size", 8)))

    # No type hints: MLflow would read them as the input schema; the signature is the schema.
    def predict(self, context, model_input, params=None):
        rows = (
            model_input.to_dict("records")
            if isinstance(model_input, pd.DataFrame)
            else list(model_input)
        )
        if (params or {}).get("identify"):  # which judge this is: nothing is generated
            about = {"served_model": self.served_model, "mode": self.mode}
            return pd.DataFrame([about] * len(rows), dtype=object)
        tokens = int((params or {}).get("max_new_tokens") or self.max_new_tokens)
        verdicts = judge(self.generator, self.mode, rows, max_new_tokens=tokens)
        # object columns keep a missing score as null, not NaN, in MLflow's JSON response
        columns = signature(self.mode, tokens).outputs.input_names()
        return pd.DataFrame(verdicts, columns=columns, dtype=object)


def save_judge_model(path: str | Path, config: Mapping[str, Any]) -> Path:
    """Write the MLflow model of a judge to `path` (a new directory); `config` holds
    `model_uri`, `mode`, `max_new_tokens` and optionally `storage_root`, `batch_size`,
    `registered_model`. Nothing is loaded or run: requirements are the installed versions."""
    from importlib.metadata import version

    mode = str(config["mode"])
    with tempfile.TemporaryDirectory() as tmp:  # a model from code, not a pickle
        code = Path(tmp) / "judge_model.py"
        code.write_text(_MODEL_CODE)
        mlflow.pyfunc.save_model(
            str(path),
            python_model=str(code),
            model_config=dict(config),
            signature=signature(mode, int(config["max_new_tokens"])),
            input_example=pd.DataFrame(_EXAMPLES[mode]),
            pip_requirements=[
                f"{package}=={version(package)}" for package in ("mlflow", "torch", "transformers")
            ],
        )
    return Path(path)
