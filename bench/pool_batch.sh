#!/usr/bin/env bash
# The pool scheduled behind the cores (SCHED_BATCH, pool/src/sched.rs) against
# the default policy (M0_POOL_BATCH=0), side by side: WSGI hello (GET / of
# shared/probe_app.py:wsgi, 64 keep-alive connections) through one and four
# pool threads, with loop-only beside them as the ceiling the pool path
# aims for, and ASGI hello the same two ways. m0serve --cores 1 throughout.
#
#   bash bench/pool_batch.sh       # ROUNDS (5), DURATION (5s)
#
# Writes bench/results/pool-wakes-<date>.json and pool-wakes.md.
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
  "path": "/", "connections": 64, "threads": 1,
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
