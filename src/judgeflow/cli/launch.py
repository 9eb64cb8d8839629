"""The `judgeflow` console script: what runs before, and after, the typer app.

Before: `judgeflow run` starts Prefect's temporary server (`local_prefect`) while the app and
the pipelines still import, so neither waits for the other. After: what the interpreter
does at exit is done (non-daemon threads joined, exit handlers run: logging, Prefect's log and
event workers, the server's stop, MLflow's), the output is flushed, and the process ends without
the interpreter's clean-up of every imported module, which takes about a second after a run and
changes nothing on disk.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading


def _starts_a_flow(argv: list[str]) -> bool:
    words = [a for a in argv if not a.startswith("-")]
    return bool(words) and words[0] == "run" and not {"--help", "-h"} & set(argv)


def main() -> None:
    if _starts_a_flow(sys.argv[1:]):
        from judgeflow.cli.local_prefect import start_local_server
        from judgeflow.home import judgeflow_home

        start_local_server(judgeflow_home(), quiet_console=sys.stdout.isatty())
    code = 0
    try:
        from judgeflow.cli.typer_app import app

        app()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    for thread in threading.enumerate():  # as the interpreter would: non-daemon threads first
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)
