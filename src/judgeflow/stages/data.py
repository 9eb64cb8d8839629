"""Data stages: download a source (manifest), prepare judge, judge-SFT and GRRM data."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgeflow.caching import prepare_identity, sft_system_prompt
from judgeflow.config import RunConfig
from judgeflow.config.inputs import MixerSource, mixer_label
from judgeflow.config.redaction import strip_credentials
from judgeflow.stages.common import (
    GrrmData,
    PreparedData,
    Progress,
    SftData,
    _published,
    _short_hash,
    fetch,
    local_manifest,
    store_for,
)
from judgeflow.storage import Manifest, SourceError, download, write_json

if TYPE_CHECKING:
    from judgeflow.data import GrrmPrepareResult
    from judgeflow.data.rlvr import MixPart


def download_stage(cfg: RunConfig, progress: Progress | None = None) -> Manifest:
    """Fetch the data source into the store, keyed by source + revision + listing fingerprint.

    The fingerprint (sizes, ETags/mtimes) gives a changed source its own directory, so a
    cached manifest of the old content never points at files the new download overwrote.
    """
    from judgeflow.caching import digest, source_fingerprint

    if cfg.data.mixer:
        return _download_mixture(cfg, cfg.data.mixer, progress)
    assert cfg.data.source is not None  # DataConfig: a source or a mixer
    fingerprint = digest(source_fingerprint(cfg.data.source, cfg.data.revision))
    key = _short_hash(strip_credentials(cfg.data.source), cfg.data.revision or "", fingerprint)
    store = store_for(cfg)
    dest = store.local_dir("sources", key)
    manifest = download(cfg.data.source, dest, revision=cfg.data.revision, progress=progress)
    if not store.is_local:  # so a worker on another machine can read it
        manifest = replace(manifest, uri=store.publish(dest, "sources", key))
    return manifest


def _download_mixture(
    cfg: RunConfig, mixer: list[MixerSource], progress: Progress | None
) -> Manifest:
    """Every mixer source's split into its own folder (`00/`, `01/`, … in mixer order) of one
    manifest, keyed by the sources, revisions, splits and listing fingerprints."""
    from judgeflow.caching import digest, mixer_listing

    key = _short_hash("mixer", digest(mixer_listing(mixer)))
    store = store_for(cfg)
    dest = store.local_dir("sources", key)
    files = []
    for i, part in enumerate(mixer):
        got = download(part.source, dest / f"{i:02d}", revision=part.revision, split=part.split)
        files += [replace(f, path=f"{i:02d}/{f.path}") for f in got.files]
        if progress:
            progress(i + 1, len(mixer))
    manifest = Manifest(
        mixer_label(mixer), None, str(dest), files, datetime.now(UTC).isoformat(timespec="seconds")
    )
    write_json(dest / "manifest.json", manifest.to_dict())
    if not store.is_local:
        manifest = replace(manifest, uri=store.publish(dest, "sources", key))
    return manifest


def mixture_parts(cfg: RunConfig, mixer: list[MixerSource], manifest: Manifest) -> list[MixPart]:
    """The mixer sources of a (local) mixture manifest, each with the files of its folder."""
    from judgeflow.data.rlvr import MixPart

    return [
        MixPart(
            name=mixer_label([part]),
            paths=tuple(
                str(Path(manifest.local_dir) / f.path)
                for f in manifest.files
                if f.path.startswith(f"{i:02d}/")
            ),
            amount=part.amount,
            seed=cfg.data.mixer_seed,
            remap_verifier=part.remap_verifier,
        )
        for i, part in enumerate(mixer)
    ]


def val_source_config(cfg: RunConfig) -> RunConfig:
    """`cfg` with `data.val_source` (or `data.eval_mixer`) as the source: the validation data is
    downloaded and manifested like the training data (a revision pins only `data.source`)."""
    if cfg.data.eval_mixer:
        update: dict[str, Any] = {"source": None, "mixer": cfg.data.eval_mixer}
    elif cfg.data.val_source:
        update = {"source": cfg.data.val_source, "mixer": None}
    else:
        raise ValueError("no data.val_source or data.eval_mixer is set")
    data = cfg.data.model_copy(update={**update, "revision": None, "eval_mixer": None})
    return cfg.model_copy(update={"data": data})


def prepare_stage(
    cfg: RunConfig, manifest: Manifest, val_manifest: Manifest | None = None
) -> PreparedData:
    """Validate and render the judge prompts into verl RL parquet (+ a validation split).

    With `val_manifest` (from `data.val_source`) the whole training source is trained on and
    the validation rows are that source's, prepared the same way (pairwise: in both A/B orders,
    as a `val_fraction` split is); `data.val_fraction` is unused. The report then has the val
    source's own report under `val_source`, and its prompts also in the training source under
    `duplicates.across.val_source`.
    """
    from judgeflow.data import prepare_judge
    from judgeflow.data.rlvr import prepare_rlvr

    mode = cfg.mode
    if mode == "grrm":
        raise NotImplementedError("GRRM data preparation runs in the grrm flow")
    prepare: Any = prepare_rlvr if mode == "rlvr" else partial(prepare_judge, mode)
    params = _prepare_params(cfg)
    tokenizer = fetch(cfg, cfg.model.path) if cfg.data.filter_overlong_prompts else None
    identity = json.dumps(prepare_identity(cfg), sort_keys=True)
    hashes = [manifest.content_hash] + ([val_manifest.content_hash] if val_manifest else [])
    key = _short_hash(*hashes, identity)
    out_dir = store_for(cfg).local_dir("prepared", key)
    manifest = local_manifest(cfg, manifest)
    val_manifest = local_manifest(cfg, val_manifest) if val_manifest else None

    def run(m: Manifest, output: Path, mixer: list[MixerSource] | None, **overrides: Any) -> Any:
        return prepare(
            mixture_parts(cfg, mixer, m) if mixer else [str(p) for p in m.paths],
            str(output),
            tokenizer=tokenizer,
            max_prompt_length=cfg.data.max_prompt_length if tokenizer else None,
            **{**params, **overrides},
        )

    if val_manifest is None:
        result = run(manifest, out_dir / f"{cfg.mode}.parquet", cfg.data.mixer)
        val_file = str(result.val_path) if result.val_path else None
        report = result.report
    else:
        from judgeflow.data import atomic_write_text, judge_prompt_units, prompt_duplicates

        result = run(manifest, out_dir / f"{cfg.mode}.parquet", cfg.data.mixer, val_fraction=0.0)
        judge_only = {"both_orders": mode == "pairwise", "balance_positions": False}
        val = run(  # a pairwise judge is evaluated on both A/B orders: balanced by construction
            val_manifest,
            out_dir / "val_source" / f"{cfg.mode}.parquet",
            cfg.data.eval_mixer,
            val_fraction=0.0,
            **(judge_only if mode != "rlvr" else {}),
        )
        val_file = str(val.train_path)
        across = prompt_duplicates(
            {
                "train": judge_prompt_units(result.train_path),
                "val_source": judge_prompt_units(val.train_path),
            }
        )["across"]
        duplicates = {**result.report.get("duplicates", {}), "across": across}
        report = {
            **result.report,
            "duplicates": duplicates,
            "val_source": {"source": val_manifest.source, **val.report},
        }
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


def _prepare_params(cfg: RunConfig) -> dict[str, Any]:
    """prepare_judge's keyword arguments: the identity minus what is passed separately."""
    params = prepare_identity(cfg)
    for passed_separately in ("mode", "tokenizer", "max_prompt_length"):
        params.pop(passed_separately)
    for in_the_inputs in ("mixer", "eval_mixer"):  # `mixture_parts`
        params.pop(in_the_inputs, None)
    return params


