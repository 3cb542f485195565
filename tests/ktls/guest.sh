#!/usr/bin/env bash
# Kernel TLS end to end, run as root inside a guest whose kernel has the tls
# module (tests/ktls.sh boots one): m0serve with --ssl-ktls auto on each
# backend, then off, against curl and openssl s_client.
#
# Each server's arm proves, on its own connections: a static file (sendfile
# through the kernel's TLS) and a small answer over one keep-alive connection
# (curl), the same over HTTP/2, an upload that follows the handshake at once,
# the server's close_notify after `Connection: close` (OpenSSL 3 reports an
# unexpected EOF without it), the client's close_notify read as the end of
# input, and a TLS 1.3 KeyUpdate ending the connection after its answer.
# /proc/net/tls_stat must count the kernel's connections under auto, and
# none under off (the negative arm).
#
# Usage: guest.sh M0SERVE   (the m0serve of a virtualenv with this checkout installed)
set -euo pipefail
m0serve=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
port=8443
fails=0
passes=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; passes=$((passes + 1)); }

modprobe tls
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
mkdir "$work/static"
head -c 3000000 /dev/urandom > "$work/static/big.bin"

# The kernel's count of TLS sockets set up in software (TX and RX).
stat() { awk -v k="$1" '$1 == k { print $2 }' /proc/net/tls_stat; }

serve() {  # serve BACKEND KTLS: start m0serve, wait for its first answer
    RUST_LOG=m0serve=debug "$m0serve" --backend "$1" --ssl-ktls "$2" \
        --host 127.0.0.1 --port $port --workers 1 \
        --ssl-certfile "$work/cert.pem" --ssl-keyfile "$work/key.pem" \
        --static-path-mount "$work/static" --app-dir "$here" app:app \
        > "$work/server.log" 2>&1 &
    server=$!
    for _ in $(seq 1 300); do
        if curl -sk -o /dev/null "https://127.0.0.1:$port/hello"; then return 0; fi
        kill -0 $server 2>/dev/null || break
        sleep 0.1
    done
    cat "$work/server.log"
    fail "m0serve --backend $1 --ssl-ktls $2 did not answer"
    return 1
}

stop() {
    kill -TERM $server 2>/dev/null || true
    wait $server 2>/dev/null || true
}

