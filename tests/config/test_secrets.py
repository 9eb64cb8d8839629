"""A job's secrets reach the job and nothing else: not the spec submitit pickles, not the sbatch
script, not the job folder, not the CLI's output. The job's input file holds them, mode 0600.
Credentials in URLs (a tracking URI with user:password@, a database DSN in cluster.env, a data
source's user:token@ or ?token=) are secrets too: the URL is shown and stored without them, and
they reach MLflow, the job, or the download."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from servers import FilesBehindBasicAuth
from typer.testing import CliRunner

from judgeflow.cli.recipes import _secrets_out_of_parameters
from judgeflow.cli.typer_app import app
from judgeflow.cluster import JobSpec, render_sbatch, submit
from judgeflow.cluster.job import SECRET_ENV
from judgeflow.config import ConfigError, load_config
from judgeflow.config.redaction import (
    flatten,
    has_url_credentials,
    is_secret,
    split_userinfo,
    strip_credentials,
    strip_credentials_within,
)
from judgeflow.config.secrets import (
    MLFLOW_CREDENTIAL_ENV,
    SecretError,
    block_env_name,
    public_env,
    resolve_secrets,
)
from judgeflow.stages import job_spec
from judgeflow.tracking import Tracker, resolve_tracking_uri

CANARY = "canary-7f3a9e-do-not-leak"
DSN = f"postgresql://etl:{CANARY}-dsn@db.internal:5432/warehouse"


@pytest.fixture
def mlflow_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's URI and credential variables unset, and restored after the test (which the code
    under test sets in os.environ itself)."""
    for name in ("MLFLOW_TRACKING_URI", *MLFLOW_CREDENTIAL_ENV):
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
    spec = job_spec(cfg, "train", "run1", {})
    seen = ("HF_TOKEN", "DB_PASSWORD", "PLAIN", "DATABASE_URL", "MLFLOW_TRACKING_PASSWORD",
            "MLFLOW_TRACKING_URI")  # fmt: skip
    check = (
        "import os, json, hashlib; d = os.environ['JUDGEFLOW_STAGE_DIR']; "
        "e = {k: hashlib.sha256(os.environ.get(k, '').encode()).hexdigest() "
        f"for k in {seen!r}}}; "
        "json.dump(e, open(os.path.join(d, 'result.json'), 'w'))"
    )
    spec = JobSpec(**{**spec.__dict__, "command": [sys.executable, "-c", check], "ray": False})
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


def test_credentials_are_stripped_from_every_string_inside_nested_data() -> None:
    """What `Tracker.log_dict` stores (a stage's metrics spool, a summary): every URL at any
    depth loses its credentials; keys, numbers and other strings stay as they are."""
    data = {
        "tracking": "http://alice:s3cret@mlflow:5000",
        "jobs": [{"log": "sent to https://tok@h/x?password=pw", "step": 3}, ("s3://b/k", 0.5)],
        "http://keep@key": None,
    }
    assert strip_credentials_within(data) == {
        "tracking": "http://mlflow:5000",
        "jobs": [{"log": "sent to https://h/x?password=***", "step": 3}, ["s3://b/k", 0.5]],
        "http://keep@key": None,
    }


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


@pytest.fixture
def data_server(tmp_path: Path) -> Iterator[FilesBehindBasicAuth]:
    """The pointwise sample behind basic auth, as `/data/train.jsonl`; the password is a canary."""
    from judgeflow.storage import SAMPLES_DIR

    (tmp_path / "served" / "data").mkdir(parents=True)
    (tmp_path / "served" / "data" / "train.jsonl").write_bytes(
        (SAMPLES_DIR / "openjudge_pointwise.jsonl").read_bytes()
    )
    with FilesBehindBasicAuth(tmp_path / "served", {"reader": CANARY}) as server:
        yield server


