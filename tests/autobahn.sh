#!/usr/bin/env bash
# The Autobahn|Testsuite fuzzing client (../shared/tools/autobahn: sections
# 1-7 and 10) against a WebSocket echo server on one backend:
# - with M0SERVE (the console script of a venv where m0serve is installed):
#   `m0serve --interface asgi` serving tests/apps/asgi_ws_echo.py, the whole
#   path an ASGI app's messages take;
# - without: examples/ws_echo.rs (the server with the pure-Rust echo app;
#   built here, with the `testing` feature), the server's WebSocket layer alone, for
#   where no Python is at hand.
# Usage: bash tests/autobahn.sh portable|uring [M0SERVE]
# Installs the fuzzer into target/autobahn (once); AUTOBAHN_TOOLS overrides
# where the tool lives. Exit 0 only when every case passed.
set -uo pipefail
cd "$(dirname "$0")/.."
backend=${1:?usage: autobahn.sh portable|uring [M0SERVE]}
m0serve=${2:-}
tools=${AUTOBAHN_TOOLS:-$(cd .. && pwd)/shared/tools/autobahn}
[ -d "$tools" ] || tools=/work/shared/tools/autobahn
bash "$tools/install.sh" target/autobahn >/dev/null || { echo "autobahn: install failed" >&2; exit 2; }

log=$(mktemp)
if [ -n "$m0serve" ]; then
    what="ASGI echo (tests/apps/asgi_ws_echo.py)"
    "$m0serve" --interface asgi --app-dir tests/apps --port 0 --cores 1 --backend "$backend" \
        asgi_ws_echo:app >"$log" 2>&1 &
else
    what="Rust echo (examples/ws_echo.rs)"
    cargo build -q --example ws_echo --features testing || exit 2
    target/debug/examples/ws_echo 0 "$backend" >"$log" 2>&1 &
fi
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
addr=""
for _ in $(seq 200); do
    addr=$(grep -o 'listening on http://[0-9.:]*' "$log" | head -1 | cut -d/ -f3)
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 2; }
    sleep 0.1
done
[ -n "$addr" ] || { echo "autobahn: the echo server never listened" >&2; cat "$log" >&2; exit 2; }
echo "autobahn ($backend, $what): ws://$addr"
timeout 600 bash "$tools/run.sh" target/autobahn "ws://$addr"
