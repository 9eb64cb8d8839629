"""NLTK's English Punkt tables for the ``ifeval`` verifier, from the package index.

open-instruct's IFEvalG counts sentences with NLTK's English Punkt model; NLTK fetches it from
its own servers (``nltk.download("punkt_tab")``), which a cluster's nodes (and CI here) often
cannot reach. The same tables ship inside the ``llama-index-core`` wheel, on the package index
every install already uses: :func:`install_punkt` downloads that one wheel (not installed),
checks each of the four English files against the hashes below, and places them where NLTK
looks (``<environment>/nltk_data``), whole or not at all.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

__all__ = ["PUNKT_FILES", "PUNKT_WHEEL", "default_nltk_data", "install_punkt", "punkt_installed"]

#: The wheel the tables come from, pinned.
PUNKT_WHEEL = "llama-index-core==0.14.25"
_IN_WHEEL = "llama_index/core/_static/nltk_cache/tokenizers/punkt_tab/english/"

#: The English tables (NLTK's ``tokenizers/punkt_tab/english``) and their sha256.
PUNKT_FILES = {
    "abbrev_types.txt": "92a3e070f43d9b4c5534758ca40ad7343b04e7e29bfe0c2eb658a39445a4f779",
    "collocations.tab": "8e2da1225e4dd2cc9dba261ee231ccb134859e21b46006e7f472c5ee269af0cf",
    "ortho_context.tab": "4bbcca25ed3d3f06c02402abf8419b9f033b8adc06e7b482eca4e45f81a5dc4c",
    "sent_starters.txt": "f3f8535483e1dba487241b764945168123bca3209a9645e59acd1225dc76edac",
}


def default_nltk_data() -> Path:
    """``<sys.prefix>/nltk_data``: on NLTK's own search path for this environment, so every
    process started from it (a Slurm job, a Ray worker) finds the tables."""
    return Path(sys.prefix) / "nltk_data"


def _english(root: Path) -> Path:
    return root / "tokenizers" / "punkt_tab" / "english"


def punkt_installed(root: Path) -> bool:
    """The four English tables are in ``root``, each with its pinned hash."""
    folder = _english(root)
    return all(
        (folder / name).is_file()
        and hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest
        for name, digest in PUNKT_FILES.items()
    )


def install_punkt(root: Path | None = None) -> Path:
    """Put the English Punkt tables in ``root`` (default :func:`default_nltk_data`); returns
    their folder. Raises ``RuntimeError`` when the wheel cannot be fetched or a file's hash
    differs; a folder already whole is left as it is."""
    root = root or default_nltk_data()
    target = _english(root)
    if punkt_installed(root):
        return target
    with tempfile.TemporaryDirectory(prefix="judgeflow-punkt-") as scratch:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
             "--no-deps", "--dest", scratch, PUNKT_WHEEL],
            capture_output=True, text=True,
        )  # fmt: skip
        wheels = list(Path(scratch).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise RuntimeError(
                f"could not fetch {PUNKT_WHEEL} from the package index ({done.stderr.strip()[-300:]}); "
                "where NLTK's servers are reachable, `python -m nltk.downloader punkt_tab` "
                "installs the same tables"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".english-", dir=target.parent))
        staging.chmod(0o755)  # readable by every user's jobs, as NLTK's own data is
        try:
            with zipfile.ZipFile(wheels[0]) as wheel:
                for name, digest in PUNKT_FILES.items():
                    data = wheel.read(_IN_WHEEL + name)
                    if hashlib.sha256(data).hexdigest() != digest:
                        raise RuntimeError(f"{PUNKT_WHEEL}: {name} is not the pinned file")
                    (staging / name).write_bytes(data)
            shutil.rmtree(target, ignore_errors=True)  # a partial one
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