def test_a_data_url_with_credentials_downloads_and_is_kept_without_them(
    data_server: FilesBehindBasicAuth, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judgeflow.caching import download_key
    from judgeflow.config.secrets import url_variable
    from judgeflow.storage import SourceError, download

    host = data_server.url.removeprefix("http://")
    url, bare = f"http://reader:{CANARY}@{host}/data/train.jsonl", f"{data_server.url}/data/train.jsonl"  # fmt: skip
    monkeypatch.setenv(url_variable(bare), "")  # unset, and unset again after the test
    monkeypatch.delenv(url_variable(bare))
    # as the user's recipe file has it: used, and the manifest keeps the URL without them
    manifest = download(url, tmp_path / "a")
    assert manifest.source == bare and manifest.files[0].rows
    assert CANARY not in (tmp_path / "a" / "manifest.json").read_text()
    assert all(authorised for _path, authorised in data_server.requests)

    # `judgeflow run --set` passes the URL without them: the flow parameter holds none, the
    # download finds them in the environment, and caches the data under the same key
    for key in ("data.source", "data.val_source", "sft.source"):
        assert _secrets_out_of_parameters([f"{key}={url}"]) == [f"{key}={bare}"]
    assert os.environ[url_variable(bare)] == url
    assert download(bare, tmp_path / "b").to_dict()["files"] == manifest.to_dict()["files"]
    with_bare, with_url = (
        load_config("grpo-pointwise", overrides=[f"data.source={source}"]) for source in (bare, url)
    )
    assert download_key(with_bare) == download_key(with_url)
    assert flatten(with_url)["data.source"] == bare

    # errors name the URL without them, and do not carry an error that shows them
    with pytest.raises(SourceError) as missing:
        download(url.replace("train", "gone"), tmp_path / "c")
    assert CANARY not in str(missing.value) and "/data/gone.jsonl" in str(missing.value)
    assert CANARY not in "".join(traceback.format_exception(missing.value))


def test_a_data_url_with_credentials_as_a_deployment_parameter_is_warned_about(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The warning says how to give the URL instead: without them, and the whole URL in the
    variable the download reads (named after the URL, so it shows nothing secret)."""
    from judgeflow.config.secrets import url_variable, with_url_credentials

    url = f"https://u:{CANARY}@data.internal/x.jsonl?token={CANARY}"
    bare = "https://data.internal/x.jsonl?token=***"
    said: list[str] = []
    load_config("grpo-pointwise", overrides=[f"sft.source={url}"], report=said.append)
    warning = next(line for line in said if line.startswith("sft.source holds credentials"))
    assert CANARY not in warning and url_variable(bare) in warning
    monkeypatch.setenv(url_variable(bare), url)
    assert with_url_credentials(bare) == url
    assert with_url_credentials("https://data.internal/other.jsonl") == "https://data.internal/other.jsonl"  # fmt: skip


def test_mlflow_keeps_no_credentials_whatever_a_stage_logs() -> None:
    """Tags (a data source), params and JSON artifacts (a manifest, a summary) pass through the
    tracker, which strips every URL in them."""

    logged: list[object] = []

    class Client:
        def log_batch(self, run_id: str, **batch: object) -> None:
            logged.append(batch)

        def log_dict(self, run_id: str, data: object, artifact_file: str) -> None:
            logged.append(data)

    tracker = Tracker("run", "http://127.0.0.1:5999")
    tracker.client = Client()  # type: ignore[assignment]
    url = f"https://u:{CANARY}@h/x.jsonl?sig={CANARY}"
    tracker.set_tags({"judgeflow.data.source": url})
    tracker.log_params({"data.source": url})
    tracker.log_dict({"source": url, "files": [{"from": url}], "rows": 3}, "data/manifest.json")
    text = repr(logged)
    assert CANARY not in text and "https://h/x.jsonl?sig=***" in text and "'rows': 3" in text


def test_a_job_is_submitted_without_the_secrets_of_the_flow_s_environment() -> None:
    """What sbatch would copy into the job (Slurm's --export=ALL): none of MLflow's credential
    variables, what `judgeflow run` and Prefect Secret blocks left, or what an env: reference
    names; the job has them from its input file. The storage credentials stay (jobs use them)."""
    from judgeflow.cluster.submit import _auto_executor
    from judgeflow.config.secrets import secret_variables

    cfg = load_config("grpo-pointwise", overrides=["cluster.secrets.DB_PASSWORD=env:MY_DB_PW"])
    environ = ["PATH", "MY_DB_PW", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_URI",
               "JUDGEFLOW_SECRET__HF_TOKEN", "JUDGEFLOW_SECRET_BLOCK__VAULT", "AWS_SECRET_ACCESS_KEY"]  # fmt: skip
    assert secret_variables(cfg.cluster, environ) == [
        "JUDGEFLOW_SECRET_BLOCK__VAULT", "JUDGEFLOW_SECRET__HF_TOKEN", "MLFLOW_TRACKING_PASSWORD", "MY_DB_PW",
    ]  # fmt: skip
    if shutil.which("srun") is None:
        pytest.skip("submitit builds a Slurm executor only where srun is")
    os.environ["JUDGEFLOW_SECRET__PLANTED"] = "x"
    try:
        executor = _auto_executor(cfg.cluster, "/tmp/unused", "slurm")
        command = executor._executor._make_submission_command(Path("job.sh"))
    finally:
        del os.environ["JUDGEFLOW_SECRET__PLANTED"]
    assert command[0] == "env" and command[-2:] == ["sbatch", "job.sh"]
    assert "--unset=JUDGEFLOW_SECRET__PLANTED" in command
