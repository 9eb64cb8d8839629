"""The split files `prepare_judge` writes: one parquet file per split, a batch at a time.

A `SplitFile` renders each batch of a split's members into verl rows (`verl_rows`), writes the
table with a `ParquetWriter` to a staged file (`io.staged_files`, hashed as it is written) and
keeps what the data report says of the split in compact form: counts, the label histogram, a
digest per query and a prompt hash, row and file per unit for the duplicates section. Nothing
of the rows themselves stays in memory once written.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
from array import array
from collections import Counter
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from judgeflow.data.duplicates import PromptUnits, hash_array
from judgeflow.data.io import HashingSink, StagedFiles, parquet_writer_options
from judgeflow.data.prompt_hashes import HASH_CHARS
from judgeflow.data.verl_rows import UNIQUE_COLUMNS, verl_schema, verl_table
from judgeflow.modes import JudgeMode

#: The label histogram's keys, every one present (0 when no row has it).
LABEL_KEYS: dict[JudgeMode, list[str]] = {
    "pointwise": [str(i) for i in range(5)],
    "pairwise": ["A", "B"],
}


class SplitFile:
    """One split's parquet file and the report's figures for it (`report`, `units`)."""

    def __init__(
        self,
        split: str,
        path: str,
        mode: JudgeMode,
        both_orders: bool,
        staged: StagedFiles,
    ) -> None:
        self.split, self.path, self.mode, self.both_orders = split, path, mode, both_orders
        self.examples = 0  # members written so far: the position of the next one
        self.rows = 0
        self.swapped = 0
        self.labels: Counter[str] = Counter()
        self._staged = staged
        self._sink: HashingSink | None = None
        self._writer: pq.ParquetWriter | None = None
        self._digest: str | None = None
        # Per member (one prompt unit each): its prompt hash and source row; its file by ranges
        # (`_file_starts[k]` is the first member from `_file_names[k]`).
        self._hashes = bytearray()  # HASH_CHARS ASCII bytes each
        self._rows: array[int] = array("q")
        self._file_starts: list[int] = []
        self._file_names: list[str] = []
        self._queries = bytearray()  # a 16-byte digest of each batch's distinct queries

    def add(self, members: pa.Table, file: str, swapped: np.ndarray | None = None) -> None:
        """Write the next members of the split (all from `file`), A/B exchanged where `swapped`."""
        if not members.num_rows:
            return
        table = verl_table(
            members, self.mode, self.split, file, self.examples,
            both_orders=self.both_orders, swapped=swapped,
        )  # fmt: skip
        n = members.num_rows
        hashes = hash_array(members.column("prompt_hash"))
        assert hashes.dtype.itemsize == HASH_CHARS, "prompt hashes have one length"
        self._hashes += hashes.tobytes()
        self._rows.frombytes(members.column("source_row").to_numpy().astype(np.int64).tobytes())
        if not self._file_names or self._file_names[-1] != file:
            self._file_starts.append(self.examples)
            self._file_names.append(file)
        for query in pc.unique(members.column("query")).cast(pa.binary()).to_pylist():
            self._queries += hashlib.blake2b(query, digest_size=16).digest()
        labels = pc.value_counts(table.column("extra_info").combine_chunks().field("label"))
        for item in labels.to_pylist():
            self.labels[str(item["values"])] += item["counts"]
        self.swapped += int(np.count_nonzero(swapped)) if swapped is not None else 0
        self.swapped += table.num_rows // 2 if self.both_orders else 0
        self.examples += n
        self.rows += table.num_rows
        self._open().write_table(table)

    def _open(self) -> pq.ParquetWriter:
        if self._writer is None:
            schema = verl_schema(self.mode)
            self._sink = HashingSink(self._staged.open(self.path))
            options = parquet_writer_options(schema, unique=UNIQUE_COLUMNS)
            self._writer = pq.ParquetWriter(self._sink, schema, **options)
        return self._writer

    def finish(self) -> None:
        """Close the file; an empty split is a file with no rows."""
        writer = self._open()
        writer.close()
        assert self._sink is not None
        self._digest = self._sink.hexdigest()

    def abandon(self) -> None:
        """Close the writer after a failure (its staged file is discarded, not published)."""
        if self._writer is not None and self._digest is None:
            with contextlib.suppress(Exception):  # the failure being handled says more
                self._writer.close()

    def units(self) -> PromptUnits:
        """One unit per member (a pairwise example's first row, `index` 2p in both orders)."""
        hashes = np.frombuffer(self._hashes, dtype=f"S{HASH_CHARS}")  # a view, not a copy
        starts, names, rows = self._file_starts, self._file_names, self._rows
        step = 2 if self.both_orders else 1

        def where(i: int) -> dict[str, Any]:
            file = names[bisect.bisect_right(starts, i) - 1]
            return {"file": file, "row": rows[i], "index": step * i}

        unit = "pair" if self.mode == "pairwise" and self.rows else "row"
        return PromptUnits(unit, hashes, where)

    def report(self) -> dict[str, Any]:
        """The split's entry under the report's `splits`."""
        queries = np.frombuffer(self._queries, dtype="S16")
        queries.sort()  # in place (the digests are not needed after this): no sorted copy
        distinct = int(np.count_nonzero(queries[1:] != queries[:-1])) + 1 if len(queries) else 0
        return {
            "path": self.path,
            "rows": self.rows,
            "pairs": self.examples if self.mode == "pairwise" else None,
            "both_orders": self.both_orders,
            "queries": distinct,
            "labels": {key: self.labels.get(key, 0) for key in LABEL_KEYS[self.mode]},
            "swapped": self.swapped,
            "sha256": self._digest,
        }


class SplitFiles:
    """The split files of one preparation; leaving the block with an error closes their
    writers (the staged files are then discarded, not published)."""

    def __init__(self, staged: StagedFiles) -> None:
        self._staged = staged
        self.files: dict[str, SplitFile] = {}

    def add(self, split: str, path: str, mode: JudgeMode, both_orders: bool) -> SplitFile:
        self.files[split] = SplitFile(split, path, mode, both_orders, self._staged)
        return self.files[split]

    def finish(self) -> None:
        for file in self.files.values():
            file.finish()

    def __enter__(self) -> SplitFiles:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None:
            for file in self.files.values():
                file.abandon()
