#!/usr/bin/env bash
# The pool scheduled behind the cores (SCHED_BATCH, pool/src/sched.rs) against
# the default policy (M0_POOL_BATCH=0), side by side: WSGI hello (GET / of
# shared/probe_app.py:wsgi, 64 keep-alive connections) through one and four
# pool threads, with loop-only beside them as the ceiling the pool path
# aims for, and ASGI hello the same two ways. m0serve --cores 1 throughout.
# Then the wake deferred to the end of the core's pass (src/backend/pass_end.rs)
# (the default there) against a wake per job (M0_POOL_DEFER_WAKE=0), where it matters: --workers 2
# --cores 1, whose pool threads share their core thread's CPU, with
# SCHED_BATCH there (M0_POOL_BATCH=1) beside them.
#
#   bash bench/pool_batch.sh       # ROUNDS (5), DURATION (5s)
#
# Writes bench/results/pool-wakes{,-workers}-<date>.json and .md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
arm() {  # name label env app [m0serve flags...]
    local name=$1 label=$2 env=$3 app=$4 flags="" f
    shift 4
    for f in "$@"; do flags+="\"$f\", "; done
    cat <<ARM
    {"name": "$name", "label": "$label", "env": {$env},
     "cmd": ["$venv/bin/m0serve", $flags"--port", "{port}", "--log-level", "warn", "--app-dir", "$shared", "probe_app:$app"]}
ARM
}
one() {  # name label batch threads interface: one process, one core
    arm "$1" "$2" "\"M0_POOL_BATCH\": \"$3\"" "$5" --cores 1 --blocking-threads "$4" --interface "$5"
}
two() {  # name label env: WSGI, two workers of one core each
    arm "$1" "$2" "$3" wsgi --workers 2 --cores 1
}
compare() {  # name title baseline arms
    cat >"$work/$1.json" <<JSON
{
  "name": "$1", "title": "$2",
  "path": "/", "connections": 64, "threads": 1, "sched": true,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-5}, "baseline": "$3",
  "arms": [$4]
}
JSON
    "$venv/bin/python" bench/compare.py "$work/$1.json"
}

compare pool-wakes "WSGI and ASGI hello with the Python threads scheduled behind the cores (SCHED_BATCH) or not" \
    pool1-default "
$(one pool1-default "wsgi, 1 pool thread, default policy" 0 1 wsgi),
$(one pool1-batch "wsgi, 1 pool thread, SCHED_BATCH" 1 1 wsgi),
$(one pool4-default "wsgi, 4 pool threads, default policy" 0 4 wsgi),
$(one pool4-batch "wsgi, 4 pool threads, SCHED_BATCH" 1 4 wsgi),
$(one loop "wsgi, loop-only (--blocking-threads 0)" 1 0 wsgi),
$(one asgi-default "asgi, default policy" 0 1 asgi),
$(one asgi-batch "asgi, SCHED_BATCH" 1 1 asgi)"

compare pool-wakes-workers "WSGI hello, --workers 2 --cores 1: the pool's wake deferred to the end of the core's pass or not" \
    per-job "
$(two deferred "wake deferred to the pass end, chained (the default here)" '"M0_POOL_DEFER_WAKE": "1"'),
$(two per-job "a wake per job (M0_POOL_DEFER_WAKE=0)" '"M0_POOL_DEFER_WAKE": "0"'),
$(two batch "wake deferred, pool SCHED_BATCH" '"M0_POOL_DEFER_WAKE": "1", "M0_POOL_BATCH": "1"')"
