#!/usr/bin/env bash
# The GIL turn against the peers: /busy?ms=0.3 of shared/probe_app.py:wsgi (a
# view that holds the GIL for 0.3 ms) at 16 keep-alive connections, four pool
# threads each: m0serve --cores 1 --blocking-threads 4, Granian
# (--blocking-threads 4) and gunicorn (gthread, 4 threads); and the same
# servers with one thread, for the throughput the four must keep. Arms
# alternate round by round, in the bench's own virtualenv (bench/venv.sh).
#
#   bash bench/fairness.sh     # ROUNDS (3), DURATION (8s)
#
# Target (issue 4): m0serve's four-thread p99 <= 10 ms and max <= 50 ms, at
# >= 90% of its one-thread requests per second (the ratio column, baseline
# m0serve with one thread).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
m0() { # name label threads
    echo "{\"name\": \"$1\", \"label\": \"$2\", \"cmd\": [\"$venv/bin/m0serve\", \"--cores\", \"1\", \"--blocking-threads\", \"$3\", \"--port\", \"{port}\", \"--log-level\", \"warn\", \"--app-dir\", \"$shared\", \"probe_app:wsgi\"]}"
}
granian() {
    echo "{\"name\": \"$1\", \"label\": \"$2\", \"cmd\": [\"$venv/bin/granian\", \"--interface\", \"wsgi\", \"--workers\", \"1\", \"--blocking-threads\", \"$3\", \"--host\", \"127.0.0.1\", \"--port\", \"{port}\", \"--working-dir\", \"$shared\", \"probe_app:wsgi\"]}"
}
gunicorn() {
    echo "{\"name\": \"$1\", \"label\": \"$2\", \"cmd\": [\"$venv/bin/gunicorn\", \"-k\", \"gthread\", \"--threads\", \"$3\", \"-w\", \"1\", \"-b\", \"127.0.0.1:{port}\", \"--chdir\", \"$shared\", \"probe_app:wsgi\"]}"
}
cat >"$work/spec.json" <<JSON
{
  "name": "wsgi-fairness", "title": "GIL fairness: /busy?ms=0.3 at 16 keep-alive connections",
  "path": "/busy?ms=0.3", "connections": 16, "threads": 1,
  "duration": "${DURATION:-8s}", "rounds": ${ROUNDS:-3}, "baseline": "m0serve-1",
  "targets": {"m0serve-4": 0.9},
  "arms": [
    $(m0 m0serve-4 "m0serve --blocking-threads 4" 4),
    $(granian granian-4 "granian --blocking-threads 4" 4),
    $(gunicorn gunicorn-4 "gunicorn gthread, 4 threads" 4),
    $(m0 m0serve-1 "m0serve --blocking-threads 1" 1),
    $(granian granian-1 "granian --blocking-threads 1" 1),
    $(gunicorn gunicorn-1 "gunicorn gthread, 1 thread" 1)
  ]
}
JSON
"$venv/bin/python" bench/compare.py "$work/spec.json"
