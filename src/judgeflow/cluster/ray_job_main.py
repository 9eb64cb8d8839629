"""`python -m judgeflow.cluster.ray_job_main SPEC_JSON`: a stage's Ray Job entrypoint.

`cluster.ray_jobs` writes the stage's `JobSpec` beside its input file on the shared directory and
submits this command; it runs the stage's command once (`job.run_single`) and exits 0 with the
result in the stage folder, or non-zero with why in its failure file.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from judgeflow.cluster.job import JobFailed, JobSpec, run_single
from judgeflow.cluster.procs import exit_on_signals
from judgeflow.log_setup import JOB_FORMAT, show_logs

logger = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m judgeflow.cluster.ray_job_main SPEC_JSON", file=sys.stderr)
        return 2
    spec = JobSpec(**json.loads(Path(args[0]).read_text(encoding="utf-8")))
    show_logs(stream="stdout", fmt=JOB_FORMAT)
    try:
        with exit_on_signals(logger.warning):  # `ray job stop` sends SIGTERM: stop the command
            run_single(spec)
    except JobFailed as exc:
        logger.error("[judgeflow] %s", exc)
        return 1
    logger.info("[judgeflow] stage finished: %s", spec.result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
