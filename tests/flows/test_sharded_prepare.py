"""prepare-grrm-rl-sharded on a real local Ray (RayTaskRunner) and a real Prefect server: the
shards run as Ray tasks and the merged parquet has the single-process run's sha256; Ray is gone
afterwards."""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from flowtools import task_runs_when
from sessions import of_this_session

from judgeflow.data import prepare_grrm_rl

pytestmark = pytest.mark.slow

OPTIONS: dict[str, Any] = {
    "subgroup_augment": 2,
    "shuffle_augment": 1,
    "seed": 11,
    "skip_invalid": True,
    "batch_size": 64,
}


def write_groups(path: Path, n: int) -> Path:
    """`n` GRRM groups as JSONL, every 50th with an out-of-range score (dropped)."""
    rng = random.Random(3)
    lines = []
    for i in range(n):
        size = rng.randint(2, 6)
        scores = [rng.randint(0, 10) for _ in range(size)]
        if i % 50 == 17:
            scores[0] = 12
        row = {
            "src_text": f"Satz Nummer {i}.",
            "src_lang": rng.choice(["de", "zh", "fr"]),
            "trg_lang": "en",
            "mt_texts": [f"Sentence {i}, version {j}." for j in range(size)],
            "scores": scores,
        }
        lines.append(json.dumps(row, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def ray_processes(since: set[int]) -> list[str]:
    """Ray's processes (GCS, raylet, workers, agents) this session started after the `since`
    snapshot (an xdist worker beside it may run Ray of its own)."""
    found = []
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        if proc.info["pid"] in since or not of_this_session(proc.info["pid"]):
            continue
        text = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["name"] or "")
        if any(key in text for key in ("ray::", "raylet", "gcs_server", "ray/_private", "ray/dashboard")):  # fmt: skip
            found.append(f"{proc.info['pid']} {text.strip()[:120]}")
    return found


def test_sharded_flow_on_local_ray_writes_the_single_process_bytes(
    prefect_server: str, tmp_path: Path
) -> None:
    from flows.prepare_sharded import on_ray

    source = write_groups(tmp_path / "train.jsonl", 400)  # 7 batches of 64 -> 3 shards
    single = prepare_grrm_rl(source, tmp_path / "single" / "rl_train.parquet", **OPTIONS)
    before = {p.pid for p in psutil.process_iter()}

    sharded = on_ray(
        3, init_kwargs={"num_cpus": 2, "object_store_memory": 100 * 1024**2}
    )  # local Ray: no address
    state = sharded(
        str(source), str(tmp_path / "sharded" / "rl_train.parquet"), 3, OPTIONS, return_state=True
    )
    result = state.result()

    digest = hashlib.sha256(Path(result.output_path).read_bytes()).hexdigest()
    assert digest == hashlib.sha256(Path(single.output_path).read_bytes()).hexdigest()
    assert result.report["counts"] == single.report["counts"]
    assert result.report["dropped"]["total"] == 8
    assert sorted(p.name for p in Path(result.output_path).parent.iterdir()) == [
        "rl_train.parquet",
        "rl_train.report.json",
    ]  # the shards' files are gone

    def shard_names(runs: list[Any]) -> list[str]:
        return sorted(r.name for r in runs if r.name.startswith("prepare-grrm-rl-shard"))

    def all_recorded(runs: list[Any]) -> bool:
        final = all(r.state is not None and r.state.is_final() for r in runs)
        return len(shard_names(runs)) == 3 and final

    runs = task_runs_when(str(state.state_details.flow_run_id), all_recorded)
    shard_runs = shard_names(runs)
    assert shard_runs == [f"prepare-grrm-rl-shard[{i}]" for i in range(3)]
    assert all(r.state is not None and r.state.is_completed() for r in runs)

    deadline = time.monotonic() + 120  # ray.shutdown() stopped them; a hang guard for the exit
    while (left := ray_processes(before)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == []


def test_grrm_stage_takes_the_rl_train_split_from_the_sharded_flow(
    prefect_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `flows/grrm.py` does with `data.shards` > 1 (its step, `prepare_rl_train`), on the
    recipe's tiny sample; with one shard the step does nothing."""
    from flows.pipeline_run import StageRecorder
    from flows.prepare_sharded import prepare_rl_train
    from judgeflow import stages
    from judgeflow.config import load_config

    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))

    def config(root: str, shards: int) -> Any:
        overrides = [f"storage.root={tmp_path / root}", f"data.shards={shards}"]
        return load_config("grrm-full", profile="tiny", overrides=overrides)

    single_cfg, cfg = config("single", 1), config("sharded", 2)
    single_manifest = stages.download_stage(single_cfg)
    assert prepare_rl_train(StageRecorder(), single_cfg, single_manifest) is None
    single = stages.prepare_grrm_stage(single_cfg, single_manifest)
    manifest = stages.download_stage(cfg)
    small_ray = {"num_cpus": 2, "object_store_memory": 100 * 1024**2}
    steps = StageRecorder()
    rl_train = prepare_rl_train(steps, cfg, manifest, small_ray)
    assert rl_train is not None
    assert [(r["stage"], r["status"]) for r in steps.rows] == [("prepare[rl_train]", "ran")]

    data = stages.prepare_grrm_stage(cfg, manifest, rl_train)
    assert data.rl.train_file == rl_train.output_path
    for ours, theirs in ((data.rl.train_file, single.rl.train_file), (data.sft_file, single.sft_file)):  # fmt: skip
        assert Path(ours).read_bytes() == Path(theirs).read_bytes()
    other = stages.grrm_rl_train_preparation(single_cfg, stages.download_stage(single_cfg))
    with pytest.raises(ValueError, match="rl_train is"):
        stages.prepare_grrm_stage(
            cfg, manifest, prepare_grrm_rl(other.input, other.output, **other.options)
        )


def test_data_ray_address_is_where_the_shards_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `flows/grrm.py`'s step (`prepare_rl_train`) gives the sharded flow: an address
    connects to that cluster (left running); without one a local Ray sized to the shards is
    started. The flow is recorded, not run (no Ray is started here)."""
    from flows.prepare_sharded import prepare_rl_train
    from judgeflow import stages
    from judgeflow.config import load_config

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))

    def runner(*overrides: str) -> Any:
        cfg = load_config("grrm-full", profile="tiny", overrides=["data.shards=2", *overrides])
        given: list[tuple[str, Any, tuple[Any, ...]]] = []

        def record(stage: str, sharded: Any, *args: Any) -> None:
            given.append((stage, sharded, args))

        prepare_rl_train(record, cfg, stages.download_stage(cfg))
        [(stage, sharded, args)] = given
        assert stage == "prepare[rl_train]" and args[2] == 2  # data.shards tasks
        return sharded.task_runner

    remote = runner("data.ray_address=ray://head.example:10001")
    assert remote.address == "ray://head.example:10001"
    local = runner()
    assert local.address is None and local.init_kwargs["num_cpus"] == min(2, os.cpu_count() or 1)
