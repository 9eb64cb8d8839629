"""The self-hosted control plane (infra/docker/compose.yaml), checked without a Docker engine.

1. The compose file, with its variables filled in from `.env.example` the way Compose does it,
   validates against the Compose Specification's JSON schema (vendored in compose-spec/, see its
   README), and passes what a schema cannot say: every service has a health check with valid
   durations, every `depends_on` waits for `service_healthy`, every volume is a declared named
   volume, restart policies are set, images are pinned (and match the client versions), and no
   secret is written in the file.
2. The variables agree: every `${VAR}` of the compose file is in `.env.example` and vice versa;
   every variable a container gets is one its program reads (Prefect's and MLflow's own setting
   registries, botocore's, libpq's, the images' documented ones); every variable
   `judgeflow.env.example` tells users to set is read by judgeflow or a library it uses, and
   does what the file says when set.

The MLflow server's Dockerfile is linted by test_dockerfile.py (hadolint), like the GPU image.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "infra" / "docker"
COMPOSE = DOCKER / "compose.yaml"
ENV_EXAMPLE = DOCKER / ".env.example"
CLIENT_ENV = DOCKER / "judgeflow.env.example"
MLFLOW_DIR = DOCKER / "mlflow"
SCHEMA = Path(__file__).parent / "compose-spec" / "compose-spec.json"

# ----------------------------------------------------------------------------- helpers

# Compose's interpolation: $$ is a literal $, then ${VAR}, ${VAR:-default}, ${VAR-default},
# ${VAR:?error}, ${VAR?error}, ${VAR:+alt}, ${VAR+alt} and $VAR.
_INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<invalid>))"
)
_GO_DURATION = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+")
_SECRET_NAME = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|ACCESS_KEY|API_KEY|AUTH", re.I)
_ONLY_REQUIRED_VARIABLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(:?\?[^}]*)?\}")
_URL_CREDENTIALS = re.compile(r"://[^/\s:@]*:(?P<password>[^@\s/]+)@")


class InterpolationError(ValueError):
    pass


def interpolate(value: Any, env: Mapping[str, str], used: set[str] | None = None) -> Any:
    """`value` with every string interpolated as Docker Compose does it (values, not keys)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env, used) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, used) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(m: re.Match[str]) -> str:
        if m.group("escaped"):
            return "$"
        if m.group("invalid") is not None:
            raise InterpolationError(f"invalid interpolation in {value!r}")
        name = m.group("braced") or m.group("named")
        op, arg = m.group("op"), m.group("arg") or ""
        if "$" in arg:
            raise InterpolationError(f"nested interpolation in {value!r}: keep it simple")
        if used is not None:
            used.add(name)
        current = env.get(name)
        empty = current is None or (op is not None and op.startswith(":") and current == "")
        if op in (":-", "-"):
            return arg if empty else str(current)
        if op in (":?", "?"):
            if empty:
                raise InterpolationError(f"{name}: {arg or 'required'}")
            return str(current)
        if op in (":+", "+"):
            return "" if empty else arg
        if current is None:
            raise InterpolationError(f"{name} is not set (and has no default) in {value!r}")
        return current

    return _INTERPOLATION.sub(substitute, value)


def read_env_file(path: Path, *, commented: bool = False) -> dict[str, str]:
    """KEY=VALUE lines of a .env file; with `commented`, also `# KEY=VALUE` suggestions."""
    out: dict[str, str] = {}
    prefix = r"(?:#\s*)?" if commented else ""
    for line in path.read_text().splitlines():
        m = re.fullmatch(prefix + r"(?:export\s+)?([A-Z][A-Z0-9_]*)=(.*)", line.strip())
        if m:
            out[m.group(1)] = m.group(2).strip().strip("'\"")
    return out


