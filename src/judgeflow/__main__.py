"""`python -m judgeflow …` is the `judgeflow` command (used by stage jobs: no PATH needed)."""

from judgeflow.cli import main

main()
