#!/usr/bin/env bash
# The Autobahn|Testsuite fuzzing client (../shared/tools/autobahn: sections
# 1-7 and 10) against the WebSocket echo example (examples/ws_echo.rs: the
# server with the pure-Rust echo app) on one backend.
# Usage: bash tests/autobahn.sh portable|uring   (after `cargo build --examples`)
# Installs the fuzzer into target/autobahn (once); AUTOBAHN_TOOLS overrides
# where the tool lives. Exit 0 only when every case passed.
set -uo pipefail
cd "$(dirname "$0")/.."
backend=${1:?usage: autobahn.sh portable|uring}
tools=${AUTOBAHN_TOOLS:-$(cd .. && pwd)/shared/tools/autobahn}
[ -d "$tools" ] || tools=/work/shared/tools/autobahn
bash "$tools/install.sh" target/autobahn >/dev/null || { echo "autobahn: install failed" >&2; exit 2; }

log=$(mktemp)
target/debug/examples/ws_echo 0 "$backend" >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
addr=""
for _ in $(seq 100); do
    addr=$(grep -o 'listening on http://[0-9.:]*' "$log" | head -1 | cut -d/ -f3)
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 2; }
    sleep 0.1
done
[ -n "$addr" ] || { echo "autobahn: the echo server never listened" >&2; cat "$log" >&2; exit 2; }
echo "autobahn ($backend): ws://$addr"
timeout 600 bash "$tools/run.sh" target/autobahn "ws://$addr"
