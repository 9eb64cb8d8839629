# shellcheck shell=bash disable=SC2034  # constants here are used by up and down
# Shared by `up` and `down`: where the state lives, which daemons exist, and how to tell
# whether a PID is one *we* started. Sourced, not executed.

DEV_CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$DEV_CLUSTER_DIR/../../.." && pwd)"
STATE="${DEV_SLURM_DIR:-${JUDGEFLOW_HOME:-$REPO_ROOT/.judgeflow}/slurm}"

# Private names and ports, chosen so the dev cluster never fights a system Slurm or MariaDB.
CLUSTER_NAME=judgeflow-dev
PARTITION=debug
NODES=(node1 node2)
CTLD_PORT=16817
DBD_PORT=16819
DB_PORT=3307
FIRST_SLURMD_PORT=17001

# Every daemon is started with this variable in its environment. A PID counts as ours only
# if /proc/PID/environ carries it, which makes stale or recycled PIDs in pid files harmless.
MARKER="JUDGEFLOW_DEV_SLURM=$STATE"

# Pid files, in the order `down` stops them (reverse start order).
daemon_pidfiles() {
    local node
    for node in "${NODES[@]}"; do
        echo "slurmd-$node:$STATE/run/slurmd-$node.pid"
    done
    echo "slurmctld:$STATE/run/slurmctld.pid"
    echo "slurmdbd:$STATE/run/slurmdbd.pid"
    echo "mariadb:$STATE/mysql/mariadbd.pid"
    echo "munged:$STATE/munge/munged.pid"
}

# elapsed START: seconds since START (an $EPOCHREALTIME value), one decimal.
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

log() { printf '[dev-cluster] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

require_root() {
    [[ $EUID -eq 0 ]] || die "run as root (sudo $0): it installs packages and runs the Slurm daemons as root"
}

# take_lock: one up/down at a time per state dir (two test sessions starting together).
# Daemons must not inherit fd 9, or they would hold the lock forever: see `launch` in up.
take_lock() {
    mkdir -p "$STATE"
    exec 9>"$STATE/.lock"
    flock -w 300 9 || die "another up/down holds $STATE/.lock"
}

# is_ours PID: the process exists and was started by these scripts for this state dir.
is_ours() {
    local pid=$1
    [[ $pid =~ ^[0-9]+$ ]] && [[ -r /proc/$pid/environ ]] &&
        grep -qzxF -- "$MARKER" "/proc/$pid/environ" 2>/dev/null
}

# pid_from FILE: print the PID recorded in FILE if that process is ours; fail otherwise.
pid_from() {
    local file=$1 pid
    [[ -s $file ]] || return 1
    read -r pid <"$file" || true
    is_ours "$pid" && echo "$pid"
}

# wait_for TIMEOUT_S DESCRIPTION COMMAND...: poll COMMAND every 0.2 s until it succeeds.
wait_for() {
    local timeout=$1 what=$2
    shift 2
    local deadline=$((SECONDS + timeout))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || { log "timed out after ${timeout}s waiting for $what"; return 1; }
        sleep 0.2
    done
}

# alive PID: exists and is not a zombie (our daemons are children of PID 1, which may take a
# while to reap them; kill -0 would keep answering yes until then).
alive() {
    local stat
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    stat=${stat##*) } # the field after "(comm)" is the state letter
    [[ ${stat%% *} != Z ]]
}

# stop_pid NAME PID [GRACE_S]: SIGTERM, wait up to GRACE_S, then SIGKILL.
stop_pid() {
    local name=$1 pid=$2 grace=${3:-15}
    local deadline=$((SECONDS + grace)) t0=$EPOCHREALTIME
    kill -TERM "$pid" 2>/dev/null || return 0
    while alive "$pid"; do
        if ((SECONDS >= deadline)); then
            log "$name (pid $pid) ignored SIGTERM for $(elapsed "$t0")s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
    log "stopped $name (pid $pid) in $(elapsed "$t0")s"
}

# descendants PID: every process below PID in the process tree.
descendants() {
    local -A children=()
    local stat line pid ppid
    for stat in /proc/[0-9]*/stat; do
        { read -r line <"$stat"; } 2>/dev/null || continue
        pid=${line%% *}
        line=${line##*) } # "STATE PPID ..."
        line=${line#* }
        ppid=${line%% *}
        children[$ppid]+="$pid "
    done
    local queue=("$1") parent child
    while ((${#queue[@]})); do
        parent=${queue[0]}
        queue=("${queue[@]:1}")
        for child in ${children[$parent]:-}; do
            echo "$child"
            queue+=("$child")
        done
    done
}

# Processes left over from what we started (e.g. slurmstepd of a job that outlived scancel).
# They inherited MARKER from a daemon, so this never touches anything these scripts did not start.
marked_pids() {
    local dir pid
    for dir in /proc/[0-9]*; do
        pid=${dir#/proc/}
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        is_ours "$pid" && echo "$pid"
    done
    return 0
}
