#!/usr/bin/env bash
# What the lingering close costs a server that closes every connection
# (src/backend/linger.rs): WSGI hello with a new connection per request
# (wrk -H "Connection: close"), the default (each close first peeks for
# unread input: one non-blocking recv) against M0_LINGER_MS=0 (closed at
# once, the behaviour before), io_uring and one core.
#
#   bash bench/linger.sh       # ROUNDS (5), DURATION (5s)
#
# Writes bench/results/linger-close.md beside its <date>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
cat >"$work/spec.json" <<JSON
{"name": "linger-close", "title": "WSGI hello, a new connection per request: the lingering close's peek on every close",
 "path": "/", "connections": 16, "threads": 1, "wrk_args": ["-H", "Connection: close"],
 "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-5}, "baseline": "off",
 "arms": [
  {"name": "on", "label": "m0serve --cores 1 (lingering close, the default)",
   "cmd": ["$venv/bin/m0serve", "--cores", "1", "--port", "{port}",
           "--log-level", "warn", "--app-dir", "$shared", "probe_app:wsgi"]},
  {"name": "off", "label": "the same with M0_LINGER_MS=0 (closed at once, before)", "env": {"M0_LINGER_MS": "0"},
   "cmd": ["$venv/bin/m0serve", "--cores", "1", "--port", "{port}",
           "--log-level", "warn", "--app-dir", "$shared", "probe_app:wsgi"]}
 ]}
JSON
"$venv/bin/python" bench/compare.py "$work/spec.json"
