#!/usr/bin/env bash
# WebSocket echo, side by side (issue 5): tests/apps/asgi_ws_echo.py at 16
# connections, each sending a 64-byte text message and waiting for its echo,
# over and over; one process each: m0serve --interface asgi --cores 1,
# Granian (--interface asgi, one worker) and uvicorn (--loop uvloop --http
# httptools --ws websockets), in the bench's own virtualenv (bench/venv.sh).
# The load client is examples/ws_bench.rs, built here in release.
#
#   bash bench/ws_echo.sh     # ROUNDS (3), DURATION (5, seconds), CONNECTIONS (16), MESSAGE_BYTES (64)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
cargo build -q --release --example ws_bench
apps=$(cd tests/apps && pwd)
cat >"$work/spec.json" <<JSON
{
  "name": "ws-echo", "title": "ASGI WebSocket echo (tests/apps/asgi_ws_echo.py), 16 connections",
  "path": "/", "client": "$PWD/target/release/examples/ws_bench",
  "connections": ${CONNECTIONS:-16}, "seconds": ${DURATION:-5}, "message_bytes": ${MESSAGE_BYTES:-64},
  "rounds": ${ROUNDS:-3}, "baselines": ["granian", "uvicorn"],
  "arms": [
    {"name": "m0serve", "label": "m0serve --interface asgi --cores 1",
     "cmd": ["$venv/bin/m0serve", "--interface", "asgi", "--cores", "1", "--port", "{port}",
             "--log-level", "warn", "--app-dir", "$apps", "asgi_ws_echo:app"]},
    {"name": "granian", "label": "granian --interface asgi",
     "cmd": ["$venv/bin/granian", "--interface", "asgi", "--workers", "1",
             "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "$apps", "asgi_ws_echo:app"]},
    {"name": "uvicorn", "label": "uvicorn --loop uvloop --http httptools --ws websockets",
     "cmd": ["$venv/bin/uvicorn", "--loop", "uvloop", "--http", "httptools", "--ws", "websockets",
             "--workers", "1", "--no-access-log", "--host", "127.0.0.1", "--port", "{port}",
             "--app-dir", "$apps", "asgi_ws_echo:app"]}
  ]
}
JSON
"$venv/bin/python" bench/ws_echo.py "$work/spec.json"
