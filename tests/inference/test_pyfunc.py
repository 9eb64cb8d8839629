"""Each registered version is a standard MLflow model, against a real `mlflow server` and the
real tiny model: `mlflow.pyfunc.load_model("models:/…")` with its signature and input example,
an older pointer-only version completed when its weights are registered again, and
`mlflow models serve --env-manager local` answering real HTTP requests on loopback."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from servers import invocations, mlflow_models_serve

from judgeflow.registry.models import ModelRegistry


@pytest.fixture(autouse=True)
def _mlflow_downloads_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`load_model` and `get_model_info` download into temporary folders MLflow never removes."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


ROWS = pd.DataFrame({"query": ["What is 2+2?", "Name a colour."], "response": ["4", "Blue."]})
SERVING = {"max_new_tokens": 8, "batch_size": 4}


def _register(tracking: str, model: Path, *, serving: dict[str, object] | None = SERVING) -> str:
    client = MlflowClient(tracking)
    experiment = client.create_experiment(f"pyfunc-{uuid.uuid4().hex[:8]}")
    name = f"judge-pyfunc-{uuid.uuid4().hex[:8]}"
    ModelRegistry(tracking).register(
        name=name, model_uri=str(model), run_id=client.create_run(experiment).info.run_id,
        mode="pointwise", metric="exact_match", evaluation={"exact_match": 0.5}, eval_set="s",
        tags={}, description="", serving=serving,
    )  # fmt: skip
    return name


def test_a_registered_version_loads_as_a_pyfunc_with_its_signature(
    mlflow_server: str, tiny_model: Path
) -> None:
    name = _register(mlflow_server, tiny_model)
    mlflow.set_tracking_uri(mlflow_server)
    uri = f"models:/{name}@champion"
    info = mlflow.models.get_model_info(uri)
    assert info.signature.inputs.input_names() == ["query", "response"]
    assert info.signature.outputs.input_names() == ["score", "reasoning", "valid"]
    assert info.saved_input_example_info is not None

    verdicts = mlflow.pyfunc.load_model(uri).predict(ROWS, params={"max_new_tokens": 4})
    assert list(verdicts.columns) == ["score", "reasoning", "valid"] and len(verdicts) == 2
    for score, valid in zip(verdicts["score"], verdicts["valid"], strict=True):
        assert (score in range(5)) if valid else score is None  # the untrained model: any
    with pytest.raises(MlflowException, match="response"):  # the signature is enforced
        mlflow.pyfunc.load_model(uri).predict(ROWS[["query"]])
    # judgeflow still resolves it the way it always did
    assert ModelRegistry(mlflow_server).resolve(uri).model_uri == str(tiny_model)


def test_an_older_pointer_only_version_gets_its_model_when_registered_again(
    mlflow_server: str, tiny_model: Path
) -> None:
    name = _register(mlflow_server, tiny_model, serving=None)  # as versions were before
    mlflow.set_tracking_uri(mlflow_server)
    with pytest.raises(MlflowException):
        mlflow.pyfunc.load_model(f"models:/{name}/1")
    client = MlflowClient(mlflow_server)
    run = client.get_model_version(name, "1").run_id
    again = ModelRegistry(mlflow_server).register(
        name=name, model_uri=str(tiny_model), run_id=run, mode="pointwise",
        metric="exact_match", evaluation=None, eval_set="s", tags={}, description="",
        serving=SERVING,
    )  # fmt: skip
    assert again.already_registered and again.version == "1"
    model = mlflow.pyfunc.load_model(f"models:/{name}/1")
    assert len(model.predict(ROWS, params={"max_new_tokens": 2})) == 2


@pytest.mark.slow
def test_mlflow_models_serve_answers_invocations(
    mlflow_server: str, tiny_model: Path, tmp_path: Path
) -> None:
    name = _register(mlflow_server, tiny_model)
    service, url = mlflow_models_serve(
        f"models:/{name}@champion", mlflow_server, tmp_path / "serve.log"
    )
    try:
        answer = invocations(
            url, {"dataframe_split": ROWS.to_dict(orient="split"), "params": {"max_new_tokens": 4}}
        )
    finally:
        service.stop()
    predictions = answer["predictions"]  # type: ignore[index]
    assert len(predictions) == 2
    assert all(set(p) == {"score", "reasoning", "valid"} for p in predictions), predictions


def test_a_grrm_version_is_an_mlflow_model_of_groups_in_and_rankings_out(
    mlflow_server: str, tiny_model: Path
) -> None:
    client = MlflowClient(mlflow_server)
    experiment = client.create_experiment(f"pyfunc-{uuid.uuid4().hex[:8]}")
    name = f"grrm-pyfunc-{uuid.uuid4().hex[:8]}"
    ModelRegistry(mlflow_server).register(
        name=name, model_uri=str(tiny_model), run_id=client.create_run(experiment).info.run_id,
        mode="grrm", metric="ranking_accuracy", evaluation={"ranking_accuracy": 0.5}, eval_set="s",
        tags={}, description="", serving=SERVING,
    )  # fmt: skip
    mlflow.set_tracking_uri(mlflow_server)
    uri = f"models:/{name}@champion"
    info = mlflow.models.get_model_info(uri)
    assert info.signature.inputs.input_names() == ["source", "translations", "source_lang", "target_lang"]  # fmt: skip
    assert info.signature.outputs.input_names() == ["ranking", "scores", "reasoning", "valid"]
    groups = pd.DataFrame({"source": ["Hallo Welt."], "translations": [["Hello world.", "Hi world."]],
                           "source_lang": ["de"], "target_lang": ["en"]})  # fmt: skip
    verdicts = mlflow.pyfunc.load_model(uri).predict(groups, params={"max_new_tokens": 4})
    assert list(verdicts.columns) == ["ranking", "scores", "reasoning", "valid"]
    # The untrained tiny model writes no ranking in 4 tokens: a format failure, said as such.
    assert verdicts.to_dict("records")[0]["valid"] is False
    assert verdicts["scores"][0] is None and verdicts["ranking"][0] is None
