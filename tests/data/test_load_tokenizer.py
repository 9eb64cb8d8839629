"""`load_tokenizer` gives the tokenizer AutoTokenizer gives, without AutoTokenizer's imports.

prepare's length filter must count tokens exactly as verl does (verl loads with AutoTokenizer),
and it should not pay for transformers' generation utilities (torch's compiler, scikit-learn,
SciPy) to do so: that import was most of the time `prepare` took on 40 rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from judgeflow.data.prompt_tokens import _declared_tokenizer_class, load_tokenizer, prompt_lengths
from judgeflow.data.templates import render_pairwise, render_pointwise


def _saved(tokenizer: Any, path: Path, **config: Any) -> Path:
    """`tokenizer` saved to `path`, with `config` merged into its tokenizer_config.json."""
    tokenizer.save_pretrained(path)
    file = path / "tokenizer_config.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), **config}))
    return path


@pytest.mark.parametrize("declared", ["PreTrainedTokenizerFast", "Qwen2Tokenizer"])
def test_same_class_and_same_lengths_as_autotokenizer(
    tiny_tokenizer: Any, tmp_path: Path, declared: str
) -> None:
    from transformers import AutoTokenizer

    path = _saved(tiny_tokenizer, tmp_path / "tok", tokenizer_class=declared)
    ours, auto = load_tokenizer(path), AutoTokenizer.from_pretrained(path)
    assert type(ours) is type(auto)
    convs = [
        [{"role": "user", "content": render_pointwise("Capital of France?", "Paris." * n)}]
        for n in range(1, 6)
    ] + [[{"role": "user", "content": render_pairwise("q", "A answer", "B answer")}]]
    assert prompt_lengths(ours, convs) == prompt_lengths(auto, convs)


@pytest.mark.parametrize(
    "config",
    [
        {"tokenizer_class": None},  # AutoTokenizer then reads the model's config.json
        {"tokenizer_class": "NoSuchTokenizer"},
        {"auto_map": {"AutoTokenizer": ["x.Tok", None]}},  # remote code: trust decisions
    ],
)
def test_anything_unusual_is_left_to_autotokenizer(
    tiny_tokenizer: Any, tmp_path: Path, config: dict[str, Any]
) -> None:
    path = _saved(tiny_tokenizer, tmp_path / "tok", **config)
    assert _declared_tokenizer_class(str(path)) is None
    assert _declared_tokenizer_class(str(tmp_path / "missing")) is None


def test_loading_a_tokenizer_does_not_import_generation_utilities(
    tiny_tokenizer: Any, tmp_path: Path
) -> None:
    path = _saved(tiny_tokenizer, tmp_path / "tok", tokenizer_class="Qwen2Tokenizer")
    code = (
        "import sys; from judgeflow.data.prompt_tokens import load_tokenizer; "
        f"load_tokenizer({str(path)!r}); "
        "print([m for m in ('transformers.generation', 'sklearn', 'torch._dynamo') "
        "if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
