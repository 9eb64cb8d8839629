"""Valid input is not refused: JSONL as other tools save it prepares like the original.

Spreadsheet tools and some editors start a UTF-8 file with a byte-order mark, Windows tools end
lines with CRLF, and people leave blank lines. Each shipped sample, re-saved each of these ways
(and all three at once), goes through every JSONL reader (judge, judge SFT `messages`, GRRM SFT
and RL, sharded GRRM) and gives the original's rows; blank lines are skipped but counted, so
the row numbers the output records (`source_row`, `group_id`) are still line numbers.
`test_bad_inputs.py` checks the same for the rows that errors name.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fsspec
import pyarrow.parquet as pq
import pytest
from data_testrows import resave
from fsspec.implementations.http import HTTPStreamFile
from typer.testing import CliRunner

import judgeflow.samples
from judgeflow.cli.typer_app import app
from judgeflow.data import prepare_grrm_rl, prepare_grrm_rl_sharded, prepare_grrm_sft, prepare_judge
from judgeflow.data.jsonl import BOM
from judgeflow.data.sft import prepare_sft_messages

SAMPLES = Path(judgeflow.samples.__file__).parent
VARIANTS: dict[str, dict[str, bool]] = {
    "bom": {"bom": True},
    "crlf": {"crlf": True},
    "blank_lines": {"blank_lines": True},
    "bom_crlf_blank_lines": {"bom": True, "crlf": True, "blank_lines": True},
}
_ROW_NUMBERS = ("source_row", "group_id")  # line numbers of the input, in the output rows


def _resaved(source: Path, variant: str, folder: Path) -> Path:
    path = folder / variant / source.name
    path.parent.mkdir(parents=True)
    path.write_bytes(resave(source.read_bytes(), **VARIANTS[variant]))
    return path


def _rows(path: Path, line_step: int = 1) -> list[dict[str, Any]]:
    """The rows of a prepared file, with line numbers divided by `line_step` (2 when a blank
    line follows every line) and the input's path left out (it names the variant's folder)."""

    def normal(record: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in record.items() if k != "source_file"}
        for key in _ROW_NUMBERS:
            if out.get(key) is not None:
                assert out[key] % line_step == 0, (key, out[key])
                out[key] //= line_step
        return out

    return [
        normal({k: normal(v) if k == "extra_info" else v for k, v in row.items()})
        for row in pq.read_table(path).to_pylist()
    ]


Prepare = Callable[[Path, Path], Any]
READERS: dict[str, tuple[Path, Prepare]] = {
    "judge-openjudge-pointwise": (
        SAMPLES / "openjudge_pointwise.jsonl",
        lambda src, out: prepare_judge("pointwise", [src], out),
    ),
    "judge-openjudge-pairwise": (
        SAMPLES / "openjudge_pairwise.jsonl",
        lambda src, out: prepare_judge("pairwise", [src], out, val_fraction=0.25),
    ),
    "judge-rewardbench2": (
        SAMPLES / "rewardbench2.jsonl",
        lambda src, out: prepare_judge("pointwise", [src], out),
    ),
    "judge-sft": (
        SAMPLES / "tinyjudge_pairwise_sft.jsonl",
        lambda src, out: prepare_sft_messages([src], out),
    ),
    "grrm-sft": (SAMPLES / "grrm" / "train.jsonl", prepare_grrm_sft),
    # Not augmented: augmentation is seeded per group_id (a line number), which blank lines move.
    "grrm-rl": (SAMPLES / "grrm" / "train.jsonl", prepare_grrm_rl),
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("reader", READERS)
def test_a_resaved_sample_prepares_to_the_original_rows(
    reader: str, variant: str, tmp_path: Path
) -> None:
    source, prepare = READERS[reader]
    prepare(source, tmp_path / "original.parquet")
    prepare(_resaved(source, variant, tmp_path), tmp_path / "resaved.parquet")
    line_step = 2 if VARIANTS[variant].get("blank_lines") else 1
    expected = _rows(tmp_path / "original.parquet")
    assert expected  # the sample is not empty: the comparison compares something
    assert _rows(tmp_path / "resaved.parquet", line_step) == expected


def test_a_sharded_grrm_run_cuts_a_resaved_file_like_a_single_run(tmp_path: Path) -> None:
    """Shards seek to byte offsets: the byte-order mark's 3 bytes and the `\\r`s must count."""
    source = _resaved(SAMPLES / "grrm" / "train.jsonl", "bom_crlf_blank_lines", tmp_path)
    single = prepare_grrm_rl(source, tmp_path / "one.parquet", batch_size=2)
    sharded = prepare_grrm_rl_sharded(source, tmp_path / "many.parquet", 3, batch_size=2)
    assert sharded.report["output"]["sha256"] == single.report["output"]["sha256"]
    prepare_grrm_rl(SAMPLES / "grrm" / "train.jsonl", tmp_path / "plain.parquet", batch_size=2)
    assert _rows(tmp_path / "one.parquet", 2) == _rows(tmp_path / "plain.parquet")


