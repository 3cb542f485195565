#!/usr/bin/env bash
# Large answers, side by side: GET /bytes?kb=N of bench/apps/answers.py (one
# body piece of N KiB) at 16 keep-alive connections, WSGI (m0serve with one
# pool thread against Granian with one blocking thread) and ASGI (m0serve
# against Granian and uvicorn), for each size in SIZES. Arms alternate round
# by round. Where hello measures the per-request path, this measures the
# bytes' path: how often an answer is copied and in how many writes it goes.
#
#   bash bench/answers.sh     # SIZES ("64 256"), ROUNDS (3), DURATION (5s), PYTHON
#
# Writes bench/results/answers-{wsgi,asgi}-<N>k-<date>.json and .md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
apps=$(cd bench/apps && pwd)
for kb in ${SIZES:-64 256}; do
    cat >"$work/spec.json" <<JSON
{
  "name": "answers-wsgi-${kb}k${PYTHON:+-py$pyver}", "title": "WSGI: ${kb} KiB answers (bench/apps/answers.py), 16 keep-alive connections, CPython $pyver",
  "path": "/bytes?kb=$kb", "connections": 16, "threads": 1,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-3}, "baseline": "granian",
  "arms": [
    {"name": "m0serve", "label": "m0serve --cores 1 --blocking-threads 1",
     "cmd": ["$venv/bin/m0serve", "--cores", "1", "--blocking-threads", "1", "--port", "{port}",
             "--log-level", "warn", "--app-dir", "$apps", "answers:wsgi"]},
    {"name": "granian", "label": "granian --interface wsgi --blocking-threads 1",
     "cmd": ["$venv/bin/granian", "--interface", "wsgi", "--workers", "1", "--blocking-threads", "1",
             "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "$apps", "answers:wsgi"]}
  ]
}
JSON
    "$venv/bin/python" bench/compare.py "$work/spec.json"
    cat >"$work/spec.json" <<JSON
{
  "name": "answers-asgi-${kb}k${PYTHON:+-py$pyver}", "title": "ASGI: ${kb} KiB answers (bench/apps/answers.py), 16 keep-alive connections, CPython $pyver",
  "path": "/bytes?kb=$kb", "connections": 16, "threads": 1,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-3}, "baseline": "granian",
  "arms": [
    {"name": "m0serve", "label": "m0serve --interface asgi --cores 1",
     "cmd": ["$venv/bin/m0serve", "--interface", "asgi", "--cores", "1", "--port", "{port}",
             "--log-level", "warn", "--app-dir", "$apps", "answers:asgi"]},
    {"name": "granian", "label": "granian --interface asgi",
     "cmd": ["$venv/bin/granian", "--interface", "asgi", "--workers", "1",
             "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "$apps", "answers:asgi"]},
    {"name": "uvicorn", "label": "uvicorn --loop uvloop --http httptools",
     "cmd": ["$venv/bin/uvicorn", "--loop", "uvloop", "--http", "httptools", "--workers", "1",
             "--no-access-log", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "$apps", "answers:asgi"]}
  ]
}
JSON
    "$venv/bin/python" bench/compare.py "$work/spec.json"
done
