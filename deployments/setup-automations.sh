#!/usr/bin/env bash
# Create (or replace) judgeflow's automations on the Prefect server (PREFECT_API_URL):
#
#   deployments/setup-automations.sh [FILE ...]   # default: deployments/automations/*.yaml
#
# judgeflow-crashed-flow-runs marks a flow run Crashed when its process died without a word.
set -euo pipefail
cd "$(dirname "$0")"
PREFECT="${PREFECT:-prefect}"
files=("$@")
if [ ${#files[@]} -eq 0 ]; then files=(automations/*.yaml); fi
for file in "${files[@]}"; do
  for name in $(sed -n 's/^  - name: //p' "$file"); do
    # replace, not duplicate: an automation's name is not unique in Prefect
    "$PREFECT" --no-prompt automation delete "$name" >/dev/null 2>&1 || true
  done
  "$PREFECT" --no-prompt automation create --from-file "$file"
done
