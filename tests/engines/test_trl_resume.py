"""A GRPO job killed after a checkpoint and resumed trains exactly what an uninterrupted run does.

Users of other GRPO stacks report resumes at an epoch boundary that skip data and exit 0
under-trained (verl #7974, open-instruct #1523). Here real TRL training of the tiny model runs
in a subprocess that is SIGKILLed right after a checkpoint, then resumes in the same output
directory; its step count and its data order (`data_order.jsonl`) must equal an uninterrupted
run's, and the steps before the checkpoint must not be trained again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgeflow.engines.trl import GrpoParams, read_data_order

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROWS = 6  # 2 prompts per step: 3 steps per epoch, 2 epochs
STEPS_PER_EPOCH = 3

TRAIN = """
import json, sys
from judgeflow.engines.trl import GrpoParams, train_grpo
params = GrpoParams(**json.loads(sys.argv[1]))
result = train_grpo(params, sys.argv[2], on_line=lambda line: None)
print("RESULT", json.dumps({"global_step": result.global_step,
                            "resumed_from": result.resumed_from and result.resumed_from.name}))
"""


@pytest.fixture(scope="module")
def train_file(tmp_path_factory: pytest.TempPathFactory, rl_row: Any) -> Path:
    path = tmp_path_factory.mktemp("resume-data") / "train.parquet"
    rows = [rl_row(i, prompt_hash=f"hash-{i}") for i in range(ROWS)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _params(model: Path, out: Path, save_steps: int) -> GrpoParams:
    return GrpoParams(
        model_path=str(model), output_dir=str(out), reward="pointwise", learning_rate=1e-4,
        num_generations=2, prompts_per_step=2, micro_batch_size=2, max_prompt_length=64,
        max_completion_length=8, num_train_epochs=2, save_steps=save_steps, use_cpu=True,
        cpu_threads=1, seed=7,
    )  # fmt: skip


def _train(params: GrpoParams, train_file: Path, kill_after: int | None = None) -> dict[str, Any]:
    """Train in a subprocess; with `kill_after`, SIGKILL it once checkpoint-N is complete.

    Its temporary files go next to its output: a killed process cannot remove them.
    """
    tmp = Path(params.output_dir).parent / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", TRAIN, json.dumps(asdict(params)), str(train_file)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TMPDIR": str(tmp)},
    )  # fmt: skip
    if kill_after is None:
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, out[-3000:]
        return dict(json.loads(out.rsplit("RESULT ", 1)[1]))
    state = Path(params.output_dir) / f"checkpoint-{kill_after}" / "trainer_state.json"
    deadline = time.monotonic() + 240
    while not _complete(state):
        assert proc.poll() is None, f"training ended before checkpoint-{kill_after}"
        assert time.monotonic() < deadline, f"no checkpoint-{kill_after} after 240s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    return {"killed_at": kill_after}


def _complete(state_file: Path) -> bool:
    try:
        return bool(json.loads(state_file.read_text()).get("global_step"))
    except (OSError, ValueError):
        return False


@pytest.fixture(scope="module")
def uninterrupted(tiny_model: Path, train_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[int]]:  # fmt: skip
    out = tmp_path_factory.mktemp("uninterrupted")
    result = _train(_params(tiny_model, out, save_steps=STEPS_PER_EPOCH), train_file)
    assert result == {"global_step": 2 * STEPS_PER_EPOCH, "resumed_from": None}
    records = read_data_order(out)
    assert all(r["prompt_hashes"] == [f"hash-{i}" for i in r["rows"]] for r in records.values())
    order = {step: r["rows"] for step, r in records.items()}
    assert sorted(order) == list(range(1, 2 * STEPS_PER_EPOCH + 1))
    n = STEPS_PER_EPOCH
    epochs = [sorted(i for s in range(e * n + 1, e * n + n + 1) for i in order[s]) for e in (0, 1)]
    assert epochs == [list(range(ROWS))] * 2  # every row once per epoch
    # Reshuffled: each step of epoch 2 has other rows than the same step of epoch 1, so training
    # epoch 1's order again (or the rest of it) cannot pass for epoch 2's.
    assert all(set(order[s]) != set(order[s + n]) for s in range(1, n + 1)), order
    return order


def _resumed_order(out: Path, checkpoint: int) -> dict[int, list[int]]:
    """The resumed attempt trained only the steps after `checkpoint` (none redone)."""
    lines = [json.loads(x) for x in (out / "data_order.jsonl").read_text().splitlines()]
    resumed = [r["step"] for r in lines if r["attempt_from"] == checkpoint]
    assert resumed == list(range(checkpoint + 1, 2 * STEPS_PER_EPOCH + 1)), lines
    first = [r["step"] for r in lines if r["attempt_from"] == 0]
    assert first[:checkpoint] == list(range(1, checkpoint + 1)), lines
    return {step: r["rows"] for step, r in read_data_order(out).items()}


def test_resume_at_an_epoch_boundary_trains_the_same_steps_on_the_same_data(
    tiny_model: Path, train_file: Path, tmp_path: Path, uninterrupted: dict[int, list[int]]
) -> None:
    params = _params(tiny_model, tmp_path / "run", save_steps=STEPS_PER_EPOCH)
    _train(params, train_file, kill_after=STEPS_PER_EPOCH)

    resumed = _train(params, train_file)

    assert resumed == {"global_step": 2 * STEPS_PER_EPOCH, "resumed_from": "checkpoint-3"}
    assert _resumed_order(tmp_path / "run", STEPS_PER_EPOCH) == uninterrupted


def test_resume_in_the_middle_of_the_second_epoch_continues_its_order(
    tiny_model: Path, train_file: Path, tmp_path: Path, uninterrupted: dict[int, list[int]]
) -> None:
    params = _params(tiny_model, tmp_path / "run", save_steps=1)
    _train(params, train_file, kill_after=STEPS_PER_EPOCH + 1)

    resumed = _train(params, train_file)

    checkpoint = int(str(resumed["resumed_from"]).removeprefix("checkpoint-"))
    assert checkpoint in (STEPS_PER_EPOCH + 1, STEPS_PER_EPOCH + 2)  # inside the second epoch
    assert resumed["global_step"] == 2 * STEPS_PER_EPOCH
    assert _resumed_order(tmp_path / "run", checkpoint) == uninterrupted