@cache
def compose_raw() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def compose() -> dict[str, Any]:
    """The compose file as Compose sees it with the example .env (a fresh copy)."""
    return interpolate(copy.deepcopy(compose_raw()), read_env_file(ENV_EXAMPLE))


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def environment(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def all_strings(value: Any, where: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from all_strings(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from all_strings(v, f"{where}[{i}]")
    elif isinstance(value, str):
        yield where, value


def image_tag(image: str) -> tuple[str, str | None]:
    """("postgres", "17.6-bookworm") from "postgres:17.6-bookworm" (a digest counts as a tag)."""
    name, _, digest = image.partition("@")
    repo, sep, tag = name.rpartition(":")
    if not sep or "/" in tag:
        repo, tag = name, ""
    return repo, (tag or None) if not digest else (tag or digest)


def is_pinned(tag: str | None) -> bool:
    return (
        bool(tag)
        and tag != "latest"
        and (tag.startswith("sha256:") or re.search(r"\d+\.\d+", tag) is not None)
    )


# ----------------------------------------------------------------------------- 1. the file


def test_compose_file_matches_the_compose_specification() -> None:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(compose())
    ]
    assert not errors, "\n".join(errors)
    assert "version" not in compose_raw(), "the top-level `version` is obsolete in the spec"


def test_the_schema_check_does_catch_mistakes() -> None:
    """The schema is strict where it matters: a misspelt key or a bad condition fails."""
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    for break_it in (
        lambda c: c["services"]["prefect-server"]["healthcheck"].update(intervall="10s"),
        lambda c: c["services"]["mlflow-server"]["depends_on"]["s3"].update(condition="healthy"),
        lambda c: c["services"]["s3"].update(restart_policy="always"),
        lambda c: c["services"]["prefect-db"].update(ports="5432"),
    ):
        broken = compose()
        break_it(broken)
        assert list(validator.iter_errors(broken)), break_it


def test_interpolation_follows_compose() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("$${SET} ${SET} $SET ${UNSET:-d} ${EMPTY:-d} ${EMPTY-d}", env) == (
        "${SET} x x d d "
    )
    assert interpolate("${SET:?need it}", env) == "x"
    for bad in ("${UNSET}", "${EMPTY:?need it}", "${UNSET?need it}", "${SET:-${OTHER}}"):
        with pytest.raises(InterpolationError):
            interpolate(bad, env)


def test_every_service_has_a_health_check() -> None:
    for name, service in services().items():
        check = service.get("healthcheck")
        assert check, f"{name}: no healthcheck"
        assert not check.get("disable"), f"{name}: healthcheck disabled"
        test = check["test"]
        assert isinstance(test, list) and test[0] in ("CMD", "CMD-SHELL"), f"{name}: {test!r}"
        assert len(test) > 1 and all(part.strip() for part in test[1:]), f"{name}: empty test"
        for key in ("interval", "timeout", "start_period"):
            assert key in check, f"{name}: healthcheck.{key} not set"
            assert _GO_DURATION.fullmatch(str(check[key])), f"{name}: {key}={check[key]!r}"


def test_depends_on_waits_until_healthy() -> None:
    all_services = services()
    edges = 0
    for name, service in all_services.items():
        depends = service.get("depends_on")
        if depends is None:
            continue
        assert isinstance(depends, dict), f"{name}: use the long form with a condition"
        for target, spec in depends.items():
            assert target in all_services, f"{name} depends on unknown {target}"
            assert (spec or {}).get("condition") == "service_healthy", f"{name} -> {target}"
            assert all_services[target].get("healthcheck"), f"{target} has no healthcheck"
            edges += 1
    assert edges >= 3  # prefect -> db, mlflow -> db, mlflow -> s3


def test_state_is_in_declared_named_volumes() -> None:
    declared = set(compose().get("volumes") or {})
    used = set()
    for name, service in services().items():
        for volume in service.get("volumes") or []:
            if isinstance(volume, str):
                source, _, target = volume.partition(":")
                kind = "bind" if source.startswith((".", "/", "~", "$")) or not target else "volume"
            else:
                source, kind = volume.get("source", ""), volume.get("type")
            assert kind == "volume", f"{name}: {volume!r} is not a named volume"
            assert source in declared, f"{name}: volume {source!r} not declared at the top level"
            used.add(source)
    assert used == declared, f"declared but unused: {sorted(declared - used)}"
    assert {"prefect-db", "mlflow-db", "s3"} <= {
        n for n, s in services().items() if s.get("volumes")
    }


def test_restart_policies() -> None:
    for name, service in services().items():
        assert service.get("restart") in ("always", "unless-stopped"), name


def _secret_findings(data: Mapping[str, Any]) -> list[str]:
    """Secrets written into the (uninterpolated) compose file."""
    found = []
    for name, service in (data.get("services") or {}).items():
        for key, value in environment(service).items():
            if _SECRET_NAME.search(key) and not _ONLY_REQUIRED_VARIABLE.fullmatch(value):
                found.append(f"{name}: {key} must be exactly ${{VAR}} or ${{VAR:?…}}, no default")
    for where, text in all_strings(data):
        for m in _URL_CREDENTIALS.finditer(text):
            if not _ONLY_REQUIRED_VARIABLE.fullmatch(m.group("password")):
                found.append(f"{where}: a password written into a URL")
        for m in re.finditer(r"--?[\w.-]*(password|secret|token)[\w.-]*[= ](\S+)", text, re.I):
            if not _ONLY_REQUIRED_VARIABLE.fullmatch(m.group(2)):
                found.append(f"{where}: {m.group(0)!r}")
    return found


def test_no_secret_is_written_in_the_compose_file() -> None:
    assert _secret_findings(compose_raw()) == []
    # and the check finds them: a literal, a default that is a literal, a URL with a password
    bad = copy.deepcopy(compose_raw())
    bad["services"]["prefect-db"]["environment"]["POSTGRES_PASSWORD"] = "hunter2"
    bad["services"]["mlflow-server"]["environment"]["PGPASSWORD"] = "${MLFLOW_DB_PASSWORD:-x}"
    bad["services"]["mlflow-server"]["command"].append("--backend-store-uri=postgresql://u:pw@db/m")
    bad["services"]["s3"]["command"].append("-s3.secret=abc")
    assert len(_secret_findings(bad)) == 4


def test_example_secrets_are_placeholders() -> None:
    for path in (ENV_EXAMPLE, CLIENT_ENV):
        for key, value in read_env_file(path, commented=True).items():
            if _SECRET_NAME.search(key) or key.endswith("_KEY_ID"):
                assert value == "change-me", (
                    f"{path.name}: {key} should be the change-me placeholder"
                )
    ignored = (REPO / ".gitignore").read_text().split()
    assert "infra/docker/.env" in ignored


def test_images_are_pinned() -> None:
    for name, service in services().items():
        assert "image" in service, f"{name}: no image (a build needs an image: name:tag too)"
        tag = image_tag(service["image"])[1]
        assert is_pinned(tag), f"{name}: image {service['image']!r} is not pinned to a version"
    dockerfile = (MLFLOW_DIR / "Dockerfile").read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", dockerfile, re.M)
    assert base and is_pinned(image_tag(base.group(1))[1]), "the MLflow image's base"
    assert re.search(r"^FROM \$\{PYTHON_IMAGE\}$", dockerfile, re.M)
    assert not is_pinned("latest") and not is_pinned(None) and not is_pinned("17")


def _locked(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


def test_servers_run_the_clients_versions() -> None:
    """A server older than its clients breaks them; these are the versions the tests run."""
    svc = services()
    assert image_tag(svc["prefect-server"]["image"])[1].startswith(f"{version('prefect')}-python")
    lock = _locked(MLFLOW_DIR / "requirements.txt")
    assert lock["mlflow"] == version("mlflow") == image_tag(svc["mlflow-server"]["image"])[1]
    assert {"psycopg2-binary", "boto3"} <= set(lock)
    for name in ("boto3", "sqlalchemy", "alembic"):  # shared with the CPU environment
        assert lock[name] == version(name), name
    assert svc["mlflow-server"]["build"]["context"] == "./mlflow"
    assert "-r /opt/mlflow/requirements.txt" in (MLFLOW_DIR / "Dockerfile").read_text()


def test_mlflow_keeps_artifacts_in_the_store_and_no_password_in_its_uri() -> None:
    svc = services()
    command = svc["mlflow-server"]["command"]
    bucket = read_env_file(ENV_EXAMPLE)["MLFLOW_S3_BUCKET"]
    assert f"--artifacts-destination=s3://{bucket}/" in command
    assert "--no-serve-artifacts" not in command and not any(
        c.startswith("--default-artifact-root") for c in command
    )
    uri = next(c.split("=", 1)[1] for c in command if c.startswith("--backend-store-uri="))
    assert urlsplit(uri).password is None and urlsplit(uri).scheme == "postgresql"
    env = environment(svc["mlflow-server"])
    assert env["MLFLOW_S3_ENDPOINT_URL"] == "http://s3:8333"
    assert env["PGUSER"] and env["PGPASSWORD"]
    # the store creates both buckets and reports healthy only once they exist
    s3 = svc["s3"]
    created = next(c for c in s3["command"] if c.startswith("-bucket="))
    example = read_env_file(ENV_EXAMPLE)
    assert created == f"-bucket={example['JUDGEFLOW_S3_BUCKET']},{bucket}"
    shell = s3["healthcheck"]["test"][1]
    assert f"/buckets/{bucket}/" in shell and f"/buckets/{example['JUDGEFLOW_S3_BUCKET']}/" in shell
    assert "-master.telemetry=false" in s3["command"]


# ----------------------------------------------------------------------------- 2. variables


def test_compose_variables_and_env_example_agree() -> None:
    used: set[str] = set()
    interpolate(compose_raw(), read_env_file(ENV_EXAMPLE), used)
    defined = set(read_env_file(ENV_EXAMPLE))
    assert used - defined == set(), (
        f"used by compose.yaml, missing from .env.example: {used - defined}"
    )
    assert defined - used == set(), f"in .env.example but unused by compose.yaml: {defined - used}"
    assert all("$" not in v for v in read_env_file(ENV_EXAMPLE).values())


def test_missing_secrets_stop_compose() -> None:
    """Without a password in .env, Compose refuses to start (the error names the variable)."""
    env = read_env_file(ENV_EXAMPLE)
    for secret in ("PREFECT_DB_PASSWORD", "MLFLOW_DB_PASSWORD", "S3_SECRET_ACCESS_KEY"):
        without = {k: v for k, v in env.items() if k != secret}
        with pytest.raises(InterpolationError, match=secret):
            interpolate(compose_raw(), without)


# Who reads which variable. Prefect and MLflow: their own registries of settings (the container
# images run the same versions, test_servers_run_the_clients_versions). botocore: its credential
# and config providers. The rest from the images' and libpq's documentation.
def prefect_settings() -> set[str]:
    from prefect.settings import Settings
    from prefect.settings.legacy import _get_valid_setting_names

    return set(_get_valid_setting_names(Settings))


def mlflow_settings() -> set[str]:
    import mlflow.cli
    import mlflow.environment_variables as env

    names = {v.name for v in vars(env).values() if isinstance(getattr(v, "name", None), str)}
    return names | {p.envvar for p in mlflow.cli.server.params if isinstance(p.envvar, str)}


def botocore_settings() -> set[str]:
    from botocore import configprovider, credentials

    names = {credentials.EnvProvider.ACCESS_KEY, credentials.EnvProvider.SECRET_KEY}
    names |= set(credentials.EnvProvider.TOKENS)
    for spec in configprovider.BOTOCORE_DEFAUT_SESSION_VARIABLES.values():
        env = spec[1]
        names |= {env} if isinstance(env, str) else set(env or ())
    return names | {"AWS_ENDPOINT_URL"}  # ConfiguredEndpointProvider; behaviour tested below


def fsspec_settings() -> set[str]:
    import inspect

    import fsspec.config
    import s3fs

    conf: dict[str, dict[str, Any]] = {}
    fsspec.config.set_conf_env(conf, {"FSSPEC_S3_ENDPOINT_URL": "x"})
    params = inspect.signature(s3fs.S3FileSystem.__init__).parameters
    return {
        f"FSSPEC_S3_{kw.upper()}" for kw in conf.get("s3", {}) if kw in params
    }  # FSSPEC_S3_ENDPOINT_URL -> S3FileSystem(endpoint_url=…)


def judgeflow_settings() -> set[str]:
    from judgeflow.config.credentials import ENV_NAMES

    text = "\n".join(
        p.read_text() for d in ("src/judgeflow", "flows", "tasks") for p in (REPO / d).rglob("*.py")
    )
    names = set(re.findall(r"[\"'](JUDGEFLOW_[A-Z0-9_]+)[\"']", text))
    return names | {env for envs in ENV_NAMES.values() for env in envs}


LIBPQ = {"PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSSLMODE"}
POSTGRES_IMAGE = {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "PGDATA"}
SEAWEEDFS_IMAGE = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "S3_BUCKET"}  # weed mini (4.44)

READERS: dict[str, Callable[[], set[str]]] = {
    "postgres": lambda: POSTGRES_IMAGE,
    "prefecthq/prefect": prefect_settings,
    "judgeflow-mlflow": lambda: mlflow_settings() | botocore_settings() | LIBPQ,
    "chrislusf/seaweedfs": lambda: SEAWEEDFS_IMAGE,
}


def test_every_container_variable_is_read_by_its_program() -> None:
    for name, service in services().items():
        repo = image_tag(service["image"])[0]
        known = READERS[repo]()
        unknown = set(environment(service)) - known
        assert not unknown, f"{name} ({repo}) sets variables nothing in it reads: {sorted(unknown)}"


def test_the_reader_check_catches_a_misspelt_setting() -> None:
    assert "PREFECT_SERVER_DATABASE_PASSWORD" in prefect_settings()
    assert "PREFECT_SERVER_DATABASE_PASWORD" not in prefect_settings()
    assert "MLFLOW_S3_ENDPOINT_URL" in mlflow_settings()
    assert "MLFLOW_S3_ENDPOINT" not in mlflow_settings() | botocore_settings()


def test_judgeflow_env_example_sets_only_what_is_read() -> None:
    readers = {
        "judgeflow": judgeflow_settings(),
        "prefect": prefect_settings(),
        "mlflow": mlflow_settings(),
        "botocore": botocore_settings(),
        "fsspec/s3fs": fsspec_settings(),
    }
    client = read_env_file(CLIENT_ENV, commented=True)
    assert {"PREFECT_API_URL", "MLFLOW_TRACKING_URI", "JUDGEFLOW_HOME"} <= set(client)
    for key in client:
        assert any(key in names for names in readers.values()), f"nothing reads {key}"
    # the endpoint under every name judgeflow's credentials block exports it as
    from judgeflow.config.credentials import ENV_NAMES

    endpoints = {client[name] for name in ENV_NAMES["endpoint_url"]}
    assert len(endpoints) == 1


def test_judgeflow_env_example_does_what_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """Set as the file says, judgeflow, Prefect, MLflow's client and boto/s3fs pick it up."""
    client = read_env_file(CLIENT_ENV, commented=True)
    for key, value in client.items():
        monkeypatch.setenv(key, value)

    from judgeflow.config import judgeflow_home
    from judgeflow.tracking import resolve_tracking_uri

    assert resolve_tracking_uri() == client["MLFLOW_TRACKING_URI"]
    assert str(judgeflow_home()) == client["JUDGEFLOW_HOME"]

    from prefect.settings import Settings

    assert Settings().api.url == client["PREFECT_API_URL"]

    import botocore.session

    session = botocore.session.get_session()
    s3 = session.create_client("s3")
    assert s3.meta.endpoint_url == client["AWS_ENDPOINT_URL"]
    assert session.get_credentials().access_key == client["AWS_ACCESS_KEY_ID"]
    assert session.get_config_variable("region") == client["AWS_DEFAULT_REGION"]

    import fsspec.config

    conf: dict[str, dict[str, Any]] = {}
    fsspec.config.set_conf_env(conf, dict(client))
    assert conf["s3"]["endpoint_url"] == client["FSSPEC_S3_ENDPOINT_URL"]


def test_judgeflow_env_example_points_at_the_compose_services() -> None:
    """Ports, region and host names agree between the two example files."""
    from mlflow.server.security_utils import get_default_allowed_hosts, is_allowed_host_header

    server = read_env_file(ENV_EXAMPLE)
    client = read_env_file(CLIENT_ENV, commented=True)
    prefect, mlflow_uri, s3 = (
        urlsplit(client[k]) for k in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "AWS_ENDPOINT_URL")
    )
    assert prefect.port == int(server["PREFECT_PORT"]) and prefect.path == "/api"
    assert urlsplit(server["PREFECT_UI_API_URL"]).port == int(server["PREFECT_PORT"])
    assert mlflow_uri.port == int(server["MLFLOW_PORT"])
    assert s3.port == int(server["S3_PORT"])
    assert client["AWS_DEFAULT_REGION"] == server["S3_REGION"]
    # MLflow answers 403 to a Host header it does not allow: the client's must be allowed
    allowed = [h.strip() for h in server["MLFLOW_SERVER_ALLOWED_HOSTS"].split(",") if h.strip()]
    allowed = allowed or get_default_allowed_hosts()
    assert is_allowed_host_header(allowed, mlflow_uri.netloc), mlflow_uri.netloc
    assert not is_allowed_host_header(allowed, "evil.example.com:5000")


def test_jsonschema_is_a_declared_dev_dependency() -> None:
    dev = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(re.match(r"jsonschema\b", r) for r in dev["dev"])
    assert _locked(REPO / "constraints.txt")["jsonschema"] == version("jsonschema")
