"""`python -m judgeflow.stages.jobs_main INPUT_JSON`: what a stage's job runs.

An entry module of its own: `judgeflow.stages` imports `judgeflow.stages.jobs`, so running that
module with `-m` would execute it a second time as `__main__` (runpy warns; two copies of its
globals)."""

from __future__ import annotations

import sys

from judgeflow.stages.jobs import main

if __name__ == "__main__":
    sys.exit(main())
