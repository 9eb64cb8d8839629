#!/usr/bin/env bash
# Register every deployment of deployments/prefect.yaml with the Prefect server.
#
#   deployments/deploy.sh                     # all of them (what CI runs)
#   deployments/deploy.sh --name grpo-pointwise   # extra arguments go to `prefect deploy`
#
# Runs from the repository root: the entrypoints (flows/…) are relative to it, and the flow
# runs start there ($JUDGEFLOW_REPO, the pull step of prefect.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
export JUDGEFLOW_REPO="${JUDGEFLOW_REPO:-$PWD}"
export JUDGEFLOW_WORK_POOL="${JUDGEFLOW_WORK_POOL:-judgeflow-local}"
PREFECT="${PREFECT:-prefect}"
"$(dirname "$0")/setup-work-pool.sh" "$JUDGEFLOW_WORK_POOL"
if [ "$#" -eq 0 ]; then set -- --all; fi
exec "$PREFECT" --no-prompt deploy --prefect-file deployments/prefect.yaml "$@"