arm() {  # arm BACKEND KTLS
    local backend=$1 ktls=$2 what="$1, --ssl-ktls $2"
    serve "$backend" "$ktls" || return 0
    local tx0 rx0
    tx0=$(stat TlsTxSw) rx0=$(stat TlsRxSw)

    # One keep-alive connection: the file, then a small answer.
    out=$(curl -sS --http1.1 --cacert "$work/cert.pem" -w '%{http_code} %{num_connects}\n' \
        -o "$work/got.bin" "https://localhost:$port/static/big.bin" \
        -o "$work/hello.txt" "https://localhost:$port/hello")
    if [ "$(echo "$out" | tr '\n' ' ')" = "200 1 200 0 " ] && cmp -s "$work/got.bin" "$work/static/big.bin" \
        && [ "$(cat "$work/hello.txt")" = "hello" ]; then
        ok "$what: a 3 MB file and an answer over one connection"
    else
        fail "$what: curl said '$out'"
    fi

    # HTTP/2 (ALPN h2): the file and an answer on one connection, its
    # frames written through the kernel's TLS.
    out=$(curl -sS --http2 --cacert "$work/cert.pem" -w '%{http_code} %{http_version} %{num_connects}\n' \
        -o "$work/got.bin" "https://localhost:$port/static/big.bin" \
        -o "$work/hello.txt" "https://localhost:$port/hello")
    if [ "$(echo "$out" | tr '\n' ' ')" = "200 2 1 200 2 0 " ] && cmp -s "$work/got.bin" "$work/static/big.bin" \
        && [ "$(cat "$work/hello.txt")" = "hello" ]; then
        ok "$what: HTTP/2, a 3 MB file and an answer over one connection"
    else
        fail "$what: HTTP/2: curl said '$out'"
    fi

    # Each cipher the kernel takes, and TLS 1.2's records.
    for opts in "--tls13-ciphers TLS_AES_128_GCM_SHA256" "--tls13-ciphers TLS_CHACHA20_POLY1305_SHA256" \
        "--tls-max 1.2 --ciphers ECDHE-ECDSA-AES128-GCM-SHA256" "--tls-max 1.2 --ciphers ECDHE-ECDSA-CHACHA20-POLY1305"; do
        rm -f "$work/got.bin"
        # shellcheck disable=SC2086
        out=$(curl -sS --http1.1 --cacert "$work/cert.pem" $opts -w '%{http_code}' -o "$work/got.bin" \
            "https://localhost:$port/static/big.bin" 2>&1)
        if [ "$out" = 200 ] && cmp -s "$work/got.bin" "$work/static/big.bin"; then
            ok "$what: the file whole with $opts"
        else
            fail "$what: with $opts curl said '$out'"
        fi
    done

    # An upload sent as the handshake ends: read whole.
    out=$(curl -sS --http1.1 --cacert "$work/cert.pem" --data-binary @"$work/static/big.bin" \
        "https://localhost:$port/upload")
    if [ "$out" = 3000000 ]; then
        ok "$what: a 3 MB upload read whole"
    else
        fail "$what: the upload's answer was '$out'"
    fi

    # Connection: close: the answer, then the server's close_notify.
    got=$(printf 'GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' \
        | timeout 20 openssl s_client -quiet -ign_eof -connect 127.0.0.1:$port \
            -servername localhost -CAfile "$work/cert.pem" 2>&1 || true)
    if echo "$got" | grep -q '^hello' && ! echo "$got" | grep -qi 'unexpected eof'; then
        ok "$what: Connection: close ends with close_notify"
    else
        fail "$what: s_client said: $got"
    fi

    # A KeyUpdate after a request: its answer comes, then the end.
    got=$( { printf 'GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n'; sleep 2; echo k; sleep 3; } \
        | timeout 20 openssl s_client -tls1_3 -connect 127.0.0.1:$port \
            -servername localhost -CAfile "$work/cert.pem" 2>&1 || true)
    if echo "$got" | grep -q '^hello'; then
        ok "$what: the answer before a KeyUpdate"
    else
        fail "$what: no answer before the KeyUpdate: $got"
    fi

    local tx=$(( $(stat TlsTxSw) - tx0 )) rx=$(( $(stat TlsRxSw) - rx0 ))
    if [ "$ktls" = auto ]; then
        grep -q 'kernel TLS on for' "$work/server.log" || fail "$what: no 'kernel TLS on' line"
        if [ "$tx" -ge 8 ] && [ "$rx" -ge 8 ]; then
            ok "$what: the kernel set up $tx TX and $rx RX connections"
        else
            fail "$what: the kernel set up $tx TX and $rx RX connections, not 8"
        fi
        grep -q "the peer's close_notify" "$work/server.log" \
            && ok "$what: the client's close_notify read as the end of input" \
            || fail "$what: the client's close_notify was never read"
        grep -q 'post-handshake message' "$work/server.log" \
            && ok "$what: the KeyUpdate ended the connection" \
            || fail "$what: the KeyUpdate was never seen"
    else
        grep -q 'kernel TLS off (--ssl-ktls off)' "$work/server.log" || fail "$what: no 'kernel TLS off' line"
        if [ "$tx" -eq 0 ] && [ "$rx" -eq 0 ]; then
            ok "$what: the kernel set up no connection"
        else
            fail "$what: the kernel set up $tx TX and $rx RX connections"
        fi
    fi
    stop
}

for backend in uring portable; do
    arm "$backend" auto
done
arm uring off
echo "ktls guest: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
