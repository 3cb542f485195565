#!/usr/bin/env bash
# Memory per idle keep-alive connection: IDLE (10000) connections, each
# answered once (GET /fast of shared/probe_app.py:wsgi) and held open, against
# m0serve on each backend (--cores 1, one pool thread) and Granian (one
# worker), in the bench's own virtualenv (bench/venv.sh). Arms alternate.
#
#   bash bench/idle.sh        # ROUNDS (3), IDLE (10000)
#
# Writes bench/results/idle-connections-<date>.json and idle-connections.md.
# Target (issue 13): io_uring <= 4 KiB per idle connection.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
idle=${IDLE:-10000}
# Room for the connections: the keep-alive timeout outlasts a round, the limit is above them.
m0=("$venv/bin/m0serve" --cores 1 --blocking-threads 1 --keep-alive-timeout 600
    --max-connections $((idle + 1000)) --port "{port}" --log-level warn --app-dir "$shared")
json_list() { printf '"%s",' "$@" | sed 's/,$//'; }
cat >"$work/spec.json" <<JSON
{
  "name": "idle-connections", "title": "Memory per idle keep-alive connection ($idle of them)",
  "path": "/fast", "idle": $idle, "rounds": ${ROUNDS:-3},
  "targets": {"m0serve-uring": 4},
  "arms": [
    {"name": "m0serve-uring", "label": "m0serve --backend uring",
     "cmd": [$(json_list "${m0[@]}"), "--backend", "uring", "probe_app:wsgi"]},
    {"name": "m0serve-portable", "label": "m0serve --backend portable",
     "cmd": [$(json_list "${m0[@]}"), "--backend", "portable", "probe_app:wsgi"]},
    {"name": "granian", "label": "granian --interface wsgi --blocking-threads 1",
     "cmd": ["$venv/bin/granian", "--interface", "wsgi", "--workers", "1", "--blocking-threads", "1",
             "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "$shared", "probe_app:wsgi"]}
  ]
}
JSON
"$venv/bin/python" bench/idle.py "$work/spec.json"