def sft_source_config(cfg: RunConfig) -> RunConfig:
    """`cfg` with `data.source` pointing at the SFT source, so `download` fetches it."""
    if not cfg.sft.source:
        raise ValueError("sft.source is not set")
    data = cfg.data.model_copy(
        update={"source": cfg.sft.source, "mixer": None, "eval_mixer": None, "revision": None}
    )
    return cfg.model_copy(update={"data": data})


def prepare_sft_stage(cfg: RunConfig, manifest: Manifest) -> SftData:
    """Validate the judge SFT rows into one `messages` parquet, keyed by content."""
    from judgeflow.data.sft import prepare_sft_messages

    system = sft_system_prompt(cfg)
    key = _short_hash(
        manifest.content_hash, "sft-messages", str(cfg.data.skip_invalid),
        *([system] if system is not None else []),
    )  # fmt: skip
    out_dir = store_for(cfg).local_dir("prepared", key)
    result = prepare_sft_messages(
        [str(p) for p in local_manifest(cfg, manifest).paths],
        out_dir / "sft.parquet",
        skip_invalid=cfg.data.skip_invalid,
        system_prompt=system,
    )
    uri = _published(cfg, out_dir, "prepared", key)
    return SftData(file=uri(str(result.output_path)), report=result.report)


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
class GrrmRlPreparation:
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


def grrm_rl_train_preparation(cfg: RunConfig, manifest: Manifest) -> GrrmRlPreparation:
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
    return GrrmRlPreparation(str(train), str(out / "rl_train.parquet"), options)


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
    split, or from `data.val_source` (`val_manifest`) when it is set. The test file's report
    also counts its groups whose prompt is in the train file (`duplicates.across.test`).

    `rl_train` is the RL train preparation when it already ran elsewhere (sharded over Ray, see
    `flows/prepare_sharded.py`); it must be the file `grrm_rl_train_preparation` names.
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
    rl = grrm_rl_train_preparation(cfg, manifest)
    if rl_train is None:
        rl_train = prepare_grrm_rl(rl.input, rl.output, **rl.options)
    elif rl_train.output_path != rl.output:
        raise ValueError(f"rl_train is {rl_train.output_path}, this stage writes {rl.output}")
    sft = prepare_grrm_sft(
        str(train), str(out / "sft.parquet"), analysis_key=g.analysis_key, **columns
    )
    rl_test = prepare_grrm_rl(str(test), str(test_out / "rl_test.parquet"), split="test", **columns)
    rl_test = _with_test_overlap(rl_test, rl_train)
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


def _with_test_overlap(
    rl_test: GrrmPrepareResult, rl_train: GrrmPrepareResult
) -> GrrmPrepareResult:
    """`rl_test` with the test groups whose prompt is also in the train file added to its
    report (`duplicates.across.test`), the report file rewritten atomically."""
    from judgeflow.data import atomic_write_text, grrm_prompt_units, prompt_duplicates

    across = prompt_duplicates(
        {
            name: grrm_prompt_units(result.output_path, result.report["input"]["path"])
            for name, result in (("train", rl_train), ("test", rl_test))
        }
    )["across"]
    report = {**rl_test.report, "duplicates": {**rl_test.report["duplicates"], "across": across}}
    atomic_write_text(rl_test.report_path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return replace(rl_test, report=report)
