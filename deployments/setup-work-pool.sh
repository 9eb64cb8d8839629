#!/usr/bin/env bash
# Create (or update) the work pool the deployments in prefect.yaml run on.
#
#   deployments/setup-work-pool.sh [POOL]        # default: $JUDGEFLOW_WORK_POOL or judgeflow-local
#
# A `process` pool: the worker starts each flow run as a subprocess on its own machine. That is
# right for a laptop / CI, and for a Slurm cluster too: run the worker on a login node (or any
# host that can sbatch), and the flow submits its GPU stages as Slurm jobs with submitit; only
# Prefect's bookkeeping runs on the login node. Then start one worker per pool:
#
#   prefect worker start --pool judgeflow-local [--limit 4]
#
# Needs PREFECT_API_URL pointing at the server (or a local profile).
set -euo pipefail
POOL="${1:-${JUDGEFLOW_WORK_POOL:-judgeflow-local}}"
PREFECT="${PREFECT:-prefect}"
if "$PREFECT" work-pool inspect "$POOL" >/dev/null 2>&1; then
  echo "work pool $POOL exists"
else
  "$PREFECT" work-pool create "$POOL" --type process
fi
