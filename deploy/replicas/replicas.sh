#!/usr/bin/env bash
# Start or stop N local `ldpcollect serve` replicas on one PostgreSQL database.
#
#   LDPCOLLECT_ADMIN_TOKEN=... deploy/replicas/replicas.sh start URL N [FIRST_PORT] [RUN_DIR]
#   deploy/replicas/replicas.sh stop [RUN_DIR]
#
# start: migrates the schema once (`ldpcollect store migrate`), starts N replicas on
# 127.0.0.1:FIRST_PORT.. (default 50061; port 0 = any free port), waits until each is serving,
# and prints the address list for clients (`--server` takes it as it is). RUN_DIR (default
# ./ldpcollect-replicas) keeps each replica's pid, address and log. stop: SIGTERM to each
# replica (they finish running RPCs and close cleanly), then waits for them to exit.
# LDPCOLLECT (default: ldpcollect on PATH) is the command to run.
set -euo pipefail

LDPCOLLECT=${LDPCOLLECT:-ldpcollect}
read -r -a LDPCOLLECT_CMD <<< "$LDPCOLLECT"

usage() {
    echo "usage: $0 start POSTGRES_URL N [FIRST_PORT] [RUN_DIR] | stop [RUN_DIR]" >&2
    exit 2
}

start() {
    local url=$1 n=$2 first_port=${3:-50061} run_dir=${4:-ldpcollect-replicas}
    [[ $n =~ ^[1-9][0-9]*$ ]] || usage
    : "${LDPCOLLECT_ADMIN_TOKEN:?set LDPCOLLECT_ADMIN_TOKEN (the replicas share one admin token)}"
    mkdir -p "$run_dir"
    "${LDPCOLLECT_CMD[@]}" store migrate --store "$url" >&2
    local addresses=()
    for ((i = 0; i < n; i++)); do
        local port=0
        ((first_port == 0)) || port=$((first_port + i))
        local out="$run_dir/replica-$i"
        if [[ -f $out.pid ]] && kill -0 "$(cat "$out.pid")" 2>/dev/null; then
            echo "replica $i already runs (pid $(cat "$out.pid")); stop first" >&2
            exit 1
        fi
        "${LDPCOLLECT_CMD[@]}" serve --store "$url" --listen "127.0.0.1:$port" \
            > "$out.out" 2> "$out.log" &
        echo $! > "$out.pid"
        local line=""
        for _ in $(seq 300); do
            line=$(head -n 1 "$out.out" 2>/dev/null || true)
            [[ -n $line ]] && break
            kill -0 "$(cat "$out.pid")" 2>/dev/null || break
            sleep 0.1
        done
        if [[ $line != "ldpcollect aggregator serving on "* ]]; then
            echo "replica $i did not start; its log ($out.log):" >&2
            cat "$out.log" >&2
            stop "$run_dir"
            exit 1
        fi
        local address=${line#ldpcollect aggregator serving on }
        address=${address%% *}
        echo "$address" > "$out.address"
        addresses+=("$address")
    done
    (IFS=,; echo "${addresses[*]}")
}

stop() {
    local run_dir=${1:-ldpcollect-replicas}
    local pids=()
    for pid_file in "$run_dir"/replica-*.pid; do
        [[ -e $pid_file ]] || continue
        local pid
        pid=$(cat "$pid_file")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid"
            pids+=("$pid")
        fi
        rm -f "$pid_file"
    done
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    done
    echo "stopped ${#pids[@]} replica(s)" >&2
}

case ${1:-} in
    start) [[ $# -ge 3 ]] || usage; shift; start "$@" ;;
    stop) shift; stop "$@" ;;
    *) usage ;;
esac
