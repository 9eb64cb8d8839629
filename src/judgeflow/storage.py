"""Artifact store and source download over fsspec (local paths, file://, s3://, hf://, sample://).

`download` copies a dataset source into the store and records a manifest (URI, revision, sha256
and row count of every file) whose hash is the content identity later stages cache on. A source
URL may hold the credentials its server wants (`https://user:token@host/x.jsonl`); they are used
for the download and kept out of the manifest and of every error message.

With a remote store (`storage.root=s3://…`) stages work in a local staging directory and
`ArtifactStore.publish` uploads what they made: every file, then a checksummed manifest
(`STORE_MANIFEST`, sha256 per file) last. `ArtifactStore.fetch` brings a published directory (or
a file in one) to a local cache keyed by that manifest's hash, and trusts it only when every
file matches: an upload cut short has no manifest, a damaged one does not verify.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fsspec

from judgeflow.config.redaction import has_url_credentials, strip_credentials
from judgeflow.data.io import atomic_write_text, atomic_writer, is_url, sha256_file

DATA_SUFFIXES = (".parquet", ".jsonl", ".json")
SAMPLES_DIR = Path(__file__).parent / "samples"


class SourceError(ValueError):
    """A data source cannot be read; the message names the URI and what to check."""


class StoreError(RuntimeError):
    """A published artifact is incomplete or does not match its manifest."""


#: Written last by `ArtifactStore.publish` into every directory it uploads.
STORE_MANIFEST = "_judgeflow_manifest.json"


@dataclass(frozen=True)
class ManifestFile:
    path: str  # relative to the download directory
    sha256: str
    size: int
    rows: int | None


@dataclass(frozen=True)
class Manifest:
    source: str
    revision: str | None
    local_dir: str
    files: list[ManifestFile] = field(default_factory=list)
    created_at: str = ""
    uri: str | None = None  # where the files were published, when the store is remote

    def __post_init__(self) -> None:  # what a manifest shows and stores: never credentials
        object.__setattr__(self, "source", strip_credentials(self.source))

    @property
    def content_hash(self) -> str:
        """Identity of the data itself: same files, same bytes -> same hash (not the time)."""
        blob = json.dumps(sorted((f.path, f.sha256) for f in self.files)).encode()
        return hashlib.sha256(blob).hexdigest()

    @property
    def paths(self) -> list[Path]:
        return [Path(self.local_dir) / f.path for f in self.files]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "content_hash": self.content_hash}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        files = [ManifestFile(**f) for f in data["files"]]
        return cls(
            data["source"],
            data["revision"],
            data["local_dir"],
            files,
            data["created_at"],
            data.get("uri"),
        )


def resolve_uri(uri: str, revision: str | None = None) -> str:
    """Normalise a source to an fsspec URL: sample:// -> packaged file, plain path -> file://;
    a URL `judgeflow run` passed without its credentials gets them back
    (`judgeflow.config.secrets.with_url_credentials`)."""
    from judgeflow.config.secrets import with_url_credentials

    uri = with_url_credentials(uri)
    if uri.startswith("sample://"):
        name = uri.removeprefix("sample://")
        path = SAMPLES_DIR / name
        if not path.exists():
            available = ", ".join(sorted(p.name for p in SAMPLES_DIR.glob("*.json*")))
            raise SourceError(f"unknown sample {name!r}; shipped samples: {available}")
        return path.as_uri()
    if uri.startswith("hf://") and revision and "@" not in uri:
        # hf://datasets/org/name/sub/path -> hf://datasets/org/name@rev/sub/path
        m = re.match(r"hf://(datasets|spaces|models)/([^/]+/[^/]+)(/.*)?$", uri)
        if m:
            return f"hf://{m.group(1)}/{m.group(2)}@{revision}{m.group(3) or ''}"
    if "://" not in uri:
        return Path(uri).absolute().as_uri()
    return uri


def list_data_files(url: str) -> tuple[fsspec.AbstractFileSystem, str, list[str]]:
    """The data files a source names: the file itself, or every data file under a directory."""
    shown = strip_credentials(url)
    try:
        fs, root = fsspec.core.url_to_fs(url)
        if not fs.exists(root):
            raise SourceError(f"{shown}: does not exist (check the path, bucket or dataset name)")
        if fs.isfile(root):
            return fs, root.rsplit("/", 1)[0], [root]
        files = sorted(p for p in fs.find(root) if p.endswith(DATA_SUFFIXES))
    except SourceError:
        raise
    except Exception as exc:  # network, auth, bad URL: say which source failed
        said = str(exc)
        raise SourceError(
            f"{shown}: cannot list ({type(exc).__name__}: {strip_credentials(said)})"
        ) from (None if has_url_credentials(said) else exc)  # a traceback prints the cause
    if not files:
        raise SourceError(f"{shown}: no {'/'.join(DATA_SUFFIXES)} files found")
    return fs, root, files


@contextmanager
def credentials_out_of_errors() -> Iterator[None]:
    """An error whose message shows a URL with credentials (fsspec's `FileNotFoundError(url)`)
    becomes a SourceError that shows it without them, and without the error as its cause,
    which a traceback (Prefect's log of a failed task) would print."""
    try:
        yield
    except Exception as exc:
        if not has_url_credentials(str(exc)):
            raise
        raise SourceError(f"{type(exc).__name__}: {strip_credentials(str(exc))}") from None


#: Split names the Hub's file naming knows; a source whose files name none of them is all `train`.
KNOWN_SPLITS = ("train", "training", "test", "testing", "validation", "valid", "val", "dev", "eval")


def split_files(source: str, rel_paths: list[str], split: str) -> list[str]:
    """The files of `split`: those with `split` as a word of their path, words parted by
    `-._ /` and digits (`data/train-00000-of-00001.parquet`, `test.jsonl`, `train/part.json`), as
    the Hub finds a split's files. A source none of whose files names a known split is one
    `train` split, as open-instruct reads a local file."""
    words = {rel: set(re.split(r"[-._ /0-9]+", rel.lower())) for rel in rel_paths}
    if not any(w & set(KNOWN_SPLITS) for w in words.values()):
        if split == "train":
            return list(rel_paths)
        raise SourceError(
            f"{strip_credentials(source)}: no file names a split, so it is all `train`; "
            f"split {split!r} is not there"
        )
    chosen = [rel for rel in rel_paths if split.lower() in words[rel]]
    if not chosen:
        named = sorted({w for ws in words.values() for w in ws & set(KNOWN_SPLITS)})
        raise SourceError(
            f"{strip_credentials(source)}: no file of split {split!r} (its files name: "
            f"{', '.join(named)})"
        )
    return chosen


def download(
    source: str,
    dest_dir: str | Path,
    *,
    revision: str | None = None,
    split: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Manifest:
    """Copy every data file of `source` (of `split` only, when given: `split_files`) into
    `dest_dir` (atomically) and write manifest.json."""
    url = resolve_uri(source, revision)
    fs, root, files = list_data_files(url)
    rels = {
        (os.path.relpath(remote, root) if remote != root else Path(remote).name): remote
        for remote in files
    }
    if split is not None:
        rels = {rel: rels[rel] for rel in split_files(source, list(rels), split)}
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, (rel, remote) in enumerate(rels.items()):
        target = dest / rel
        with (
            credentials_out_of_errors(),
            fs.open(remote, "rb") as src,
            atomic_writer(target) as out,
        ):
            digest = _copy_hashing(src, out)
        entries.append(ManifestFile(rel, digest, target.stat().st_size, count_rows(target)))
        if progress:
            progress(i + 1, len(rels))
    manifest = Manifest(
        source=source,
        revision=revision,
        local_dir=str(dest),
        files=entries,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    write_json(dest / "manifest.json", manifest.to_dict())
    return manifest


def _fetch_cache() -> Path:
    from judgeflow.config import judgeflow_home

    return judgeflow_home() / "store-cache"


def _download_verified(
    fs: fsspec.AbstractFileSystem, base: str, files: dict[str, dict[str, Any]], local: Path
) -> None:
    """Download every file of a manifest next to `local`, check each sha256, then move it in."""
    import shutil
    import tempfile

    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{local.name}.", dir=local.parent))
    try:
        for rel, meta in files.items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(f"{base}/{rel}", str(target))
            if sha256_file(target) != meta["sha256"]:
                raise StoreError(
                    f"{fs.unstrip_protocol(base)}/{rel}: sha256 does not match its manifest "
                    "(changed or damaged after publishing); run the stage that writes it again"
                )
        (tmp / ".verified").touch()
        try:
            os.replace(tmp, local)
        except OSError:  # another process verified the same content first
            if not (local / ".verified").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def count_rows(path: Path) -> int | None:
    """Row count without loading the data: parquet metadata, or non-blank jsonl lines."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    if path.suffix == ".jsonl":
        with path.open("rb") as fh:
            return sum(1 for line in fh if line.strip())
    return None


def write_json(path: str | Path, data: Any, *, mode: int | None = None) -> Path:
    text = json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    atomic_write_text(path, text, mode=mode)
    return Path(path)


def _copy_hashing(src: Any, out: Any) -> str:
    h = hashlib.sha256()
    for chunk in iter(lambda: src.read(1 << 20), b""):
        h.update(chunk)
        out.write(chunk)
    return h.hexdigest()


class ArtifactStore:
    """A root (local directory or s3:// prefix) where stages leave what later stages read."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        self.fs, self._root_path = fsspec.core.url_to_fs(self.root)

    @property
    def is_local(self) -> bool:
        return "file" in (
            self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        )

    def uri(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def local_dir(self, *parts: str) -> Path:
        """A local directory for `parts`: in the store itself when local, else a staging cache."""
        if self.is_local:
            path = Path(self._root_path, *parts)
        else:
            from judgeflow.config import judgeflow_home

            path = judgeflow_home() / "staging" / Path(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def publish(self, local: str | Path, *parts: str) -> str:
        """Make a local file or directory available at `parts` in the store; return its URI.

        A directory on a remote store gets its checksummed manifest last (see the module doc).
        """
        dest = self.uri(*parts)
        if self.is_local and Path(local).absolute() == Path(self._root_path, *parts).absolute():
            return str(Path(local).absolute())
        if self.is_local or not Path(local).is_dir():
            self.fs.put(str(local), dest, recursive=Path(local).is_dir())
            return dest
        root = Path(local)
        files = {}
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != STORE_MANIFEST):
            rel = path.relative_to(root).as_posix()
            files[rel] = {"sha256": sha256_file(path), "size": path.stat().st_size}
            self.fs.put_file(str(path), f"{dest}/{rel}")
        self.fs.pipe_file(f"{dest}/{STORE_MANIFEST}", json.dumps({"files": files}).encode())
        return dest

    def fetch(self, uri: str | Path) -> Path:
        """A local path for `uri`: itself when local, else a verified copy in the local cache.

        `uri` is a directory `publish` uploaded, or a file inside one.
        """
        text = str(uri)
        if "://" not in text or text.startswith("file://"):
            return Path(text.removeprefix("file://"))
        fs, path = fsspec.core.url_to_fs(text)
        base, rel = path, ""
        while not fs.exists(f"{base}/{STORE_MANIFEST}"):
            if "/" not in base.strip("/"):
                raise StoreError(
                    f"{text}: no {STORE_MANIFEST} in it or above it: an upload that did not "
                    "finish, or not published by judgeflow; run the stage that writes it again"
                )
            base, _, name = base.rpartition("/")
            rel = f"{name}/{rel}" if rel else name
        raw = fs.cat_file(f"{base}/{STORE_MANIFEST}")
        local = _fetch_cache() / hashlib.sha256(raw).hexdigest()[:32]
        if not (local / ".verified").exists():
            _download_verified(fs, base, json.loads(raw)["files"], local)
        return local / rel if rel else local


def local_weights(model_uri: str, storage_root: str | None = None) -> str:
    """A local directory with the weights: `model_uri` itself, or a remote store's verified copy.
    Here, not beside the MLflow model, so that a judge loads where MLflow is not installed."""
    if is_url(model_uri):
        return str(ArtifactStore(storage_root or model_uri).fetch(model_uri))
    if not Path(model_uri).is_dir():
        raise FileNotFoundError(
            f"this judge's weights are not at {model_uri} (the artifact store it was trained "
            "with): run on a machine that sees that store, or register the model again"
        )
    return model_uri
