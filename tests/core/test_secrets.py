"""A job's secrets reach the job and nothing else: not the spec submitit pickles, not the sbatch
script, not the job folder, not the CLI's output. The job's input file holds them, mode 0600.
Credentials in URLs (a tracking URI with user:password@, a database DSN in cluster.env) are
secrets too: the URL is shown and stored without them, and they reach MLflow and the job."""

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
from judgeflow.redaction import (
    flatten,
    has_url_credentials,
    is_secret,
    split_userinfo,
    strip_credentials,
)
from judgeflow.secrets import SecretError, block_env_name, public_env, resolve_secrets
from judgeflow.stages import stage_spec
from judgeflow.tracking import CREDENTIAL_ENV, Tracker, resolve_tracking_uri

CANARY = "canary-7f3a9e-do-not-leak"
DSN = f"postgresql://etl:{CANARY}-dsn@db.internal:5432/warehouse"


@pytest.fixture
def mlflow_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's URI and credential variables unset, and restored after the test (which the code
    under test sets in os.environ itself)."""
    for name in ("MLFLOW_TRACKING_URI", *CREDENTIAL_ENV):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlflow_credentials: None
) -> None:
    """A real job through the local backend (submitit, the same handle as Slurm)."""
    monkeypatch.setenv("JUDGEFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CANARY_SOURCE", CANARY + "-env")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://alice:{CANARY}-mlflow@127.0.0.1:5999")
    cfg = load_config(
        "grpo-pointwise",
        overrides=[
            f"cluster.shared_dir={tmp_path / 'jobs'}", "cluster.backend=local",
            f"cluster.env.HF_TOKEN={CANARY}", "cluster.env.PLAIN=visible",
            "cluster.secrets.DB_PASSWORD=env:CANARY_SOURCE", f"cluster.env.DATABASE_URL={DSN}",
        ],
    )  # fmt: skip
    spec = stage_spec(cfg, "train", "run1", {})
    seen = ("HF_TOKEN", "DB_PASSWORD", "PLAIN", "DATABASE_URL", "MLFLOW_TRACKING_PASSWORD",
            "MLFLOW_TRACKING_URI")  # fmt: skip
    check = (
        "import os, json, hashlib; d = os.environ['JUDGEFLOW_STAGE_DIR']; "
        "e = {k: hashlib.sha256(os.environ.get(k, '').encode()).hexdigest() "
        f"for k in {seen!r}}}; "
        "json.dump(e, open(os.path.join(d, 'result.json'), 'w'))"
    )
    spec = StageSpec(**{**spec.__dict__, "command": [sys.executable, "-c", check], "ray": False})
    input_file = Path(spec.secrets_file or "")
    assert stat.S_IMODE(input_file.stat().st_mode) == 0o600
    assert json.loads(input_file.read_text())[SECRET_ENV] == {
        "HF_TOKEN": CANARY, "DB_PASSWORD": CANARY + "-env", "DATABASE_URL": DSN,
        "MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": CANARY + "-mlflow",
    }  # fmt: skip
    assert CANARY not in repr(spec) and "PLAIN" in spec.env
    assert spec.env["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:5999"

    result = submit(spec, cfg.cluster).result()

    import hashlib

    expected = {"HF_TOKEN": CANARY, "DB_PASSWORD": CANARY + "-env", "PLAIN": "visible",
                "DATABASE_URL": DSN, "MLFLOW_TRACKING_PASSWORD": CANARY + "-mlflow",
                "MLFLOW_TRACKING_URI": "http://127.0.0.1:5999"}  # fmt: skip
    digest = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in expected.items()}
    assert result == digest  # the command saw every variable
    leaked = _every_byte_under(tmp_path / "jobs", skip={input_file})
    assert CANARY.encode() not in leaked  # submitit's pickles, logs, result: none holds it
    sbatch = render_sbatch(spec, cfg.cluster.model_copy(update={"backend": "slurm"}))
    assert CANARY not in sbatch and "export PLAIN=visible" in sbatch


@pytest.mark.parametrize(
    ("text", "stripped"),
    [
        ("http://alice:s3cret@mlflow:5000", "http://mlflow:5000"),
        ("postgresql://u:p%40ss@db/x?sslmode=require", "postgresql://db/x?sslmode=require"),
        ("https://ghp_token@github.com/org/repo.git", "https://github.com/org/repo.git"),
        ("http://u:pa@ss@host/x", "http://host/x"),  # urlsplit's reading: the last @ ends it
        ("a=postgresql://u:pw@db/x b=redis://:pw@cache:6379", "a=postgresql://db/x b=redis://cache:6379"),
        # in the query (or an OAuth fragment): a parameter named like a secret
        ("postgresql://db/x?user=u&password=pw", "postgresql://db/x?user=u&password=***"),
        ("https://h/x.jsonl?access_token=t0k#top", "https://h/x.jsonl?access_token=***#top"),
        ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=ff&X-Amz-Expires=60",
         "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Expires=60"),
        ("https://acct.blob.core.windows.net/c/x?sv=2022&sig=abc%3D", "https://acct.blob.core.windows.net/c/x?sv=2022&sig=***"),
        ("https://h/q?key=AIza1;sslpassword=pw", "https://h/q?key=***;sslpassword=***"),
        ("https://h/cb#access_token=t&state=1", "https://h/cb#access_token=***&state=1"),
        # a password with an unencoded / ? or #: doubtful, so credentials (and shown short)
        ("http://u:pa/ss@host/x", "http://host/x"),
        ("http://u:pa?ss@host", "http://host"),
        ("http://u:pa#ss@host:5000/x", "http://host:5000/x"),
    ],
)  # fmt: skip
def test_credentials_in_urls_are_found_and_stripped(text: str, stripped: str) -> None:
    assert has_url_credentials(text) and is_secret("cluster.env.URL", text)
    assert strip_credentials(text) == stripped
    assert not has_url_credentials(stripped)


@pytest.mark.parametrize(
    "text",
    ["http://mlflow:5000", "sqlite:////tmp/a@b/mlflow.db", "https://medium.com/@someone",
     "https://host/q?mail=a@b.c", "mailto:a@b.c", "user@host:path", "file:///data/x@1.jsonl",
     "http://localhost:8080/@team", "https://h/x?keyword=a&sslkey=/k.pem&token=", "http://[::1]/@x",
     "https://h/x?password=***"],
)  # fmt: skip
def test_urls_without_credentials_are_left_alone(text: str) -> None:
    assert not has_url_credentials(text) and strip_credentials(text) == text


def test_userinfo_splits_into_user_and_decoded_password() -> None:
    assert split_userinfo("http://alice:p%40ss%3Aw@h:5000/") == (
        "http://h:5000/",
        "alice",
        "p@ss:w",
    )
    assert split_userinfo("https://tok@h") == ("https://h", "tok", None)
    assert split_userinfo("http://h:5000") == ("http://h:5000", None, None)
    assert split_userinfo("http://u:pa/ss@h/x?y=1") == ("http://h/x?y=1", "u", "pa/ss")


def test_an_env_value_holding_url_credentials_is_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    overrides = [f"cluster.env.DATABASE_URL={DSN}", "cluster.env.MIRROR=https://pypi.org/simple"]
    cfg = load_config("grpo-pointwise", overrides=overrides, report=said.append)
    assert public_env(cfg.cluster) == {"MIRROR": "https://pypi.org/simple"}
    assert resolve_secrets(cfg.cluster) == {"DATABASE_URL": DSN}
    assert flatten(cfg)["cluster.env.DATABASE_URL"] == "postgresql://db.internal:5432/warehouse"
    assert any("cluster.secrets.DATABASE_URL=env:VARIABLE" in line for line in said)
    assert not any(CANARY in line for line in said)

    monkeypatch.setenv("JUDGEFLOW_SECRET__DATABASE_URL", "")
    assert _secrets_out_of_parameters(overrides) == [
        "cluster.secrets.DATABASE_URL=env:JUDGEFLOW_SECRET__DATABASE_URL", overrides[1]
    ]  # fmt: skip
    assert os.environ["JUDGEFLOW_SECRET__DATABASE_URL"] == DSN

    shown = CliRunner().invoke(app, ["config", "grpo-pointwise", "--set", overrides[0]])
    assert shown.exit_code == 0 and CANARY not in shown.output
    assert "DATABASE_URL: '***'" in shown.output


def test_a_tracking_uri_with_credentials_hands_them_to_mlflow(
    mlflow_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://alice:{CANARY}@127.0.0.1:5999")
    assert resolve_tracking_uri() == "http://127.0.0.1:5999"
    assert os.environ["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:5999"  # what jobs inherit
    assert os.environ["MLFLOW_TRACKING_USERNAME"] == "alice"
    assert os.environ["MLFLOW_TRACKING_PASSWORD"] == CANARY
    # MLflow's client authenticates with them (basic auth) against the bare URI
    creds = MlflowClient("http://127.0.0.1:5999")._tracking_client.store.get_host_creds()
    assert (creds.host, creds.username, creds.password) == ("http://127.0.0.1:5999", "alice", CANARY)  # fmt: skip

    # configured rather than in the environment: the same, and the config shows no credentials
    uri = f"http://bob:{CANARY}-2@127.0.0.1:5998"
    tracker = Tracker("run-id", uri)
    assert tracker.tracking_uri == "http://127.0.0.1:5998"
    assert os.environ["MLFLOW_TRACKING_PASSWORD"] == CANARY + "-2"
    cfg = load_config("grpo-pointwise", overrides=[f"tracking.tracking_uri={uri}"])
    assert flatten(cfg)["tracking.tracking_uri"] == "http://127.0.0.1:5998"
    shown = CliRunner().invoke(app, ["config", "grpo-pointwise", "--set", f"tracking.tracking_uri={uri}"])  # fmt: skip
    assert shown.exit_code == 0 and CANARY not in shown.output


def test_judgeflow_run_keeps_tracking_credentials_out_of_the_flow_parameters(
    mlflow_credentials: None,
) -> None:
    said: list[str] = []
    uri = f"tracking.tracking_uri=http://carol:{CANARY}@mlflow.internal:5000"
    load_config("grpo-pointwise", overrides=[uri], report=said.append)  # a deployment's parameter
    assert any("MLFLOW_TRACKING_USERNAME" in line for line in said)
    assert not any(CANARY in line for line in said)

    assert _secrets_out_of_parameters([uri]) == [
        "tracking.tracking_uri=http://mlflow.internal:5000"
    ]
    assert os.environ["MLFLOW_TRACKING_USERNAME"] == "carol"
    assert os.environ["MLFLOW_TRACKING_PASSWORD"] == CANARY


@pytest.mark.parametrize("userinfo", [f"{CANARY}@", f":{CANARY}@"])
def test_a_tracking_uri_with_a_user_or_password_alone_is_refused(
    userinfo: str, mlflow_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow sends basic auth only with both (mlflow/utils/rest_utils.py): used as it is, the
    URI would reach the server unauthenticated, or with a password left in the environment."""
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "stale")
    uri = f"https://{userinfo}mlflow.internal"
    with pytest.raises(ConfigError, match="MLFLOW_TRACKING_TOKEN") as refused:
        resolve_tracking_uri(uri)
    assert CANARY not in str(refused.value) and "https://mlflow.internal" in str(refused.value)
    assert "MLFLOW_TRACKING_USERNAME" not in os.environ  # nothing paired with the stale password
    result = CliRunner().invoke(app, ["run", "grpo-pointwise", "--set", f"tracking.tracking_uri={uri}"])  # fmt: skip
    assert result.exit_code == 2 and CANARY not in result.output
    assert "MLFLOW_TRACKING_TOKEN" in result.output
