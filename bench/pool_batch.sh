#!/usr/bin/env bash
# The pool scheduled behind the cores (SCHED_BATCH, pool/src/sched.rs) against
# the default policy (M0_POOL_BATCH=0), side by side: WSGI hello (GET / of
# shared/probe_app.py:wsgi, 64 keep-alive connections) through one and four
# pool threads, with loop-only beside them as the ceiling the pool path
# aims for, and ASGI hello the same two ways. m0serve --cores 1 throughout.
# Then the wake deferred to the end of the core's pass (src/backend/pass_end.rs)
# against a wake per job (M0_POOL_DEFER_WAKE=0), where it matters: --workers 2
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
arm() {  # name label batch threads interface
    cat <<ARM
    {"name": "$1", "label": "$2", "env": {"M0_POOL_BATCH": "$3"},
     "cmd": ["$venv/bin/m0serve", "--cores", "1", "--blocking-threads", "$4", "--interface", "$5",
             "--port", "{port}", "--log-level", "warn", "--app-dir", "$shared", "probe_app:$5"]}
ARM
}
cat >"$work/spec.json" <<JSON
{
  "name": "pool-wakes", "title": "WSGI and ASGI hello with the Python threads scheduled behind the cores (SCHED_BATCH) or not",
  "path": "/", "connections": 64, "threads": 1, "sched": true,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-5}, "baseline": "pool1-default",
  "arms": [
$(arm pool1-default "wsgi, 1 pool thread, default policy" 0 1 wsgi),
$(arm pool1-batch "wsgi, 1 pool thread, SCHED_BATCH" 1 1 wsgi),
$(arm pool4-default "wsgi, 4 pool threads, default policy" 0 4 wsgi),
$(arm pool4-batch "wsgi, 4 pool threads, SCHED_BATCH" 1 4 wsgi),
$(arm loop "wsgi, loop-only (--blocking-threads 0)" 1 0 wsgi),
$(arm asgi-default "asgi, default policy" 0 1 asgi),
$(arm asgi-batch "asgi, SCHED_BATCH" 1 1 asgi)
  ]
}
JSON
"$venv/bin/python" bench/compare.py "$work/spec.json"

workers_arm() {  # name label env
    cat <<ARM
    {"name": "$1", "label": "$2", "env": {$3},
     "cmd": ["$venv/bin/m0serve", "--workers", "2", "--cores", "1",
             "--port", "{port}", "--log-level", "warn", "--app-dir", "$shared", "probe_app:wsgi"]}
ARM
}
cat >"$work/workers.json" <<JSON
{
  "name": "pool-wakes-workers", "title": "WSGI hello, --workers 2 --cores 1: the pool's wake deferred to the end of the core's pass or not",
  "path": "/", "connections": 64, "threads": 1, "sched": true,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-5}, "baseline": "per-job",
  "arms": [
$(workers_arm deferred "wake deferred to the pass end (default)" ""),
$(workers_arm per-job "a wake per job (M0_POOL_DEFER_WAKE=0)" '"M0_POOL_DEFER_WAKE": "0"'),
$(workers_arm batch "wake deferred, pool SCHED_BATCH (M0_POOL_BATCH=1)" '"M0_POOL_BATCH": "1"')
  ]
}
JSON
"$venv/bin/python" bench/compare.py "$work/workers.json"
