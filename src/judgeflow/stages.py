"""The pipeline's stages as plain functions: config in, paths and metrics out.

Prefect tasks wrap these one to one (`tasks/`); a Slurm job or a test can call them directly.
Each stage leaves its outputs in the artifact store under a content-derived key, so a re-run
with the same inputs finds them in the same place.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgeflow.caching import prepare_identity
from judgeflow.cluster.stage import PROGRESS_FILE, PYTHON, RESULT_FILE, StageSpec
from judgeflow.config import RunConfig, flatten, judgeflow_home
from judgeflow.storage import ArtifactStore, Manifest, SourceError, download, write_json
from judgeflow.tracking import Tracker, git_commit, resolve_tracking_uri

if TYPE_CHECKING:
    from judgeflow.data import GrrmPrepareResult

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class PreparedData:
    train_file: str
    val_file: str | None
    report_file: str
    report: dict[str, Any]


@dataclass(frozen=True)
class TrainedModel:
    model_dir: str  # final weights + tokenizer, loadable with from_pretrained
    checkpoint_dir: str | None
    global_step: int
    resumed_from: str | None
    metrics: dict[str, float]


def store_for(cfg: RunConfig) -> ArtifactStore:
    return ArtifactStore(cfg.storage.root)


def fetch(cfg: RunConfig, uri: str) -> str:
    """A local path for what a stage reads: itself, or a store URI's verified local copy."""
    return str(store_for(cfg).fetch(uri))


def local_manifest(cfg: RunConfig, manifest: Manifest) -> Manifest:
    """`manifest` with its files on this machine: the download dir, or the published copy."""
    if Path(manifest.local_dir).is_dir() or not manifest.uri:
        return manifest
    return replace(manifest, local_dir=fetch(cfg, manifest.uri))


def _published(cfg: RunConfig, local_dir: Path, *parts: str) -> Callable[[str], str]:
    """Publish `local_dir` to the store (a remote one); map its local paths to their URIs."""
    store = store_for(cfg)
    if store.is_local:
        return lambda path: path
    uri = store.publish(local_dir, *parts)

    def to_uri(path: str) -> str:
        rel = Path(path).relative_to(local_dir).as_posix()
        return uri if rel == "." else f"{uri}/{rel}"

    return to_uri


def start_tracking(
    cfg: RunConfig, *, run_name: str | None = None, tags: dict[str, str] | None = None
) -> Tracker:
    """Open the pipeline's MLflow run and record the flattened config and lineage tags."""
    tracker = Tracker.start(
        cfg.tracking.experiment,
        run_name=run_name or cfg.recipe,
        tracking_uri=cfg.tracking.tracking_uri,
        tags={
            "judgeflow.recipe": cfg.recipe,
            "judgeflow.mode": cfg.mode,
            "judgeflow.engine": cfg.resolved_engine,
            "judgeflow.backend": cfg.cluster.backend,
            "judgeflow.config_hash": cfg.fingerprint(),
            "judgeflow.base_model": cfg.model.path,
            "judgeflow.git_commit": git_commit(Path(__file__).parent) or "unknown",
            **(tags or {}),
        },
    )
    tracker.log_params(flatten(cfg))
    return tracker


def download_stage(cfg: RunConfig, progress: Progress | None = None) -> Manifest:
    """Fetch the data source into the store, keyed by source + revision + listing fingerprint.

    The fingerprint (sizes, ETags/mtimes) gives a changed source its own directory, so a
    cached manifest of the old content never points at files the new download overwrote.
    """
    from judgeflow.caching import digest, source_fingerprint

    fingerprint = digest(source_fingerprint(cfg.data.source, cfg.data.revision))
    key = _short_hash(cfg.data.source, cfg.data.revision or "", fingerprint)
    store = store_for(cfg)
    dest = store.local_dir("sources", key)
    manifest = download(cfg.data.source, dest, revision=cfg.data.revision, progress=progress)
    if not store.is_local:  # so a worker on another machine can read it
        manifest = replace(manifest, uri=store.publish(dest, "sources", key))
    return manifest


