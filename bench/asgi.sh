#!/usr/bin/env bash
# ASGI hello-world, side by side: GET / of shared/probe_app.py:asgi at 64
# keep-alive connections, one process each: m0serve --interface asgi --cores 1
# (uvloop), Granian (--interface asgi, one worker) and uvicorn (--loop uvloop
# --http httptools), in the bench's own virtualenv (bench/venv.sh).
#
#   bash bench/asgi.sh        # ROUNDS (3), DURATION (5s), CONNECTIONS (64)
#   PYTHON=python3.13 bash bench/asgi.sh   # the same on CPython 3.13 (asgi-hello-py3.13)
#   SERVER_CPU=1 bash bench/asgi.sh        # every server on CPU 1, wrk on the others (asgi-hello-cpu1)
#
# Targets (issue 13): m0serve >= 1.5x Granian's requests per second and >= 2.5x
# uvicorn's, p99 no worse.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
cat >"$work/spec.json" <<JSON
{
  "name": "asgi-hello${SERVER_CPU:+-cpu$SERVER_CPU}${PYTHON:+-py$pyver}", "title": "ASGI: GET / of probe_app:asgi, 64 keep-alive connections, CPython $pyver${SERVER_CPU:+, servers on CPU $SERVER_CPU}", $pin_spec
  "path": "/", "connections": ${CONNECTIONS:-64}, "threads": 1,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-3}, "baseline": "granian",
  "targets": {"m0serve": 1.5},
  "arms": [
    {"name": "m0serve", "label": "m0serve --interface asgi --cores 1",
     "cmd": ["$venv/bin/m0serve", "--interface", "asgi", "--cores", "1", "--port", "{port}",
             "--log-level", "warn", "--app-dir", "$shared", "probe_app:asgi"]},
    {"name": "granian", "label": "granian --interface asgi",
     "cmd": ["$venv/bin/granian", "--interface", "asgi", "--workers", "1",
             "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "$shared", "probe_app:asgi"]},
    {"name": "uvicorn", "label": "uvicorn --loop uvloop --http httptools",
     "cmd": ["$venv/bin/uvicorn", "--loop", "uvloop", "--http", "httptools", "--workers", "1",
             "--no-access-log", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "$shared", "probe_app:asgi"]}
  ]
}
JSON
"$venv/bin/python" bench/compare.py "$work/spec.json"
