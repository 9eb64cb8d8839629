"""Each registered version is a standard MLflow model, against a real `mlflow server` and the
real tiny model: `mlflow.pyfunc.load_model("models:/…")` with its signature and input example,
an older pointer-only version completed when its weights are registered again, and
`mlflow models serve --env-manager local` answering real HTTP requests on loopback.

The untrained tiny model never writes a well-formed verdict, so the verdicts themselves (a
score, a pairwise choice in both orders, a GRRM ranking) are checked with known replies: the
registered version as MLflow loads it, its `generator` (the model's seam) replaced by `Replies`."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from mlflow.pyfunc import PyFuncModel
from mlflow.tracking import MlflowClient
from servers import invocations, mlflow_models_serve

from judgeflow.data.grrm_template import render_grrm_prompt
from judgeflow.data.templates import render_pairwise, render_pointwise
from judgeflow.engines.generate import Messages
from judgeflow.inference.pyfunc import JudgeModel
from judgeflow.registry.models import ModelRegistry


@pytest.fixture(autouse=True)
def _mlflow_downloads_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`load_model` and `get_model_info` download into temporary folders MLflow never removes."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


ROWS = pd.DataFrame({"query": ["What is 2+2?", "Name a colour."], "response": ["4", "Blue."]})
SERVING = {"max_new_tokens": 8, "batch_size": 4}


#: The metric each mode's versions are registered with.
METRIC = {"pointwise": "exact_match", "pairwise": "consistent_accuracy", "grrm": "ranking_accuracy"}


def _register(
    tracking: str,
    model: Path,
    *,
    mode: str = "pointwise",
    serving: dict[str, object] | None = SERVING,
) -> str:
    client = MlflowClient(tracking)
    experiment = client.create_experiment(f"pyfunc-{uuid.uuid4().hex[:8]}")
    name = f"judge-pyfunc-{uuid.uuid4().hex[:8]}"
    ModelRegistry(tracking).register(
        name=name, model_uri=str(model), run_id=client.create_run(experiment).info.run_id,
        mode=mode, metric=METRIC[mode], evaluation={METRIC[mode]: 0.5}, eval_set="s",
        tags={}, description="", serving=serving,
    )  # fmt: skip
    return name


class Replies:
    """A `Generator` whose replies are known: the judge's prompt (its user turn) -> the reply.
    A prompt it was not given fails the test; it keeps each call's `max_new_tokens`."""

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.max_new_tokens: list[int] = []

    def generate(self, prompts: Sequence[Messages], *, max_new_tokens: int, **_: Any) -> list[str]:
        self.max_new_tokens.append(max_new_tokens)
        asked = [prompt[-1]["content"] for prompt in prompts]
        unknown = [text for text in asked if text not in self.replies]
        assert not unknown, f"prompts the test did not expect: {unknown}"
        return [self.replies[text] for text in asked]


def _load_with(uri: str, replies: Replies) -> PyFuncModel:
    """The version as MLflow loads it (its context, its signature), its replies from `replies`."""
    model = mlflow.pyfunc.load_model(uri)
    judge_model = model.unwrap_python_model()
    assert isinstance(judge_model, JudgeModel)
    judge_model.generator = replies
    return model


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
    name = _register(mlflow_server, tiny_model, mode="grrm")
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


def test_a_pointwise_version_answers_the_score_its_judge_wrote(
    mlflow_server: str, tiny_model: Path
) -> None:
    name = _register(mlflow_server, tiny_model)
    mlflow.set_tracking_uri(mlflow_server)
    replies = Replies({
        render_pointwise("What is 2+2?", "4"): "<think>2+2 is 4: right, but terse.</think>\n<score>3</score>",
        render_pointwise("Name a colour.", "Blue."): "<think>Fine.</think> <score>five</score>",
    })  # fmt: skip
    model = _load_with(f"models:/{name}@champion", replies)
    verdicts = model.predict(ROWS, params={"max_new_tokens": 4})
    assert list(verdicts.columns) == ["score", "reasoning", "valid"]
    assert verdicts.to_dict("records") == [
        {"score": 3, "reasoning": "2+2 is 4: right, but terse.", "valid": True},
        {"score": None, "reasoning": "Fine.", "valid": False},  # a malformed score
    ]
    assert verdicts["valid"].tolist() == [True, False] and verdicts["score"][0] == 3
    model.predict(ROWS)  # without params: the version's own generation length
    assert replies.max_new_tokens == [4, SERVING["max_new_tokens"]]


