#!/usr/bin/env bash
# A 1 MiB static file, side by side: m0serve's native static route (both
# backends, --cores 1) against Granian's (--static-path-mount), 16 keep-alive
# connections, arms alternating round by round. No Python on this path.
#
#   bash bench/static.sh      # ROUNDS (3), DURATION (5s)
#
# Writes bench/results/static-1m-<date>.json and bench/results/static-1m.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
mkdir -p "$work/static"
head -c 1048576 /dev/urandom >"$work/static/big.bin"
m0() {  # $1: backend
    cat <<ARM
    {"name": "m0serve-$1", "label": "m0serve --backend $1 --cores 1",
     "cmd": ["$venv/bin/m0serve", "--backend", "$1", "--cores", "1", "--blocking-threads", "1", "--port", "{port}",
             "--log-level", "warn", "--static-path-route", "/static", "--static-path-mount", "$work/static",
             "--app-dir", "$shared", "probe_app:wsgi"]}
ARM
}
cat >"$work/spec.json" <<JSON
{
  "name": "static-1m", "title": "A 1 MiB static file, 16 keep-alive connections",
  "path": "/static/big.bin", "connections": 16, "threads": 1,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-3}, "baseline": "granian",
  "arms": [
$(m0 uring),
$(m0 portable),
    {"name": "granian", "label": "granian --static-path-mount",
     "cmd": ["$venv/bin/granian", "--interface", "wsgi", "--workers", "1", "--blocking-threads", "1",
             "--host", "127.0.0.1", "--port", "{port}", "--static-path-route", "/static",
             "--static-path-mount", "$work/static", "--working-dir", "$shared", "probe_app:wsgi"]}
  ]
}
JSON
"$venv/bin/python" bench/compare.py "$work/spec.json"