def val_source_config(cfg: RunConfig) -> RunConfig:
    """`cfg` with `data.val_source` as the source: the validation data is downloaded and
    manifested like the training data (a revision pins only `data.source`)."""
    if not cfg.data.val_source:
        raise ValueError("no data.val_source is set")
    data = cfg.data.model_copy(update={"source": cfg.data.val_source, "revision": None})
    return cfg.model_copy(update={"data": data})


def prepare_stage(
    cfg: RunConfig, manifest: Manifest, val_manifest: Manifest | None = None
) -> PreparedData:
    """Validate and render the judge prompts into verl RL parquet (+ a validation split).

    With `val_manifest` (from `data.val_source`) the whole training source is trained on and
    the validation rows are that source's, prepared the same way; `data.val_fraction` is unused.
    """
    from judgeflow.data import prepare_judge

    mode = cfg.mode
    if mode == "grrm":
        raise NotImplementedError("GRRM data preparation runs in the grrm flow")
    params = _prepare_params(cfg)
    tokenizer = fetch(cfg, cfg.model.path) if cfg.data.filter_overlong_prompts else None
    identity = json.dumps(prepare_identity(cfg), sort_keys=True)
    hashes = [manifest.content_hash] + ([val_manifest.content_hash] if val_manifest else [])
    key = _short_hash(*hashes, identity)
    out_dir = store_for(cfg).local_dir("prepared", key)
    manifest = local_manifest(cfg, manifest)
    val_manifest = local_manifest(cfg, val_manifest) if val_manifest else None

    def run(m: Manifest, output: Path, val_fraction: float) -> Any:
        return prepare_judge(
            mode,
            [str(p) for p in m.paths],
            str(output),
            tokenizer=tokenizer,
            max_prompt_length=cfg.data.max_prompt_length if tokenizer else None,
            **{**params, "val_fraction": val_fraction},
        )

    if val_manifest is None:
        result = run(manifest, out_dir / f"{cfg.mode}.parquet", cfg.data.val_fraction)
        val_file = str(result.val_path) if result.val_path else None
        report = result.report
    else:
        result = run(manifest, out_dir / f"{cfg.mode}.parquet", 0.0)
        val = run(val_manifest, out_dir / "val_source" / f"{cfg.mode}.parquet", 0.0)
        val_file = str(val.train_path)
        report = {**result.report, "val_source": {"source": val_manifest.source, **val.report}}
        from judgeflow.data.io import atomic_write_text

        atomic_write_text(
            result.report_path, json.dumps(report, indent=2, ensure_ascii=False) + "\n"
        )
    uri = _published(cfg, out_dir, "prepared", key)
    return PreparedData(
        train_file=uri(str(result.train_path)),
        val_file=uri(val_file) if val_file else None,
        report_file=uri(str(result.report_path)),
        report=report,
    )


def train_stage(
    cfg: RunConfig,
    data: PreparedData,
    *,
    output_dir: str | Path,
    run_id: str | None = None,
    metrics_sink: Callable[[dict[str, float], int], None] | None = None,
    progress: Progress | None = None,
) -> TrainedModel:
    """GRPO on the prepared data with the configured engine: TRL here, verl on a GPU cluster.

    Both resume from the newest checkpoint in `output_dir`, so a resubmitted job continues.
    """
    cfg = with_policy(cfg, fetch(cfg, cfg.model.path))  # e.g. an SFT model in the store
    data = replace(
        data,
        train_file=fetch(cfg, data.train_file),
        val_file=fetch(cfg, data.val_file) if data.val_file else None,
    )
    if cfg.resolved_engine == "verl":
        return _train_with_verl(cfg, data, output_dir=output_dir, run_id=run_id)
    from judgeflow.engines import trl

    result = trl.train_grpo(
        trl.params_from(cfg, output_dir),
        data.train_file,
        eval_file=data.val_file,
        metrics_sink=metrics_sink,
        progress=progress,
        resume=True,
    )
    final = Path(result.final_model_dir)
    return TrainedModel(
        model_dir=_published(cfg, final, "runs", run_id or "local", "final")(str(final)),
        checkpoint_dir=str(result.last_checkpoint) if result.last_checkpoint else None,
        global_step=result.global_step,
        resumed_from=str(result.resumed_from) if result.resumed_from else None,
        metrics=dict(result.metrics),
    )


