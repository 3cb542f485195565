#!/usr/bin/env bash
# The core threads scheduled behind the pool (SCHED_BATCH, pool/src/sched.rs
# core_behind_app) against the default policy (M0_CORE_BATCH=0), side by side
# where it applies: --workers 2 --cores 1, whose pool threads (or ASGI loop
# thread) share their core thread's CPU. WSGI hello (GET / of
# shared/probe_app.py, 64 keep-alive connections), /busy?ms=0.3 with two
# blocking threads per worker (16 connections) and ASGI hello, with Granian's
# two workers beside them for scale.
#
#   bash bench/core_batch.sh       # ROUNDS (5), DURATION (5s)
#
# Writes bench/results/core-batch-wsgi-c64.md, results/core-batch-busy.md and
# results/core-batch-asgi.md, each beside its <date>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
run() {  # name what path connections app m0serve-flags granian-flags
    local flags="" f
    for f in $6; do flags+="\"$f\", "; done
    cat >"$work/spec.json" <<JSON
{"name": "core-batch-$1", "title": "Core threads behind the pool: --workers 2 --cores 1, $2",
 "path": "$3", "connections": $4, "threads": 1, "sched": true,
 "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-5}, "baseline": "off",
 "arms": [
  {"name": "on", "label": "m0serve --workers 2 --cores 1 (cores SCHED_BATCH, the new default)",
   "cmd": ["$venv/bin/m0serve", "--workers", "2", "--cores", "1", $flags"--port", "{port}",
           "--log-level", "warn", "--app-dir", "$shared", "$5"]},
  {"name": "off", "label": "the same with M0_CORE_BATCH=0 (before)", "env": {"M0_CORE_BATCH": "0"},
   "cmd": ["$venv/bin/m0serve", "--workers", "2", "--cores", "1", $flags"--port", "{port}",
           "--log-level", "warn", "--app-dir", "$shared", "$5"]},
  {"name": "granian", "label": "granian --workers 2",
   "cmd": ["$venv/bin/granian", $7, "--workers", "2", "--host", "127.0.0.1", "--port", "{port}",
           "--working-dir", "$shared", "$5"]}
 ]}
JSON
    "$venv/bin/python" bench/compare.py "$work/spec.json"
}
run wsgi-c64 "WSGI hello" / 64 probe_app:wsgi "" '"--interface", "wsgi"'
run busy "/busy?ms=0.3, 2 blocking threads" "/busy?ms=0.3" 16 probe_app:wsgi "--blocking-threads 2" \
    '"--interface", "wsgi", "--blocking-threads", "2"'
run asgi "ASGI hello" / 64 probe_app:asgi "--interface asgi" '"--interface", "asgi"'
