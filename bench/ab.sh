#!/usr/bin/env bash
# A/B: this checkout against another commit of m0serve, side by side, on the
# io_uring backend: WSGI hello (GET / of shared/probe_app.py:wsgi, --cores 1,
# one pool thread, 64 connections), a 1 MiB static file (16 connections),
# 64 and 256 KiB answers of bench/apps/answers.py, WSGI and ASGI (16
# connections), and a 64 KiB binary WebSocket echo (tests/apps/asgi_ws_echo.py,
# 16 connections, examples/ws_bench.rs), and WSGI hello over HTTPS (a
# self-signed P-256 certificate, 64 connections). For a change that must
# leave throughput where it was. BACKEND=portable runs the same on mio (the
# results named with -portable).
#
#   BASE=<commit> bash bench/ab.sh      # ROUNDS (5), DURATION (5s)
#   BASE=<commit> ONLY=ws-binary bash bench/ab.sh   # only the results whose names match the regex ONLY
#
# The base is built once per commit into bench/.venv-base (a release build
# from a git worktree). Writes bench/results/ab-hello.md, ab-static-1m.md and
# ab-answers-{wsgi,asgi}-{64,256}k.md, ab-ws-binary-64k.md, ab-https-hello.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
base=$(git rev-parse --short "${BASE:?BASE=<commit> to compare against}")
head=$(git rev-parse --short HEAD)
base_venv=bench/.venv-base
if [ "$(cat "$base_venv/.commit" 2>/dev/null)" != "$base" ]; then
    rm -rf "$base_venv"
    "$venv/bin/python" -m venv "$base_venv"
    git worktree add --detach -f "$work/base" "$base" >/dev/null
    "$base_venv/bin/python" -m pip install -q "$work/base"
    git worktree remove --force "$work/base"
    echo "$base" >"$base_venv/.commit"
fi
# The ASGI arms run on uvloop, both of them: the base venv gets the head venv's
# uvloop (without it, `--loop auto` would quietly measure asyncio against uvloop).
uvloop_pin=$("$venv/bin/python" -m pip freeze | grep -i '^uvloop==')
"$base_venv/bin/python" -m pip install -q "${uvloop_pin:?bench/.venv has no uvloop}"
base_venv=$(cd "$base_venv" && pwd)
backend=${BACKEND:-uring}
sfx=""
[ "$backend" = uring ] || sfx="-$backend"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
mkdir -p "$work/static"
head -c 1048576 /dev/urandom >"$work/static/big.bin"
apps=$(cd bench/apps && pwd)
arms() {  # $1: extra m0serve flags as JSON list items; $2: app dir, $3: app
    for side in head base; do
        local bin=$venv/bin/m0serve label=$head
        [ $side = base ] && bin=$base_venv/bin/m0serve label="$base (base)"
        [ $side = base ] && printf ','
        cat <<ARM
    {"name": "$side", "label": "m0serve $label",
     "cmd": ["$bin", "--backend", "$backend", "--cores", "1", "--blocking-threads", "1", "--port", "{port}",
             "--log-level", "warn", "--app-dir", "${2:-$shared}", $1 "${3:-probe_app:wsgi}"]}
ARM
    done
}
# ONLY=REGEX: just the results whose names match it.
wanted() { [[ $1 =~ ${ONLY:-.} ]]; }
run() {  # name title path connections extra-flags [app-dir app]; SCHEME=https
    wanted "$1" || return 0
    cat >"$work/spec.json" <<JSON
{
  "name": "$1$sfx", "title": "$2 ($backend)", "path": "$3", "connections": $4, "threads": 1,
  "scheme": "${SCHEME:-http}",
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-5}, "baseline": "base",
  "arms": [
$(arms "$5" "${6:-}" "${7:-}")
  ]
}
JSON
    "$venv/bin/python" bench/compare.py "$work/spec.json"
}
run ab-hello "A/B $head against $base: WSGI hello, 64 keep-alive connections" / 64 ""
run ab-static-1m "A/B $head against $base: a 1 MiB static file, 16 keep-alive connections" /static/big.bin 16 \
    "\"--static-path-route\", \"/static\", \"--static-path-mount\", \"$work/static\","
for kb in 64 256; do
    run ab-answers-wsgi-${kb}k "A/B $head against $base: WSGI ${kb} KiB answers, 16 keep-alive connections" \
        "/bytes?kb=$kb" 16 "" "$apps" answers:wsgi
    run ab-answers-asgi-${kb}k "A/B $head against $base: ASGI ${kb} KiB answers, 16 keep-alive connections" \
        "/bytes?kb=$kb" 16 '"--interface", "asgi", "--loop", "uvloop",' "$apps" answers:asgi
done
SCHEME=https run ab-https-hello "A/B $head against $base: WSGI hello over HTTPS, 64 keep-alive connections" / 64 \
    "\"--ssl-certfile\", \"$work/cert.pem\", \"--ssl-keyfile\", \"$work/key.pem\","
if wanted ab-ws-binary-64k; then
    cargo build -q --release --example ws_bench
    seconds=${DURATION:-5s}
    cat >"$work/spec.json" <<JSON
{
  "name": "ab-ws-binary-64k$sfx", "title": "A/B $head against $base: ASGI WebSocket echo of 64 KiB binary messages, 16 connections ($backend)",
  "path": "/", "client": "$PWD/target/release/examples/ws_bench",
  "connections": 16, "seconds": ${seconds%s}, "message_bytes": 65536, "message_kind": "binary",
  "rounds": ${ROUNDS:-5}, "baselines": ["base"],
  "arms": [
$(arms '"--interface", "asgi", "--loop", "uvloop",' "$(cd tests/apps && pwd)" asgi_ws_echo:app)
  ]
}
JSON
    "$venv/bin/python" bench/ws_echo.py "$work/spec.json"
fi
