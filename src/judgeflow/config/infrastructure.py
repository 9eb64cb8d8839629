"""The systems a run uses: the cluster its GPU stages run on, the store its artifacts go to,
and the MLflow server that records it."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from judgeflow.config.redaction import is_secret
from judgeflow.config.section import Section
from judgeflow.home import judgeflow_home


class ClusterConfig(Section):
    """Where the GPU stages run; generic resource names, validated before anything is submitted."""

    backend: Literal["local", "slurm", "ray"] = Field(
        "local",
        description="`local` (this machine), `slurm` (submitit, a Ray cluster inside each "
        "allocation) or `ray` (a Ray Job per stage on the cluster at cluster.ray_address)",
    )
    ray_address: str | None = Field(
        None,
        description="backend ray: the cluster's job server (e.g. `http://head:8265`); unset: "
        "RAY_ADDRESS where the flow runs",
    )
    ray_runtime_env: dict[str, Any] = Field(
        default_factory=dict,
        description="backend ray: more of each stage job's Ray runtime environment (e.g. "
        "{py_modules: [...], pip: [...], image_uri: ...}: judgeflow and its inputs carried "
        "to nodes that lack them); its env_vars join the stage's",
    )
    ray_token_path: str | None = Field(
        None,
        description="backend ray: a file holding the cluster's auth token (Ray's token "
        "authentication); unset: Ray's own RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH. Never logged",
    )
    partition: str | None = Field(None, description="Slurm partition")
    account: str | None = Field(None, description="Slurm account")
    qos: str | None = Field(None, description="Slurm quality of service")
    nodes: int = Field(1, gt=0, description="nodes of a training stage")
    gpus_per_node: int = Field(8, ge=0, description="GPUs per node of a training stage")
    cpus_per_task: int | None = Field(
        None, gt=0, description="CPUs per node; unset: the scheduler's default"
    )
    mem_gb: int | None = Field(
        None, gt=0, description="memory per node in GB; unset: the scheduler's default"
    )
    timeout_min: int = Field(24 * 60, gt=0, description="time limit of a stage's job, in minutes")
    constraint: str | None = Field(None, description="Slurm node features (`--constraint`)")
    extra_sbatch: list[str] = Field(default_factory=list, description="extra #SBATCH lines")
    setup: list[str] = Field(default_factory=list, description="shell lines run before a stage")
    python: str | None = Field(
        None,
        description="interpreter command on the nodes, e.g. `apptainer exec --nv img.sif python` "
        "(backend ray: what a stage's Ray Job runs judgeflow with; unset: this interpreter)",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="environment of the stage; secret-looking names reach only the job",
    )
    secrets: dict[str, str] = Field(
        default_factory=dict,
        description="job variable -> env:VAR or prefect:SECRET_BLOCK (where, never the value)",
    )
    shared_dir: str = Field(
        "${JUDGEFLOW_HOME}/jobs",
        validate_default=True,
        description="directory on the shared filesystem: job folders, logs, rendezvous",
    )
    retries: int = Field(2, ge=0, description="resubmissions of a stage killed from outside")
    retry_delay_s: float = Field(10.0, ge=0, description="seconds between resubmissions")
    poll_s: float = Field(2.0, gt=0, description="how often a running stage is checked")
    ray_num_cpus: int | None = Field(None, gt=0, description="CPUs Ray may use per node")
    ray_object_store_mb: int | None = Field(None, ge=75, description="object store per node")
    ray_dashboard: bool = Field(False, description="dashboard on a per-job port, head only")
    node_timeout_s: float = Field(
        60.0, gt=0, description="a node silent this long fails a multi-node stage, retryably"
    )
    orphan_timeout_s: float = Field(
        600.0, gt=0, description="a job nothing follows this long (its flow died) stops"
    )

    @field_validator("ray_runtime_env")
    @classmethod
    def _runtime_env(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Fields Ray's RuntimeEnv knows, values its own checks accept, and no secret in it: a
        job's runtime environment is shown by the dashboard and `ray job list`."""
        if not value:
            return value
        from difflib import get_close_matches

        from ray.runtime_env import RuntimeEnv

        for key in value:
            if key not in RuntimeEnv.known_fields:
                close = get_close_matches(key, RuntimeEnv.known_fields, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise ValueError(f"{key} is not a field of Ray's runtime environment{hint}")
        try:
            RuntimeEnv(**value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"Ray refuses it: {exc}") from None
        for name, text in (value.get("env_vars") or {}).items():
            if is_secret(name, str(text)):
                raise ValueError(
                    f"ray_runtime_env.env_vars.{name} looks like a secret, and a Ray job's "
                    f"environment is shown by its dashboard: use cluster.secrets.{name}"
                )
        return value

    @field_validator("shared_dir")
    @classmethod
    def _expand_home(cls, value: str) -> str:
        return value.replace("${JUDGEFLOW_HOME}", str(judgeflow_home()))

    @field_validator("env", "secrets")
    @classmethod
    def _variable_names(cls, value: dict[str, str], info: Any) -> dict[str, str]:
        """Names go into `export NAME=…` lines of a shell script: identifiers only; a secret's
        value says where the secret is, never what it is."""
        for name, where in value.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if info.field_name == "secrets" and not re.fullmatch(r"(env|prefect):[\w.\-/]+", where):
                raise ValueError(
                    f"cluster.secrets.{name} must say where the secret is — env:VARIABLE or "
                    "prefect:SECRET_BLOCK — not hold it (the value is not shown)"
                )
        return value

    @field_validator("partition", "account", "qos", "constraint", "extra_sbatch", "shared_dir")
    @classmethod
    def _one_sbatch_line(cls, value: Any) -> Any:
        """Each becomes one `#SBATCH` line: a line break would start a shell command."""
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and re.search(r"[\x00-\x1f\x7f]", text):
                raise ValueError(f"{text!r} holds a line break or control character")
        return value


class WandbConfig(Section):
    """Weights & Biases beside MLflow: off unless `project` is set. Each stage's job is a W&B
    run `<MLflow run id>-<stage>` in the group of the MLflow run (which records the project);
    the API key is a secret (`cluster.secrets: {WANDB_API_KEY: env:…}`), never a key here."""

    project: str | None = Field(None, description="W&B project; unset: no W&B")
    entity: str | None = Field(None, description="W&B entity (team or user); unset: W&B's default")
    mode: Literal["online", "offline", "disabled"] = Field(
        "online", description="W&B mode: offline writes the runs to disk only (wandb sync later)"
    )
    tags: list[str] = Field(default_factory=list, description="W&B tags of every run")

    def env(self, run_id: str, stage: str) -> dict[str, str]:
        """What a stage's job sets for W&B (its variables; none without a project)."""
        if not self.project:
            return {}
        return {
            "WANDB_PROJECT": self.project,
            **({"WANDB_ENTITY": self.entity} if self.entity else {}),
            "WANDB_MODE": self.mode,
            **({"WANDB_TAGS": ",".join(self.tags)} if self.tags else {}),
            "WANDB_RUN_GROUP": run_id,
            "WANDB_RUN_ID": f"{run_id}-{stage}",
            "WANDB_NAME": f"{stage} ({run_id})",
            "WANDB_RESUME": "allow",  # a requeued job goes on in the same W&B run
        }


class TrackingConfig(Section):
    """Where MLflow records the run: its experiment and tracking server; W&B beside it."""

    experiment: str = Field("judgeflow", description="MLflow experiment")
    tracking_uri: str | None = Field(None, description="default: $MLFLOW_TRACKING_URI or sqlite")
    wandb: WandbConfig = Field(
        default_factory=WandbConfig, description="Weights & Biases beside MLflow (off by default)"
    )


class StorageConfig(Section):
    """Where artifacts go: downloaded sources, prepared data and each run's outputs."""

    root: str = Field(
        "${JUDGEFLOW_HOME}/artifacts",
        validate_default=True,
        description="local dir or s3:// prefix",
    )
    credentials_block: str | None = Field(
        None,
        description="name of a Prefect Secret block holding the S3 credentials as JSON; "
        "else the environment's (AWS_ACCESS_KEY_ID, a profile, an instance role)",
    )

    @field_validator("root")
    @classmethod
    def _expand_home(cls, value: str) -> str:  # the default is not in the YAML, so expand here
        return value.replace("${JUDGEFLOW_HOME}", str(judgeflow_home()))
