#!/usr/bin/env bash
# HTTP/2, side by side: h2load against ASGI hello (GET / of
# shared/probe_app.py:asgi) over TLS (ALPN h2) and in clear text (prior
# knowledge, h2c), 64 connections with 1 and with 10 concurrent streams each,
# and a 1 MiB static file; m0serve --interface asgi --cores 1 (its default
# --http auto) against Granian --http 2 and Hypercorn, one process each, in
# the bench's own virtualenv (bench/venv.sh). Each server is pinned to CPU 0
# and h2load to CPU 1 (SERVER_CPU and CLIENT_CPU move them).
#
#   bash bench/http2.sh      # ROUNDS (3), DURATION (5s), CONNECTIONS (64)
#
# Hypercorn serves no static files, so the static row is m0serve's and
# Granian's native static routes alone. Target (issue 34): m0serve >= 1.5x
# Granian on each row, p99 no worse.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v h2load >/dev/null || { echo "bench: h2load is needed (apt-get install nghttp2-client)" >&2; exit 2; }
source bench/venv.sh
shared=$(shared_dir)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
mkdir -p "$work/static"
head -c 1048576 /dev/urandom >"$work/static/big.bin"
conns=${CONNECTIONS:-64}
spec() { # NAME TITLE SCHEME STREAMS PATH
    local m0_tls="" granian_tls="" hypercorn_tls="" hypercorn=""
    if [ "$3" = https ]; then
        m0_tls='"--ssl-certfile", "'$work/cert.pem'", "--ssl-keyfile", "'$work/key.pem'",'
        granian_tls='"--ssl-certificate", "'$work/cert.pem'", "--ssl-keyfile", "'$work/key.pem'",'
        hypercorn_tls='"--certfile", "'$work/cert.pem'", "--keyfile", "'$work/key.pem'",'
    fi
    if [ "$5" = / ]; then
        hypercorn=',
    {"name": "hypercorn", "label": "hypercorn (asyncio)", "cwd": "'$shared'",
     "cmd": ["'$venv/bin/hypercorn'", "--workers", "1", '$hypercorn_tls'
             "--bind", "127.0.0.1:{port}", "probe_app:asgi"]}'
    fi
    cat <<JSON
{
  "name": "$1", "title": "$2",
  "path": "$5", "connections": $conns, "streams": $4, "threads": 1, "scheme": "$3",
  "client": "h2load", "cpus": {"server": "${SERVER_CPU:-0}", "client": "${CLIENT_CPU:-1}"},
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-3}, "baseline": "granian",
  "targets": {"m0serve": 1.5},
  "arms": [
    {"name": "m0serve", "label": "m0serve --interface asgi --cores 1",
     "cmd": ["$venv/bin/m0serve", "--interface", "asgi", "--cores", "1", "--port", "{port}", $m0_tls
             "--static-path-route", "/static", "--static-path-mount", "$work/static",
             "--log-level", "warn", "--app-dir", "$shared", "probe_app:asgi"]},
    {"name": "granian", "label": "granian --interface asgi --http 2",
     "cmd": ["$venv/bin/granian", "--interface", "asgi", "--http", "2", "--workers", "1", $granian_tls
             "--static-path-route", "/static", "--static-path-mount", "$work/static",
             "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "$shared", "probe_app:asgi"]}$hypercorn
  ]
}
JSON
}
rows=(
    "h2c-hello|h2c (prior knowledge): ASGI GET /, $conns connections x 1 stream|http|1|/"
    "h2c-hello-m10|h2c (prior knowledge): ASGI GET /, $conns connections x 10 streams|http|10|/"
    "h2-tls-hello|HTTP/2 over TLS (ALPN h2): ASGI GET /, $conns connections x 1 stream|https|1|/"
    "h2-tls-hello-m10|HTTP/2 over TLS (ALPN h2): ASGI GET /, $conns connections x 10 streams|https|10|/"
    "h2c-static-1m|h2c: a 1 MiB static file, $conns connections x 1 stream|http|1|/static/big.bin"
)
for row in "${rows[@]}"; do
    IFS='|' read -r name title scheme streams path <<<"$row"
    [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || continue
    spec "$name" "$title" "$scheme" "$streams" "$path" >"$work/$name.json"
    "$venv/bin/python" bench/compare.py "$work/$name.json"
done
