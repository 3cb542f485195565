#!/usr/bin/env bash
# What the operations features cost on WSGI hello (issue 12): GET / of
# shared/probe_app.py:wsgi at 64 keep-alive connections, m0serve --cores 1
# --blocking-threads 1 plain, with --metrics-address, with --access-log (the
# default line), and with --access-log-format json (compare.py sends each
# server's output to a file, /tmp/bench-operations-ARM.log, as a collector
# would read it). Arms alternate round by
# round; ratios are to the plain arm.
#
#   bash bench/operations.sh   # ROUNDS (5), DURATION (5s), CONNECTIONS (64)
#
# Writes bench/results/operations-<date>.json and bench/results/operations.md.
# Target (issue 12): metrics on costs <= 2 % of req/s.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
m0="\"$venv/bin/m0serve\", \"--cores\", \"1\", \"--blocking-threads\", \"1\", \"--port\", \"{port}\", \"--app-dir\", \"$shared\""
cat >"$work/spec.json" <<JSON
{
  "name": "operations", "title": "WSGI hello with metrics and access logs, 64 keep-alive connections",
  "path": "/", "connections": ${CONNECTIONS:-64}, "threads": 1,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-5}, "baseline": "plain",
  "targets": {"metrics": 0.98},
  "arms": [
    {"name": "plain", "label": "m0serve --cores 1 --blocking-threads 1",
     "cmd": [$m0, "--log-level", "warn", "probe_app:wsgi"]},
    {"name": "metrics", "label": "... --metrics-address 127.0.0.1:0",
     "cmd": [$m0, "--log-level", "warn", "--metrics-address", "127.0.0.1:0", "probe_app:wsgi"]},
    {"name": "access-log", "label": "... --access-log (default line, to a file)",
     "cmd": [$m0, "--access-log", "probe_app:wsgi"]},
    {"name": "access-log-json", "label": "... --access-log-format json (to a file)",
     "cmd": [$m0, "--access-log-format", "json", "probe_app:wsgi"]}
  ]
}
JSON
"$venv/bin/python" bench/compare.py "$work/spec.json"
