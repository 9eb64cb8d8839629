"""benchmarks/ is a folder of scripts that import each other by name (`from stamp import …`), as
`python benchmarks/X.py` lets them: the tests that load them by path see the same names."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))
