#!/usr/bin/env bash
# WSGI hello-world, side by side: GET / of shared/probe_app.py:wsgi at 64
# keep-alive connections. m0serve --cores 1 (loop-only, and one pool thread)
# against Granian (--interface wsgi --blocking-threads 1) and gunicorn
# (gthread, 4 threads), the peers pinned by shared/bench-peers.txt, all in the
# bench's own virtualenv (bench/.venv, m0serve installed from this checkout as
# a release build). Arms alternate round by round.
#
#   bash bench/wsgi.sh        # ROUNDS (3), DURATION (5s), CONNECTIONS (64), PYTHON (python3)
#   SERVER_CPU=1 bash bench/wsgi.sh   # every server on CPU 1, wrk on the others (wsgi-hello-cpu1)
#
# Writes bench/results/wsgi-hello-<date>.json and bench/results/wsgi-hello.md.
# Target (issue 3): m0serve >= 1.3x Granian's requests per second, p99 no worse.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
cat >"$work/spec.json" <<JSON
{
  "name": "wsgi-hello${SERVER_CPU:+-cpu$SERVER_CPU}${PYTHON:+-py$pyver}", "title": "WSGI: GET / of probe_app:wsgi, 64 keep-alive connections, CPython $pyver${SERVER_CPU:+, servers on CPU $SERVER_CPU}", $pin_spec
  "path": "/", "connections": ${CONNECTIONS:-64}, "threads": 1,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-3}, "baseline": "granian",
  "targets": {"m0serve-loop": 1.3, "m0serve-pool": 1.3},
  "arms": [
    {"name": "m0serve-loop", "label": "m0serve --cores 1 --blocking-threads 0",
     "cmd": ["$venv/bin/m0serve", "--cores", "1", "--blocking-threads", "0", "--port", "{port}",
             "--log-level", "warn", "--app-dir", "$shared", "probe_app:wsgi"]},
    {"name": "m0serve-pool", "label": "m0serve --cores 1 --blocking-threads 1",
     "cmd": ["$venv/bin/m0serve", "--cores", "1", "--blocking-threads", "1", "--port", "{port}",
             "--log-level", "warn", "--app-dir", "$shared", "probe_app:wsgi"]},
    {"name": "granian", "label": "granian --interface wsgi --blocking-threads 1",
     "cmd": ["$venv/bin/granian", "--interface", "wsgi", "--workers", "1", "--blocking-threads", "1",
             "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "$shared", "probe_app:wsgi"]},
    {"name": "gunicorn", "label": "gunicorn -k gthread --threads 4",
     "cmd": ["$venv/bin/gunicorn", "-k", "gthread", "--threads", "4", "-w", "1",
             "-b", "127.0.0.1:{port}", "--chdir", "$shared", "probe_app:wsgi"]}
  ]
}
JSON
"$venv/bin/python" bench/compare.py "$work/spec.json"
