"""The model registry end to end: real Prefect server, a real `mlflow server` of this test alone,
real training of the tiny model, and `judgeflow evaluate` as a user runs it.

Two successive tiny runs register two versions with their lineage; the good one holds
`champion`, a deliberately worse one (one GRPO step) is kept as challenger and says why;
`judgeflow evaluate models:/judge-grpo-pointwise@champion` works on held-out rows, refuses the
rows the model trained on, and scores them with `--allow-overlap`, reporting the overlap.

Two runs registering the same model at once: the second waits, before it looks up the champion,
until the first has looked it up, measured it and decided; the overlap is observed from inside
(a run held in its champion measurement until the other is seen waiting), not timed. A waiting
run logs that it waits, and the register task refuses to run without the model's lock.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from waits import HANG_GUARD_S

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NAME = "judge-grpo-pointwise"
#: The demo's run at half its training: the registry's decisions need a judge that learned, not
#: the demo's figures.
SHORTER = ["sft.num_train_epochs=4", "grpo.max_steps=20"]


def _judgeflow(*args: str, home: Path, tracking: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JUDGEFLOW_HOME": str(home), "MLFLOW_TRACKING_URI": tracking}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "judgeflow"), *args],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    sys.stdout.write(proc.stdout[-4000:] + proc.stderr[-4000:])  # shown when the test fails
    return proc


@pytest.mark.slow(seconds=150)
def test_two_runs_a_champion_a_challenger_and_evaluating_the_champion(
    prefect_server: str, own_mlflow_server: str, judgeflow_home: Path
) -> None:
    from flows.judge_grpo import judge_grpo

    tracking = own_mlflow_server
    client = MlflowClient(tracking)
    base = [f"tracking.tracking_uri={tracking}"]

    # 1. The demo's run, shortened (the quickstart test runs the demo's own and holds what it
    # learns): an SFT warm start of half the epochs, 20 GRPO steps. The first version becomes
    # champion.
    good = judge_grpo(mode="pointwise", profile="tiny", overrides=[*base, *SHORTER])
    decision = good["registry"]["final"]
    assert decision["promoted"] and decision["version"] == "1", decision
    assert decision["reason"].startswith(f"first version of {NAME}")
    sft = good["registry"]["sft"]
    assert sft["name"] == f"{NAME}-sft" and sft["promoted"]

    version = client.get_model_version(NAME, "1")
    run = client.get_run(good["mlflow_run_id"])
    tags = version.tags
    # Lineage: data, config, code, the parent SFT version, the run; weights where training left them.
    assert tags["judgeflow.data.source"] == "sample://tinyjudge_pointwise.jsonl"
    assert tags["judgeflow.data.manifest_hash"] == run.data.tags["judgeflow.data.manifest_hash"]
    assert tags["judgeflow.config_hash"] == run.data.tags["judgeflow.config_hash"]
    assert tags["judgeflow.code_version"] and tags["judgeflow.git_commit"]
    assert tags["judgeflow.parent_version"] == f"{NAME}-sft/1"
    assert tags["judgeflow.start_model"] == run.data.tags["judgeflow.sft.model_dir"]
    assert tags["judgeflow.mlflow_run_id"] == version.run_id == good["mlflow_run_id"]
    assert tags["judgeflow.model_uri"] == good["checkpoint"]
    assert (
        tags["judgeflow.promoted"] == "true" and tags["judgeflow.primary_metric"] == "exact_match"
    )
    assert "| exact_match |" in version.description  # the evaluation table
    assert client.get_model_version_by_alias(NAME, "champion").version == "1"
    # The run links to its version, and its evaluation left the pictures.
    assert run.data.tags[f"judgeflow.registered.{NAME}"] == "1"
    assert run.data.tags[f"judgeflow.registered.{NAME}.url"].endswith(f"/models/{NAME}/versions/1")
    plots = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert {"plots/after_confusion.png", "plots/after_subsets.png"} <= plots, plots
    details = {a.path for a in client.list_artifacts(run.info.run_id, "eval")}
    assert "eval/after_details.json" in details
    champion_exact = run.data.metrics["after/exact_match"]
    assert champion_exact > run.data.metrics["sft/exact_match"]

    # 2. A deliberately worse run: one GRPO step from the same SFT model (everything before
    # training comes from the cache). It is registered, kept as challenger, and says why.
    weak = judge_grpo(
        mode="pointwise", profile="tiny", overrides=[*base, *SHORTER, "grpo.max_steps=1"]
    )
    assert weak["stages"]["sft"] == "cached" and weak["stages"]["register[sft]"] == "cached"
    decision = weak["registry"]["final"]
    assert not decision["promoted"] and decision["version"] == "2", decision
    assert decision["champion_version"] == "1"
    assert decision["champion_value"] == pytest.approx(champion_exact)
    assert "kept as challenger: exact_match" in decision["reason"]
    assert f"champion v1's {champion_exact:.4f}" in decision["reason"]
    v2 = client.get_model_version(NAME, "2")
    assert v2.tags["challenger"] == "true" and v2.tags["judgeflow.decision"] == decision["reason"]
    assert client.get_model_version_by_alias(NAME, "champion").version == "1"
    assert client.get_model_version_by_alias(NAME, "challenger").version == "2"
    weak_run = client.get_run(weak["mlflow_run_id"])
    assert weak_run.data.tags[f"judgeflow.registered.{NAME}.decision"] == decision["reason"]

    # The Prefect run summary says it too, with the numbers.
    import asyncio

    from prefect import get_client

    async def summary_artifact() -> list[dict[str, object]]:
        async with get_client() as prefect:
            arts = await prefect.read_artifacts()
            flow_run = weak_run.data.tags["prefect.flow_run_id"]
            ours = [a for a in arts if a.key == "run-summary" and str(a.flow_run_id) == flow_run]
            return json.loads(str(ours[0].data))

    rows = {row["stage"]: row for row in asyncio.run(summary_artifact())}
    assert "kept as challenger" in str(rows["register[final]"]["note"])
    # The base model has no lineage: its evaluation is unchecked, said so, and counted nowhere.
    assert rows["evaluate[before]"]["decontamination"] == "unchecked"
    assert rows["evaluate[before]"]["overlap_rows"] == ""
    assert rows["evaluate[after]"]["decontamination"] == "checked"
    assert rows["evaluate[after]"]["overlap_rows"] == 0.0
    assert "before/overlap_rows" not in weak_run.data.metrics
    assert weak_run.data.metrics["after/overlap_rows"] == 0.0
    assert weak_run.data.tags["judgeflow.decontamination.before"] == "unchecked"
    assert weak_run.data.tags["judgeflow.decontamination.after"] == "checked"

    # 3. `judgeflow evaluate` on the champion, as a user runs it.
    val_file = next(judgeflow_home.glob("artifacts/prepared/*/val_source/pointwise.parquet"))
    held_out = _judgeflow(
        "evaluate", f"models:/{NAME}@champion", "--data", str(val_file),
        "--output", str(judgeflow_home / "eval-val"), home=judgeflow_home, tracking=tracking,
    )  # fmt: skip
    assert held_out.returncode == 0
    assert f"{NAME}/1" in held_out.stdout and "exact_match" in held_out.stdout
    assert "none with the model's training data" in held_out.stdout
    written = {p.name for p in (judgeflow_home / "eval-val").iterdir()}
    assert {"eval_confusion.png", "eval_details.json", "predictions.json"} <= written, written
    evals = client.search_runs([client.get_experiment_by_name("judgeflow-evaluate").experiment_id])
    assert evals[0].data.metrics["eval/exact_match"] == pytest.approx(champion_exact)
    # The champion's numbers on this set are kept on the version for later gates.
    kept = client.get_model_version(NAME, "1").tags
    assert f"judgeflow.eval.{evals[0].data.tags['judgeflow.eval_set']}" in kept

    # The whole source holds the rows it trained on: refused, then scored with --allow-overlap.
    refused = _judgeflow(
        "evaluate", f"models:/{NAME}@champion", "--data", "sample://tinyjudge_pointwise.jsonl",
        home=judgeflow_home, tracking=tracking,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "have a prompt that" in refused.stderr and "--allow-overlap" in refused.stderr
    allowed = _judgeflow(
        "evaluate", f"models:/{NAME}@champion", "--data", "sample://tinyjudge_pointwise.jsonl",
        "--allow-overlap", home=judgeflow_home, tracking=tracking,
    )  # fmt: skip
    assert allowed.returncode == 0
    assert "rows the model trained on were scored" in allowed.stdout
    # ...and kept on the version under their own evaluation set, apart from clean numbers.
    overlap_run = client.search_runs(
        [client.get_experiment_by_name("judgeflow-evaluate").experiment_id],
        order_by=["start_time DESC"],
    )[0]
    assert overlap_run.data.tags["judgeflow.decontamination"] == "overlap-allowed"
    assert overlap_run.data.tags["judgeflow.eval_set"].endswith("-overlap")
    kept = client.get_model_version(NAME, "1").tags
    assert f"judgeflow.eval.{overlap_run.data.tags['judgeflow.eval_set']}" in kept

    # `judgeflow models` lists both versions with the alias and the decision.
    listing = _judgeflow("models", "grpo-pointwise", home=judgeflow_home, tracking=tracking)
    assert listing.returncode == 0
    assert "champion" in listing.stdout and "challenger" in listing.stdout
    assert f"{NAME}-sft" in listing.stdout


class Gate:
    """What two runs registering one model did, in order, seen from inside the gate's steps."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.events: list[tuple[str, str]] = []

    def note(self, what: str) -> None:
        with self.changed:
            self.events.append((WHO.get(), what))
            self.changed.notify_all()

    def wait_for(self, who: str, what: str | None = None) -> None:
        with self.changed:
            self.changed.wait_for(
                lambda: any(w == who and what in (None, e) for w, e in self.events), HANG_GUARD_S
            )

    def of(self, who: str) -> list[str]:
        return [what for w, what in self.events if w == who]


WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="?")


def test_the_gate_finds_measures_and_decides_under_one_lock(
    prefect_server: str,
    mlflow_server: str,
    judgeflow_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run A holds the lock from looking up champion v1 through measuring it to deciding; run B,
    started while A is inside the measurement, is refused the lock before it looks anything
    up, then finds A's version as champion and is compared with A's numbers."""
    from prefect import flow

    import flows.pipeline_run as pipeline_run
    import judgeflow.stages.register as register_lock
    import tasks.register as register_tasks
    from judgeflow import stages
    from judgeflow.config import load_config
    from judgeflow.evaluation.decontamination import write_lineage
    from judgeflow.registry.models import ModelRegistry
    from judgeflow.stages.evaluate import evaluation_set
    from judgeflow.tracking import Tracker

    gate = Gate()
    try_take, find, decide = (
        register_lock._try_take, pipeline_run.champion_to_measure, register_tasks.register_stage
    )  # fmt: skip
    measure = stages.evaluate_stage

    def observed_try_take(path: Path) -> int | None:
        fd = try_take(path)
        gate.note("refused" if fd is None else "lock")
        return fd

    def observed_find(*args: Any, **kwargs: Any) -> Any:
        gate.note("lookup")
        return find(*args, **kwargs)

    def observed_measure(*args: Any, **kwargs: Any) -> Any:
        gate.note("measure")
        if WHO.get() == "A":
            gate.wait_for("B")  # until B is seen: refused the lock (or, unlocked, looking up)
        return measure(*args, **kwargs)

    def observed_decide(*args: Any, **kwargs: Any) -> Any:
        gate.note("decide")
        return decide(*args, **kwargs)

    monkeypatch.setattr(register_lock, "_try_take", observed_try_take)
    monkeypatch.setattr(pipeline_run, "champion_to_measure", observed_find)
    monkeypatch.setattr(register_tasks, "register_stage", observed_decide)
    monkeypatch.setattr(stages, "evaluate_stage", observed_measure)

    tracking = mlflow_server
    name = f"judge-lock-{uuid.uuid4().hex[:8]}"
    cfg = load_config(
        "grpo-pointwise", profile="tiny",
        overrides=[f"tracking.tracking_uri={tracking}", f"register.model_name={name}",
                   "evaluation.limit=2", "evaluation.max_new_tokens=4"],
    )  # fmt: skip
    data = stages.prepare_stage(cfg, stages.download_stage(cfg))
    assert data.val_file
    eval_set = evaluation_set(cfg, data.val_file)
    client = MlflowClient(tracking)
    experiment = client.create_experiment(f"lock-{uuid.uuid4().hex[:8]}")
    weights = {}
    for who in ("A", "B"):  # three registered models, all loadable: the tiny model
        weights[who] = judgeflow_home / f"weights-{who}"
        weights[who].symlink_to(judgeflow_home / "tiny-model", target_is_directory=True)
    # The champion carries its lineage, as trained models do: its numbers are checked and
    # compared (a champion without lineage would be measured unchecked and kept apart).
    weights["v1"] = judgeflow_home / "weights-v1"
    shutil.copytree(judgeflow_home / "tiny-model", weights["v1"])
    write_lineage(weights["v1"], stage="grpo", mode="pointwise", data_file=data.train_file)
    # Champion v1, never measured on this run's evaluation set: the gate must measure it.
    ModelRegistry(tracking).register(
        name=name, model_uri=str(weights["v1"]), run_id=client.create_run(experiment).info.run_id,
        mode="pointwise", metric="exact_match", evaluation={"exact_match": 0.1},
        eval_set="an-earlier-set", tags={}, description="",
    )  # fmt: skip

    @flow(name="register-one")
    def register_one(who: str, exact_match: float) -> dict[str, Any]:
        WHO.set(who)
        run_id = client.create_run(experiment).info.run_id
        evaluation = {
            "metrics": {"eval/exact_match": exact_match},
            "details": {"eval_set": eval_set, "decontamination": "checked",
                        "model": str(weights[who])},
        }  # fmt: skip
        tracker = Tracker.attach(run_id, tracking)
        decision, _ = pipeline_run.register_model(
            pipeline_run.StageRecorder(), cfg, tracker, data, str(weights[who]), "final", evaluation
        )
        return decision

    decisions: dict[str, Any] = {}

    def run(who: str, exact_match: float) -> None:
        try:
            decisions[who] = register_one(who, exact_match)
        except BaseException as exc:  # reported by the assertions below
            decisions[who] = exc

    first = threading.Thread(target=run, args=("A", 0.9), daemon=True)  # a stuck run: no hang
    first.start()
    gate.wait_for("A", "measure")  # A is inside the champion's measurement, holding the lock
    second = threading.Thread(target=run, args=("B", 0.5), daemon=True)
    second.start()
    for thread in (first, second):
        thread.join(HANG_GUARD_S * 2)
    assert not first.is_alive() and not second.is_alive(), gate.events
    assert not any(isinstance(d, BaseException) for d in decisions.values()), decisions

    # B's first step was to be refused the lock A held: it looked nothing up meanwhile.
    assert gate.of("B")[0] == "refused", gate.events
    seen = [(who, what) for who, what in gate.events if what != "refused"]
    assert seen == [
        ("A", "lock"), ("A", "lookup"), ("A", "measure"), ("A", "decide"),
        ("B", "lock"), ("B", "lookup"), ("B", "decide"),  # A's version has numbers here
    ], gate.events  # fmt: skip
    a, b = decisions["A"], decisions["B"]
    assert a["promoted"] and a["champion_version"] == "1" and a["version"] == "2"
    assert not b["promoted"] and b["champion_version"] == "2"
    assert b["champion_value"] == pytest.approx(0.9)  # A's numbers, not v1's measurement


def test_register_refuses_to_run_without_the_models_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller that skips `registry_lock` (calls the task, not `register_model`) fails before
    it reads the champion; inside the lock, this context is its holder, and only there."""
    import judgeflow.stages.register as register_stage
    import tasks.register as register_tasks
    from judgeflow.config import load_config

    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path))
    cfg = load_config("grpo-pointwise", overrides=["register.model_name=judge-lockless"])
    with pytest.raises(RuntimeError, match="without the lock of registered model judge-lockless"):
        register_tasks.register.fn(cfg, "no-run", str(tmp_path / "model"), "final", None)
    with register_stage.registry_lock("judge-lockless"):
        assert register_stage.holds_registry_lock("judge-lockless")
        assert not register_stage.holds_registry_lock("judge-lockless-sft")
        elsewhere: list[bool] = []  # another thread (another run) does not hold it
        thread = threading.Thread(
            target=lambda: elsewhere.append(register_stage.holds_registry_lock("judge-lockless"))
        )
        thread.start()
        thread.join(HANG_GUARD_S)
        assert elsewhere == [False]
    assert not register_stage.holds_registry_lock("judge-lockless")


def test_a_run_waiting_for_the_models_lock_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one run holds a model's lock, a second one logs that it waits (the model and the
    lock file), then goes on once the first lets go."""
    import judgeflow.stages.register as register_stage

    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path))
    said: list[str] = []
    logged = threading.Event()

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())
            logged.set()

    handler, level = Seen(), register_stage.logger.level
    register_stage.logger.addHandler(handler)  # outside a run, the wait is logged here
    register_stage.logger.setLevel(logging.INFO)
    entered = threading.Event()

    def second() -> None:
        with register_stage.registry_lock("judge-wait"):
            entered.set()

    try:
        with register_stage.registry_lock("judge-wait"):
            waiting = threading.Thread(target=second, daemon=True)
            waiting.start()
            assert logged.wait(HANG_GUARD_S), "the waiting run logged nothing"
            assert not entered.is_set()
        waiting.join(HANG_GUARD_S)
        assert entered.is_set()
    finally:
        register_stage.logger.removeHandler(handler)
        register_stage.logger.setLevel(level)
    assert len(said) == 1 and "register judge-wait: another run is deciding" in said[0]
    assert str(tmp_path / "prefect-cache-keys" / ".locks") in said[0]
