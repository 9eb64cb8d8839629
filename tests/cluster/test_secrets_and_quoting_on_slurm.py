"""On the dev Slurm cluster: a job's secrets reach its command and no file of the job folder but
its input file, nor the environment Slurm copies from the submitting process (and keeps with the
job); hostile values in paths and environment values are data, never shell code."""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from judgeflow.cluster import render_sbatch, submit, watch
from judgeflow.config import ConfigError, load_config
from judgeflow.stages import job_spec

if TYPE_CHECKING:
    from conftest import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(300)]

CANARY = "canary-slurm-e1c4b7"
#: Reports, for each variable, a digest of what the command saw (never the value itself).
SEEN = (
    "import os, json, hashlib; d = os.environ['JUDGEFLOW_STAGE_DIR']; "
    "json.dump({k: hashlib.sha256(os.environ.get(k, '').encode()).hexdigest() for k in "
    "('HF_TOKEN', 'DB_PASSWORD', 'HOSTILE', 'CANARY_SOURCE', 'JUDGEFLOW_SECRET__PLANTED')}, "
    "open(os.path.join(d, 'result.json'), 'w'))"
)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def test_secrets_and_hostile_values_on_a_real_slurm_job(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "pwned"
    hostile = f"a'b\"c; touch {marker}; $(touch {marker}) `touch {marker}` \\ end"
    shared = tmp_path / f"jobs dir 'q' ; $(touch {marker})"
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CANARY_SOURCE", CANARY + "-env")
    monkeypatch.setenv("JUDGEFLOW_SECRET__PLANTED", CANARY + "-cli")  # `judgeflow run` leaves one
    overrides = [
        "cluster.backend=slurm", "cluster.partition=debug", "cluster.gpus_per_node=0",
        "cluster.timeout_min=5", f"cluster.shared_dir={json.dumps(str(shared))}",
        f"cluster.env.HF_TOKEN={CANARY}", f"cluster.env.HOSTILE={json.dumps(hostile)}",
        "cluster.secrets.DB_PASSWORD=env:CANARY_SOURCE",
    ]  # fmt: skip
    cfg = load_config("grpo-pointwise", overrides=overrides)
    spec = replace(job_spec(cfg, "train", "run1", {}), ray=False, command=[sys.executable, "-c", SEEN])  # fmt: skip
    script = render_sbatch(spec, cfg.cluster)
    assert CANARY not in script

    result = watch(submit(spec, cfg.cluster), on_log=lambda _line: None, poll_s=1.0)

    assert result == {
        "HF_TOKEN": _digest(CANARY),
        "DB_PASSWORD": _digest(CANARY + "-env"),
        "HOSTILE": _digest(hostile),  # delivered verbatim
        # not copied from the submitting environment: sbatch ran without them
        "CANARY_SOURCE": _digest(""),
        "JUDGEFLOW_SECRET__PLANTED": _digest(""),
    }
    assert not marker.exists(), "a value was executed as shell code"
    job_folder = Path(spec.workdir)
    files = [p for p in job_folder.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".sh") or "_submission" in p.name for p in files), files
    for path in files:
        if path.name != "input.json":
            assert CANARY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    "override",
    [
        'cluster.partition="debug\\n#SBATCH --exclusive"',
        'cluster.extra_sbatch=["--comment=x\\ntouch /tmp/pwned"]',
        'cluster.env={"A; touch /tmp/pwned; B": "1"}',
        'cluster.shared_dir="/tmp/a\\nb"',
    ],
)
def test_values_that_would_break_out_of_their_line_are_refused(override: str) -> None:
    with pytest.raises(ConfigError, match="line break|not an environment variable name"):
        load_config("grpo-pointwise", overrides=["cluster.backend=slurm", override])
