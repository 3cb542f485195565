#!/usr/bin/env bash
# TLS, side by side: ASGI hello (GET / of shared/probe_app.py:asgi) over
# HTTPS, one process each, m0serve --interface asgi --cores 1 against Granian
# (--interface asgi, one worker) and uvicorn (uvloop, httptools), each with
# the same ECDSA P-256 certificate made here by openssl, in the bench's own
# virtualenv (bench/venv.sh). Two tables:
#   tls-hello    keep-alive connections (CONNECTIONS, 64): the record layer's cost
#   tls-connect  a new connection per request (wrk with Connection: close,
#                NEW_CONNECTIONS, 16): the handshake's cost
#
#   bash bench/tls.sh        # ROUNDS (3), DURATION (5s)
#
# Target (issue 10): m0serve >= 1.3x Granian on both, p99 no worse.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
spec() { # NAME TITLE CONNECTIONS [WRK_ARGS_JSON]
    cat <<JSON
{
  "name": "$1", "title": "$2",
  "path": "/", "connections": $3, "threads": 1, "scheme": "https", "wrk_args": ${4:-[]},
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-3}, "baseline": "granian",
  "targets": {"m0serve": 1.3},
  "arms": [
    {"name": "m0serve", "label": "m0serve --interface asgi --cores 1 (rustls)",
     "cmd": ["$venv/bin/m0serve", "--interface", "asgi", "--cores", "1", "--port", "{port}",
             "--ssl-certfile", "$work/cert.pem", "--ssl-keyfile", "$work/key.pem",
             "--log-level", "warn", "--app-dir", "$shared", "probe_app:asgi"]},
    {"name": "granian", "label": "granian --interface asgi",
     "cmd": ["$venv/bin/granian", "--interface", "asgi", "--workers", "1",
             "--ssl-certificate", "$work/cert.pem", "--ssl-keyfile", "$work/key.pem",
             "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "$shared", "probe_app:asgi"]},
    {"name": "uvicorn", "label": "uvicorn --loop uvloop --http httptools",
     "cmd": ["$venv/bin/uvicorn", "--loop", "uvloop", "--http", "httptools", "--workers", "1",
             "--ssl-certfile", "$work/cert.pem", "--ssl-keyfile", "$work/key.pem",
             "--no-access-log", "--host", "127.0.0.1", "--port", "{port}", "--app-dir", "$shared", "probe_app:asgi"]}
  ]
}
JSON
}
spec tls-hello "TLS: ASGI GET / over HTTPS, ${CONNECTIONS:-64} keep-alive connections" "${CONNECTIONS:-64}" >"$work/hello.json"
spec tls-connect "TLS: ASGI GET / over HTTPS, a new connection per request, ${NEW_CONNECTIONS:-16} at a time" \
    "${NEW_CONNECTIONS:-16}" '["-H", "Connection: close"]' >"$work/connect.json"
"$venv/bin/python" bench/compare.py "$work/hello.json"
"$venv/bin/python" bench/compare.py "$work/connect.json"