def _train_with_verl(
    cfg: RunConfig, data: PreparedData, *, output_dir: str | Path, run_id: str | None
) -> TrainedModel:
    """verl's trainer on this job's Ray cluster; metrics go to the pipeline's MLflow run."""
    from judgeflow.engines.verl import run_verl_stage

    run_name = Tracker.attach(run_id, cfg.tracking.tracking_uri).run_name() if run_id else None
    checkpoints = Path(output_dir) / "verl"
    resumed = (
        (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip()
        if (checkpoints / "latest_checkpointed_iteration.txt").exists()
        else None
    )
    result = run_verl_stage(
        cfg,
        train_files=[data.train_file],
        val_files=[data.val_file] if data.val_file else [data.train_file],
        checkpoint_dir=str(checkpoints),
        publish_to=("runs", run_id or "local", "final"),
        mlflow_run_id=run_id,
        tracking_uri=resolve_tracking_uri(cfg.tracking.tracking_uri),
        nnodes=cfg.cluster.nodes,
        n_gpus_per_node=cfg.cluster.gpus_per_node,
        experiment_name=run_name,
    )
    return TrainedModel(
        model_dir=str(result["model_dir"]),
        checkpoint_dir=str(result["checkpoint_dir"]),
        global_step=int(result["global_step"]),
        resumed_from=f"global_step_{resumed}" if resumed else None,
        metrics={},
    )


def evaluate_stage(cfg: RunConfig, model_dir: str, data: PreparedData) -> dict[str, Any]:
    """Judge metrics of `model_dir` on the validation split (predictions for a table)."""
    from judgeflow.evaluation import evaluate_judge, params_from

    if not data.val_file:
        return {"metrics": {}, "rows": []}
    model = fetch(cfg, model_dir)  # a model in the store: its verified local copy
    result = evaluate_judge(model, fetch(cfg, data.val_file), **params_from(cfg))
    return {"metrics": dict(result.metrics), "rows": list(result.predictions)}


def run_dir(cfg: RunConfig, run_id: str) -> Path:
    """Where a run's checkpoints live (local store, or a local staging dir for remote stores)."""
    return store_for(cfg).local_dir("runs", run_id)


def _prepare_params(cfg: RunConfig) -> dict[str, Any]:
    """prepare_judge's keyword arguments: the identity minus what is passed separately."""
    params = prepare_identity(cfg)
    for passed_separately in ("mode", "tokenizer", "max_prompt_length"):
        params.pop(passed_separately)
    return params


def _short_hash(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------- stages as jobs
#
# A stage that runs as a job (Slurm, or a local process through the same interface) gets its
# inputs as one JSON file in its stage directory and leaves result.json and progress.json there.

STAGE_INPUT = "input.json"


def stage_spec(
    cfg: RunConfig,
    stage: str,
    run_id: str,
    payload: dict[str, Any],
    *,
    name: str | None = None,
    dry_run: bool = False,
) -> StageSpec:
    """The job for `stage` ("train" or "evaluate"): command, environment, shared directory.

    Unless `dry_run`, this writes the stage input file the command reads.
    """
    name = name or stage
    workdir = Path(cfg.cluster.shared_dir) / run_id / name
    if not dry_run:
        stage_input = {
            "stage": stage,
            "config": cfg.model_dump(mode="json"),
            "run_id": run_id,
            **payload,
        }
        write_json(workdir / STAGE_INPUT, stage_input)
    env = {
        **cfg.cluster.env,
        "MLFLOW_TRACKING_URI": resolve_tracking_uri(cfg.tracking.tracking_uri),
        "MLFLOW_RUN_ID": run_id,
        "JUDGEFLOW_HOME": str(judgeflow_home()),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    return StageSpec(
        name=name,
        command=[PYTHON, "-m", "judgeflow", "stage", "run", str(workdir / STAGE_INPUT)],
        workdir=str(workdir),
        env=env,
        ray=cfg.cluster.backend == "slurm",
        gpus_per_node=cfg.cluster.gpus_per_node,
        ray_num_cpus=cfg.cluster.ray_num_cpus,
        ray_object_store_mb=cfg.cluster.ray_object_store_mb,
        ray_dashboard=cfg.cluster.ray_dashboard,
    )


def train_stage_spec(
    cfg: RunConfig, data: PreparedData, run_id: str, *, dry_run: bool = False
) -> StageSpec:
    payload = {"data": asdict(data), "output_dir": str(run_dir(cfg, run_id))}
    return stage_spec(cfg, "train", run_id, payload, dry_run=dry_run)


def evaluation_job_config(cfg: RunConfig) -> RunConfig:
    """`cfg` with the evaluation job's own resources: one node, `evaluation.gpus` GPUs (at most
    a node's), so generating on one device does not hold the whole training allocation."""
    gpus = min(cfg.evaluation.gpus, cfg.cluster.gpus_per_node)
    cluster = cfg.cluster.model_copy(update={"nodes": 1, "gpus_per_node": gpus})
    return cfg.model_copy(update={"cluster": cluster})


def evaluate_stage_spec(
    cfg: RunConfig, model_dir: str, data: PreparedData, run_id: str, label: str
) -> StageSpec:
    """The evaluation job: HF generation in one process, no Ray cluster (see
    `evaluation_job_config` for its resources)."""
    payload = {"data": asdict(data), "model_dir": model_dir}
    spec = stage_spec(cfg, "evaluate", run_id, payload, name=f"evaluate-{label}")
    return replace(spec, ray=False)


#: Metrics a stage's progress file carries (the terminal bar shows them beside the step).
PROGRESS_METRICS = ("train/reward_mean", "train/format_failure_rate", "sft/loss")


def run_stage_job(input_file: str | Path) -> dict[str, Any]:
    """Inside the job: run the stage named in the input file; leave progress and result."""
    inp = json.loads(Path(input_file).read_text())
    cfg = RunConfig.model_validate(inp["config"])
    workdir = Path(input_file).parent
    tracker = Tracker.attach(inp["run_id"], cfg.tracking.tracking_uri)
    latest: dict[str, float] = {}
    position = {"step": 0, "total": 0}

    def write_progress() -> None:
        shown = {k: latest[k] for k in PROGRESS_METRICS if k in latest}
        write_json(workdir / PROGRESS_FILE, {**position, "metrics": shown})

    def progress(step: int, total: int) -> None:
        position.update(step=step, total=total)
        write_progress()

    def sink(metrics: dict[str, float], step: int) -> None:
        tracker(metrics, step)
        latest.update(metrics)
        write_progress()

    result: dict[str, Any]
    if inp["stage"] == "sft":
        result = sft_stage(
            cfg,
            inp["sft_file"],
            output_dir=inp["output_dir"],
            run_id=inp["run_id"],
            metrics_sink=sink,
            progress=progress,
        )
        if os.environ.get("NODE_RANK", "0") != "0":
            return result  # only the first node reports
        write_json(workdir / RESULT_FILE, result)
        return result
    data = PreparedData(**inp["data"])
    if inp["stage"] == "train":
        model = train_stage(
            cfg,
            data,
            output_dir=inp["output_dir"],
            run_id=inp["run_id"],
            metrics_sink=sink,
            progress=progress,
        )
        result = asdict(model)
    elif inp["stage"] == "evaluate":
        result = evaluate_stage(cfg, inp["model_dir"], data)
    else:
        raise ValueError(f"{input_file}: unknown stage {inp['stage']!r}")
    write_json(workdir / RESULT_FILE, result)
    return result


# ---------------------------------------------------------------------------- judge SFT


@dataclass(frozen=True)
class SftData:
    """The validated SFT conversations (`messages` parquet) and their report."""

    file: str
    report: dict[str, Any]  # counts (read / written / dropped), dropped rows, sha256


def sft_source_config(cfg: RunConfig) -> RunConfig:
    """`cfg` with `data.source` pointing at the SFT source, so `download` fetches it."""
    if not cfg.sft.source:
        raise ValueError("sft.source is not set")
    data = cfg.data.model_copy(update={"source": cfg.sft.source, "revision": None})
    return cfg.model_copy(update={"data": data})


def prepare_sft_stage(cfg: RunConfig, manifest: Manifest) -> SftData:
    """Validate the judge SFT rows into one `messages` parquet, keyed by content."""
    from judgeflow.data.sft import prepare_sft_messages

    key = _short_hash(manifest.content_hash, "sft-messages", str(cfg.data.skip_invalid))
    out_dir = store_for(cfg).local_dir("prepared", key)
    result = prepare_sft_messages(
        [str(p) for p in local_manifest(cfg, manifest).paths],
        out_dir / "sft.parquet",
        skip_invalid=cfg.data.skip_invalid,
    )
    uri = _published(cfg, out_dir, "prepared", key)
    return SftData(file=uri(str(result.output_path)), report=result.report)


def with_policy(cfg: RunConfig, model_dir: str) -> RunConfig:
    """`cfg` whose policy (model.path) is `model_dir`: RL starts from the SFT model."""
    return cfg.model_copy(update={"model": cfg.model.model_copy(update={"path": model_dir})})


# ---------------------------------------------------------------------------- GRRM


@dataclass(frozen=True)
class GrrmData:
    """What the GRRM pipeline trains on: SFT messages, RL rows (train, test) and the reports."""

    sft_file: str
    rl: PreparedData  # train_file: augmented RL rows; val_file: the un-augmented test split
    reports: dict[str, tuple[str, dict[str, Any]]]  # "sft"/"rl_train"/"rl_test" -> (file, report)


def grrm_split_files(manifest: Manifest) -> tuple[Path, Path]:
    """The train and test files of a GRRM source (named by stem: `train.*`, `test.*`)."""
    by_stem = {p.name.split(".", 1)[0]: p for p in manifest.paths}
    missing = [name for name in ("train", "test") if name not in by_stem]
    if missing:
        found = ", ".join(sorted(p.name for p in manifest.paths))
        raise SourceError(
            f"{manifest.source}: a GRRM source needs train.* and test.* files; "
            f"missing {', '.join(missing)} (found: {found})"
        )
    return by_stem["train"], by_stem["test"]


@dataclass(frozen=True)
class GrrmRlJob:
    """One `prepare_grrm_rl` call: input, output and keyword arguments (plain values, so a
    sharded run can ship them to its workers)."""

    input: str
    output: str
    options: dict[str, Any]


def _grrm_dir_and_columns(cfg: RunConfig, manifest: Manifest) -> tuple[Path, dict[str, Any]]:
    """The content-keyed output directory of a GRRM preparation and the column arguments."""
    g = cfg.data.grrm
    columns: dict[str, Any] = {
        "src_key": g.src_key,
        "src_lang_key": g.src_lang_key,
        "trg_lang_key": g.trg_lang_key,
        "mt_key": g.mt_key,
        "score_key": g.score_key,
        "skip_invalid": cfg.data.skip_invalid,
    }
    identity = json.dumps({**g.model_dump(), "seed": cfg.data.seed, "skip": cfg.data.skip_invalid})
    out = store_for(cfg).local_dir("prepared", _short_hash(manifest.content_hash, "grrm", identity))
    return out, columns


def grrm_rl_train_job(cfg: RunConfig, manifest: Manifest) -> GrrmRlJob:
    """The augmented RL train preparation, the one large enough to fan out over shards."""
    g = cfg.data.grrm
    train, _ = grrm_split_files(local_manifest(cfg, manifest))
    out, columns = _grrm_dir_and_columns(cfg, manifest)
    options = {
        "subgroup_augment": g.subgroup_augment,
        "shuffle_augment": g.shuffle_augment,
        "seed": cfg.data.seed,
        "split": "train",
        **columns,
    }
    return GrrmRlJob(str(train), str(out / "rl_train.parquet"), options)


def grrm_val_file(val_manifest: Manifest) -> Path:
    """The validation file of a `data.val_source`: its `test.*` file, or its only file."""
    paths = val_manifest.paths
    tests = [p for p in paths if p.name.split(".", 1)[0] == "test"]
    if len(tests) == 1 or len(paths) == 1:
        return (tests or paths)[0]
    found = ", ".join(sorted(p.name for p in paths))
    raise SourceError(
        f"{val_manifest.source}: data.val_source needs one file or a test.* file (found: {found})"
    )


def prepare_grrm_stage(
    cfg: RunConfig,
    manifest: Manifest,
    rl_train: GrrmPrepareResult | None = None,
    val_manifest: Manifest | None = None,
) -> GrrmData:
    """SFT parquet and augmented RL parquet from the train split; plain RL rows from the test
    split, or from `data.val_source` (`val_manifest`) when it is set.

    `rl_train` is the RL train preparation when it already ran elsewhere (sharded over Ray, see
    `flows/prepare_sharded.py`); it must be the file `grrm_rl_train_job` names.
    """
    from judgeflow.data import prepare_grrm_rl, prepare_grrm_sft

    g = cfg.data.grrm
    manifest = local_manifest(cfg, manifest)
    train, test = grrm_split_files(manifest)
    out, columns = _grrm_dir_and_columns(cfg, manifest)
    test_out = out
    if val_manifest is not None:
        test = grrm_val_file(local_manifest(cfg, val_manifest))
        test_out = out / f"val-{val_manifest.content_hash[:16]}"
    job = grrm_rl_train_job(cfg, manifest)
    if rl_train is None:
        rl_train = prepare_grrm_rl(job.input, job.output, **job.options)
    elif rl_train.output_path != job.output:
        raise ValueError(f"rl_train is {rl_train.output_path}, this stage writes {job.output}")
    sft = prepare_grrm_sft(
        str(train), str(out / "sft.parquet"), analysis_key=g.analysis_key, **columns
    )
    rl_test = prepare_grrm_rl(str(test), str(test_out / "rl_test.parquet"), split="test", **columns)
    uri = _published(cfg, out, "prepared", out.name)
    return GrrmData(
        sft_file=uri(sft.output_path),
        rl=PreparedData(
            train_file=uri(rl_train.output_path),
            val_file=uri(rl_test.output_path),
            report_file=uri(rl_train.report_path),
            report=rl_train.report,
        ),
        reports={  # local files: the reports are logged to MLflow by the process that made them
            name: (str(result.report_path), result.report)
            for name, result in (("sft", sft), ("rl_train", rl_train), ("rl_test", rl_test))
        },
    )


def sft_stage(
    cfg: RunConfig,
    sft_file: str,
    *,
    output_dir: str | Path,
    run_id: str | None = None,
    metrics_sink: Callable[[dict[str, float], int], None] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """LLaMA-Factory SFT of model.path on `messages` rows; returns the model dir and metrics."""
    from judgeflow.engines import llamafactory

    cfg = with_policy(cfg, fetch(cfg, cfg.model.path))
    result = llamafactory.run_sft(
        llamafactory.params_from(cfg, output_dir),
        fetch(cfg, sft_file),
        metrics_sink=metrics_sink,
        progress=progress,
    )
    model = _published(cfg, Path(result.model_dir), "runs", run_id or "local", "sft")
    return {"model_dir": model(str(result.model_dir)), "metrics": dict(result.metrics)}


def sft_stage_spec(cfg: RunConfig, sft_file: str, run_id: str) -> StageSpec:
    """SFT runs on every node of the allocation (torchrun rendezvous), not under Ray."""
    payload = {"sft_file": sft_file, "output_dir": str(run_dir(cfg, run_id) / "sft")}
    spec = stage_spec(cfg, "sft", run_id, payload)
    return replace(
        spec, ray=False, torchrun=cfg.cluster.backend == "slurm" and cfg.cluster.nodes > 1
    )
