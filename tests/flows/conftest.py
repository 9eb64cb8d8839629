"""Fixtures for flow tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from flowtools import copy_sample


@pytest.fixture
def sample_source(tmp_path: Path) -> Path:
    """A private copy of the pointwise sample, to be used as a file:// source and edited."""
    return copy_sample(tmp_path / "source")
