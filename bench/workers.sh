#!/usr/bin/env bash
# Worker processes, side by side (issue 9's measurement): m0serve --workers 2
# --cores 1 against Granian --workers 2 and gunicorn -w 2 -k gthread
# --threads 4 on WSGI hello (64 and 256 connections) and on /busy?ms=0.3 (16
# connections, 2 blocking threads per worker, with m0serve --workers 1 as the
# one-worker reference for the throughput ratio); against Granian --workers 2
# and uvicorn --workers 2 on ASGI hello. Arms alternate round by round.
#
#   bash bench/workers.sh     # ROUNDS (3), DURATION (5s)
#
# Writes bench/results/workers-{wsgi-c64,wsgi-c256,busy,asgi}-<date>.json and .md.
# Targets on 2 CPUs: WSGI hello >= 1.5x Granian, ASGI hello >= 1.3x, p99 no
# worse; busy p99 <= 10 ms at >= 1.6x one worker's req/s.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
m0="\"$venv/bin/m0serve\", \"--port\", \"{port}\", \"--log-level\", \"warn\", \"--app-dir\", \"$shared\""

run() { # NAME TITLE PATH CONNECTIONS BASELINE TARGETS ARMS
    cat >"$work/$1.json" <<JSON
{
  "name": "$1", "title": "$2",
  "path": "$3", "connections": $4, "threads": 1,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-3}, "baseline": "$5",
  "targets": $6,
  "arms": [$7]
}
JSON
    "$venv/bin/python" bench/compare.py "$work/$1.json"
}

wsgi_arms="
    {\"name\": \"m0serve\", \"label\": \"m0serve --workers 2 --cores 1\",
     \"cmd\": [$m0, \"--workers\", \"2\", \"--cores\", \"1\", \"probe_app:wsgi\"]},
    {\"name\": \"granian\", \"label\": \"granian --interface wsgi --workers 2\",
     \"cmd\": [\"$venv/bin/granian\", \"--interface\", \"wsgi\", \"--workers\", \"2\",
             \"--host\", \"127.0.0.1\", \"--port\", \"{port}\", \"--working-dir\", \"$shared\", \"probe_app:wsgi\"]},
    {\"name\": \"gunicorn\", \"label\": \"gunicorn -w 2 -k gthread --threads 4\",
     \"cmd\": [\"$venv/bin/gunicorn\", \"-k\", \"gthread\", \"--threads\", \"4\", \"-w\", \"2\",
             \"-b\", \"127.0.0.1:{port}\", \"--chdir\", \"$shared\", \"probe_app:wsgi\"]}"
for c in 64 256; do
    run "workers-wsgi-c$c" "WSGI hello, 2 workers, $c keep-alive connections" / "$c" granian \
        '{"m0serve": 1.5}' "$wsgi_arms"
done

run workers-busy "GET /busy?ms=0.3, 2 workers with 2 blocking threads, 16 connections" "/busy?ms=0.3" 16 \
    m0serve-1 '{"m0serve-2": 1.6}' "
    {\"name\": \"m0serve-2\", \"label\": \"m0serve --workers 2 --cores 1 --blocking-threads 2\",
     \"cmd\": [$m0, \"--workers\", \"2\", \"--cores\", \"1\", \"--blocking-threads\", \"2\", \"probe_app:wsgi\"]},
    {\"name\": \"m0serve-1\", \"label\": \"m0serve --workers 1 --cores 1 --blocking-threads 2\",
     \"cmd\": [$m0, \"--workers\", \"1\", \"--cores\", \"1\", \"--blocking-threads\", \"2\", \"probe_app:wsgi\"]},
    {\"name\": \"granian\", \"label\": \"granian --interface wsgi --workers 2 --blocking-threads 2\",
     \"cmd\": [\"$venv/bin/granian\", \"--interface\", \"wsgi\", \"--workers\", \"2\", \"--blocking-threads\", \"2\",
             \"--host\", \"127.0.0.1\", \"--port\", \"{port}\", \"--working-dir\", \"$shared\", \"probe_app:wsgi\"]},
    {\"name\": \"gunicorn\", \"label\": \"gunicorn -w 2 -k gthread --threads 2\",
     \"cmd\": [\"$venv/bin/gunicorn\", \"-k\", \"gthread\", \"--threads\", \"2\", \"-w\", \"2\",
             \"-b\", \"127.0.0.1:{port}\", \"--chdir\", \"$shared\", \"probe_app:wsgi\"]}"

run workers-asgi "ASGI hello, 2 workers, 64 keep-alive connections" / 64 granian '{"m0serve": 1.3}' "
    {\"name\": \"m0serve\", \"label\": \"m0serve --interface asgi --workers 2 --cores 1\",
     \"cmd\": [$m0, \"--interface\", \"asgi\", \"--workers\", \"2\", \"--cores\", \"1\", \"probe_app:asgi\"]},
    {\"name\": \"granian\", \"label\": \"granian --interface asgi --workers 2\",
     \"cmd\": [\"$venv/bin/granian\", \"--interface\", \"asgi\", \"--workers\", \"2\",
             \"--host\", \"127.0.0.1\", \"--port\", \"{port}\", \"--working-dir\", \"$shared\", \"probe_app:asgi\"]},
    {\"name\": \"uvicorn\", \"label\": \"uvicorn --workers 2 --loop uvloop --http httptools\",
     \"cmd\": [\"$venv/bin/uvicorn\", \"--loop\", \"uvloop\", \"--http\", \"httptools\", \"--workers\", \"2\",
             \"--no-access-log\", \"--host\", \"127.0.0.1\", \"--port\", \"{port}\", \"--app-dir\", \"$shared\", \"probe_app:asgi\"]}"
