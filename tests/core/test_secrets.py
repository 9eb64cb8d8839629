"""A job's secrets reach the job and nothing else: not the spec submitit pickles, not the sbatch
script, not the job folder, not the CLI's output. The job's input file holds them, mode 0600."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from judgeflow.cli import _secrets_out_of_parameters, app
from judgeflow.cluster import StageSpec, render_sbatch, submit
from judgeflow.cluster.stage import SECRET_ENV
from judgeflow.config import ConfigError, load_config
from judgeflow.secrets import SecretError, block_env_name, public_env, resolve_secrets
from judgeflow.stages import stage_spec

CANARY = "canary-7f3a9e-do-not-leak"


def _every_byte_under(root: Path, *, skip: set[Path] = frozenset()) -> bytes:  # type: ignore[assignment]
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file() and p not in skip)


def test_secrets_resolve_from_references_and_name_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = load_config(
        "grpo-pointwise",
        overrides=[
            "cluster.env.HF_TOKEN=tok", "cluster.env.NCCL_DEBUG=INFO",
            "cluster.secrets.DB_PASSWORD=env:MY_DB_PW", "cluster.secrets.API_KEY=prefect:vault-1",
        ],
    )  # fmt: skip
    monkeypatch.setenv("MY_DB_PW", "pw")
    monkeypatch.setenv(block_env_name("vault-1"), "key")
    assert public_env(cfg.cluster) == {"NCCL_DEBUG": "INFO"}
    assert resolve_secrets(cfg.cluster) == {"HF_TOKEN": "tok", "DB_PASSWORD": "pw", "API_KEY": "key"}  # fmt: skip
    monkeypatch.delenv("MY_DB_PW")
    with pytest.raises(SecretError, match="set MY_DB_PW in the environment that runs the flow"):
        resolve_secrets(cfg.cluster)


def test_a_secret_value_is_not_a_reference() -> None:
    with pytest.raises(ConfigError, match="env:VARIABLE or prefect:SECRET_BLOCK") as refused:
        load_config("grpo-pointwise", overrides=[f"cluster.secrets.DB_PASSWORD={CANARY}"])
    assert CANARY not in str(refused.value)


def test_an_override_that_looks_secret_warns_that_it_is_a_flow_parameter() -> None:
    said: list[str] = []
    load_config("grpo-pointwise", overrides=["cluster.env.HF_TOKEN=x"], report=said.append)
    assert any("cluster.secrets.HF_TOKEN=env:VARIABLE" in line for line in said)


def test_judgeflow_run_turns_a_secret_set_into_a_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JUDGEFLOW_SECRET__HF_TOKEN", raising=False)
    out = _secrets_out_of_parameters([f"cluster.env.HF_TOKEN={CANARY}", "cluster.env.A=1"])
    assert out == ["cluster.secrets.HF_TOKEN=env:JUDGEFLOW_SECRET__HF_TOKEN", "cluster.env.A=1"]
    assert os.environ["JUDGEFLOW_SECRET__HF_TOKEN"] == CANARY
    monkeypatch.delenv("JUDGEFLOW_SECRET__HF_TOKEN")


def test_judgeflow_config_does_not_echo_a_secret() -> None:
    result = CliRunner().invoke(app, ["config", "grpo-pointwise", "--set", f"cluster.env.DB_PASSWORD={CANARY}"])  # fmt: skip
    assert result.exit_code == 0 and CANARY not in result.output
    assert "DB_PASSWORD: '***'" in result.output


def test_the_job_gets_its_secrets_and_only_its_input_file_holds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real job through the local backend (submitit, the same handle as Slurm)."""
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CANARY_SOURCE", CANARY + "-env")
    cfg = load_config(
        "grpo-pointwise",
        overrides=[
            f"cluster.shared_dir={tmp_path / 'jobs'}", "cluster.backend=local",
            f"cluster.env.HF_TOKEN={CANARY}", "cluster.env.PLAIN=visible",
            "cluster.secrets.DB_PASSWORD=env:CANARY_SOURCE",
        ],
    )  # fmt: skip
    spec = stage_spec(cfg, "train", "run1", {})
    check = (
        "import os, json, hashlib; d = os.environ['JUDGEFLOW_STAGE_DIR']; "
        "e = {k: hashlib.sha256(os.environ.get(k, '').encode()).hexdigest() "
        "for k in ('HF_TOKEN', 'DB_PASSWORD', 'PLAIN')}; "
        "json.dump(e, open(os.path.join(d, 'result.json'), 'w'))"
    )
    spec = StageSpec(**{**spec.__dict__, "command": [sys.executable, "-c", check], "ray": False})
    input_file = Path(spec.secrets_file or "")
    assert stat.S_IMODE(input_file.stat().st_mode) == 0o600
    assert json.loads(input_file.read_text())[SECRET_ENV] == {
        "HF_TOKEN": CANARY, "DB_PASSWORD": CANARY + "-env"
    }  # fmt: skip
    assert CANARY not in repr(spec) and "PLAIN" in spec.env

    result = submit(spec, cfg.cluster).result()

    import hashlib

    digest = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in
              {"HF_TOKEN": CANARY, "DB_PASSWORD": CANARY + "-env", "PLAIN": "visible"}.items()}  # fmt: skip
    assert result == digest  # the command saw every variable
    leaked = _every_byte_under(tmp_path / "jobs", skip={input_file})
    assert CANARY.encode() not in leaked  # submitit's pickles, logs, result: none holds it
    sbatch = render_sbatch(spec, cfg.cluster.model_copy(update={"backend": "slurm"}))
    assert CANARY not in sbatch and "export PLAIN=visible" in sbatch