@pytest.mark.parametrize("layout", ["list", "lines"])
def test_a_json_file_with_a_byte_order_mark_is_read(layout: str, tmp_path: Path) -> None:
    """A `.json` file (a list of rows, or JSON lines under a .json name) starting with a BOM."""
    source = SAMPLES / "openjudge_pointwise.jsonl"
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    text = json.dumps(rows, indent=1) if layout == "list" else source.read_text(encoding="utf-8")
    path = tmp_path / "rows.json"
    path.write_bytes(BOM + text.replace("\n", "\r\n").encode("utf-8"))
    prepare_judge("pointwise", [source], tmp_path / "original.parquet")
    result = prepare_judge("pointwise", [path], tmp_path / "resaved.parquet")
    assert result.report["counts"]["rows_read"] == len(rows)
    assert _rows(tmp_path / "resaved.parquet") == _rows(tmp_path / "original.parquet")


def test_the_command_line_prepares_a_resaved_file(tmp_path: Path) -> None:
    source = _resaved(SAMPLES / "tinyjudge_pointwise.jsonl", "bom_crlf_blank_lines", tmp_path)
    out = tmp_path / "out.parquet"
    args = ["prepare", "judge", "--mode", "pointwise", "--input", str(source), "--output", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = (SAMPLES / "tinyjudge_pointwise.jsonl").read_text(encoding="utf-8").splitlines()
    assert pq.read_metadata(out).num_rows == len(lines)


class _StreamingServer(http.server.ThreadingHTTPServer):
    """Serves files by name without a Content-Length (the body ends when the connection closes),
    so fsspec can only stream them: its file object cannot seek."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _StreamingHandler)
        self.files: dict[str, bytes] = {}

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"


class _StreamingHandler(http.server.BaseHTTPRequestHandler):
    server: _StreamingServer

    def do_HEAD(self) -> None:
        self._reply(body=False)

    def do_GET(self) -> None:
        self._reply(body=True)

    def _reply(self, body: bool) -> None:
        data = self.server.files.get(self.path.lstrip("/"))
        if data is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def streaming_server() -> Iterator[_StreamingServer]:
    server = _StreamingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("variant", ["plain", "bom", "bom_crlf_blank_lines"])
@pytest.mark.parametrize("reader", ["judge-openjudge-pointwise", "grrm-sft", "grrm-rl"])
def test_a_file_that_can_only_be_streamed_prepares_like_a_local_one(
    reader: str, variant: str, tmp_path: Path, streaming_server: _StreamingServer
) -> None:
    """A URL whose file cannot seek (HTTP without a Content-Length): the byte-order mark is
    looked for without seeking back, and the rows are the local file's."""
    source, prepare = READERS[reader]
    data = source.read_bytes()
    name = f"{variant}/{source.name}"
    streaming_server.files[name] = resave(data, **VARIANTS[variant]) if variant != "plain" else data
    url = streaming_server.url(name)
    with fsspec.open(url, "rb").open() as handle:
        assert isinstance(handle, HTTPStreamFile)  # what the readers get: no seeking
    prepare(source, tmp_path / "original.parquet")
    prepare(url, tmp_path / "streamed.parquet")  # type: ignore[arg-type]
    line_step = 2 if VARIANTS.get(variant, {}).get("blank_lines") else 1
    assert _rows(tmp_path / "streamed.parquet", line_step) == _rows(tmp_path / "original.parquet")