def test_a_pairwise_version_answers_the_better_response_and_whether_both_orders_agree(
    mlflow_server: str, tiny_model: Path
) -> None:
    name = _register(mlflow_server, tiny_model, mode="pairwise")
    mlflow.set_tracking_uri(mlflow_server)
    q1, q2, q3 = "Capital of France?", "Largest ocean?", "What is 2+2?"
    replies = Replies({
        # both orders name Paris: B as given, A when swapped
        render_pairwise(q1, "Lyon, I think.", "Paris."): "<think>Paris is right.</think><better>B</better>",
        render_pairwise(q1, "Paris.", "Lyon, I think."): "<think>Paris again.</think><better>A</better>",
        # position bias: B in both orders, so the two orders name different responses
        render_pairwise(q2, "Atlantic.", "Pacific."): "<better>B</better>",
        render_pairwise(q2, "Pacific.", "Atlantic."): "<better>B</better>",
        # the swapped order is malformed: the verdict on the order given stands, not valid
        render_pairwise(q3, "4", "5"): "<think>4.</think><better>A</better>",
        render_pairwise(q3, "5", "4"): "<better>C</better>",
    })  # fmt: skip
    rows = pd.DataFrame({"query": [q1, q2, q3], "response_a": ["Lyon, I think.", "Atlantic.", "4"],
                         "response_b": ["Paris.", "Pacific.", "5"]})  # fmt: skip
    verdicts = _load_with(f"models:/{name}@champion", replies).predict(rows)
    assert list(verdicts.columns) == ["better", "consistent", "reasoning", "valid"]
    assert verdicts.to_dict("records") == [
        {"better": "B", "consistent": True, "reasoning": "Paris is right.", "valid": True},
        {"better": "B", "consistent": False, "reasoning": "", "valid": True},
        {"better": "A", "consistent": False, "reasoning": "4.", "valid": False},
    ]
    assert verdicts["consistent"].tolist() == [True, False, False]
    assert verdicts["valid"].tolist() == [True, True, False]
    assert replies.max_new_tokens == [SERVING["max_new_tokens"]]  # both orders in one call


def test_a_grrm_version_answers_the_ranking_and_a_score_per_translation(
    mlflow_server: str, tiny_model: Path
) -> None:
    name = _register(mlflow_server, tiny_model, mode="grrm")
    mlflow.set_tracking_uri(mlflow_server)
    three = ["The house is small.", "House small is.", "The home is little."]
    two = ["Hello world.", "Hi world."]
    ranked = "A is exact; C is close; B is broken.\n\n### Final Ranking:\nA > C > B\n\n### Scores:\nA: 9, B: 2, C: 7"
    contradicts = "Both fine.\n### Final Ranking:\nA > B\n### Scores:\nA: 3, B: 8"
    replies = Replies({
        render_grrm_prompt("German", "English", "Das Haus ist klein.", three): ranked,
        render_grrm_prompt("German", "English", "Hallo Welt.", two): contradicts,
    })  # fmt: skip
    groups = pd.DataFrame({"source": ["Das Haus ist klein.", "Hallo Welt."], "translations": [three, two],
                           "source_lang": ["de", "de"], "target_lang": ["en", "en"]})  # fmt: skip
    verdicts = _load_with(f"models:/{name}@champion", replies).predict(groups)
    assert verdicts.to_dict("records") == [
        {"ranking": "A > C > B", "scores": [9, 2, 7],
         "reasoning": "A is exact; C is close; B is broken.", "valid": True},
        {"ranking": None, "scores": None, "reasoning": contradicts, "valid": False},
    ]  # fmt: skip
    assert verdicts["valid"].tolist() == [True, False]
