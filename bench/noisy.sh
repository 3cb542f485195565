#!/usr/bin/env bash
# A noisy neighbour (issue 13): WSGI hello (m0serve --cores 1 with one pool
# thread, Granian --blocking-threads 1, gunicorn gthread) and ASGI hello
# (m0serve --cores 1, Granian, uvicorn), each measured quiet and then with one
# process spinning a CPU beside the servers, unpinned (what a shared
# Kubernetes node looks like). Every table adds the servers' CPU migrations
# and involuntary context switches per 1,000 requests, the figures that
# explain who keeps its throughput and why (bench/README.head.md).
#
#   bash bench/noisy.sh        # ROUNDS (3), DURATION (5s)
#
# Writes bench/results/{quiet,noisy}-{wsgi,asgi}-<date>.json and .md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
wsgi_arms='
    {"name": "m0serve", "label": "m0serve --cores 1 --blocking-threads 1",
     "cmd": ["'$venv'/bin/m0serve", "--cores", "1", "--blocking-threads", "1", "--port", "{port}",
             "--log-level", "warn", "--app-dir", "'$shared'", "probe_app:wsgi"]},
    {"name": "granian", "label": "granian --interface wsgi --blocking-threads 1",
     "cmd": ["'$venv'/bin/granian", "--interface", "wsgi", "--workers", "1", "--blocking-threads", "1",
             "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "'$shared'", "probe_app:wsgi"]},
    {"name": "gunicorn", "label": "gunicorn -k gthread --threads 4",
     "cmd": ["'$venv'/bin/gunicorn", "-k", "gthread", "--threads", "4", "-w", "1",
             "-b", "127.0.0.1:{port}", "--chdir", "'$shared'", "probe_app:wsgi"]}'
asgi_arms='
    {"name": "m0serve", "label": "m0serve --interface asgi --cores 1",
     "cmd": ["'$venv'/bin/m0serve", "--interface", "asgi", "--cores", "1", "--port", "{port}",
             "--log-level", "warn", "--app-dir", "'$shared'", "probe_app:asgi"]},
    {"name": "granian", "label": "granian --interface asgi",
     "cmd": ["'$venv'/bin/granian", "--interface", "asgi", "--workers", "1",
             "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "'$shared'", "probe_app:asgi"]},
    {"name": "uvicorn", "label": "uvicorn --loop uvloop --http httptools",
     "cmd": ["'$venv'/bin/uvicorn", "--loop", "uvloop", "--http", "httptools", "--workers", "1",
             "--no-access-log", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "'$shared'", "probe_app:asgi"]}'
for iface in wsgi asgi; do
    arms=$wsgi_arms
    [ $iface = asgi ] && arms=$asgi_arms
    for noise in 0 1; do
        name=quiet-$iface title="quiet machine"
        [ $noise = 1 ] && name=noisy-$iface title="one process spinning a CPU beside the servers"
        cat >"$work/spec.json" <<JSON
{
  "name": "$name", "title": "${iface^^} hello, 64 keep-alive connections, $title",
  "path": "/", "connections": 64, "threads": 1, "noise": $noise, "sched": true,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-3}, "baseline": "granian",
  "arms": [$arms
  ]
}
JSON
        "$venv/bin/python" bench/compare.py "$work/spec.json"
    done
done
