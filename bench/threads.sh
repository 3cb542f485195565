#!/usr/bin/env bash
# How many pool threads by default (issue 11, point 8): m0serve --cores 1
# with --blocking-threads 1, 2, 4 and 8, side by side, on GET / (hello) and on
# GET /busy?ms=0.3 (a CPU-bound view holding the GIL), 16 keep-alive
# connections each, arms alternating round by round. The GIL turn is meant
# to make extra threads cheap for CPU-bound views; this is the measurement
# behind the default.
#
#   bash bench/threads.sh     # ROUNDS (3), DURATION (5s), CONNECTIONS (16)
#
# Writes bench/results/threads-{hello,busy}-<date>.json and .md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
for shape in hello busy; do
    path=/
    [ "$shape" = busy ] && path="/busy?ms=0.3"
    arms=""
    for n in 1 2 4 8; do
        arms+="${arms:+,}
    {\"name\": \"threads-$n\", \"label\": \"m0serve --cores 1 --blocking-threads $n\",
     \"cmd\": [\"$venv/bin/m0serve\", \"--cores\", \"1\", \"--blocking-threads\", \"$n\", \"--port\", \"{port}\",
             \"--log-level\", \"warn\", \"--app-dir\", \"$shared\", \"probe_app:wsgi\"]}"
    done
    cat >"$work/spec-$shape.json" <<JSON
{
  "name": "threads-$shape", "title": "WSGI pool threads: GET $path of probe_app:wsgi, ${CONNECTIONS:-16} keep-alive connections",
  "path": "$path", "connections": ${CONNECTIONS:-16}, "threads": 1,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-3}, "baseline": "threads-1",
  "arms": [$arms
  ]
}
JSON
    "$venv/bin/python" bench/compare.py "$work/spec-$shape.json"
done
