"""Artifact store and source download over fsspec (local paths, file://, s3://, hf://, sample://).

`download` copies a dataset source into the store and records a manifest (URI, revision, sha256
and row count of every file) whose hash is the content identity later stages cache on.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fsspec

from judgeflow.data.io import atomic_write_text, atomic_writer

DATA_SUFFIXES = (".parquet", ".jsonl", ".json")
SAMPLES_DIR = Path(__file__).parent / "samples"


class SourceError(ValueError):
    """A data source cannot be read; the message names the URI and what to check."""


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
        return cls(data["source"], data["revision"], data["local_dir"], files, data["created_at"])


def resolve_uri(uri: str, revision: str | None = None) -> str:
    """Normalise a source to an fsspec URL: sample:// -> packaged file, plain path -> file://."""
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
    try:
        fs, root = fsspec.core.url_to_fs(url)
        if not fs.exists(root):
            raise SourceError(f"{url}: does not exist (check the path, bucket or dataset name)")
        if fs.isfile(root):
            return fs, root.rsplit("/", 1)[0], [root]
        files = sorted(p for p in fs.find(root) if p.endswith(DATA_SUFFIXES))
    except SourceError:
        raise
    except Exception as exc:  # network, auth, bad URL: say which source failed
        raise SourceError(f"{url}: cannot list ({type(exc).__name__}: {exc})") from exc
    if not files:
        raise SourceError(f"{url}: no {'/'.join(DATA_SUFFIXES)} files found")
    return fs, root, files


def download(
    source: str,
    dest_dir: str | Path,
    *,
    revision: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Manifest:
    """Copy every data file of `source` into `dest_dir` (atomically) and write manifest.json."""
    url = resolve_uri(source, revision)
    fs, root, files = list_data_files(url)
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, remote in enumerate(files):
        rel = os.path.relpath(remote, root) if remote != root else Path(remote).name
        target = dest / rel
        with fs.open(remote, "rb") as src, atomic_writer(target) as out:
            digest = _copy_hashing(src, out)
        entries.append(ManifestFile(rel, digest, target.stat().st_size, count_rows(target)))
        if progress:
            progress(i + 1, len(files))
    manifest = Manifest(
        source=source,
        revision=revision,
        local_dir=str(dest),
        files=entries,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    write_json(dest / "manifest.json", manifest.to_dict())
    return manifest


def count_rows(path: Path) -> int | None:
    """Row count without loading the data: parquet metadata, or non-blank jsonl lines."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    if path.suffix == ".jsonl":
        with path.open("rb") as fh:
            return sum(1 for line in fh if line.strip())
    return None


def write_json(path: str | Path, data: Any) -> Path:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
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
        """Make a local file or directory available at `parts` in the store; return its URI."""
        dest = self.uri(*parts)
        if self.is_local and Path(local).absolute() == Path(self._root_path, *parts).absolute():
            return str(Path(local).absolute())
        self.fs.put(str(local), dest, recursive=Path(local).is_dir())
        return dest
