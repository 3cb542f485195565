"""Behind a proxy: --proxy-headers (Forwarded, X-Forwarded-*) and
--proxy-protocol (v1, v2), believed only from --forwarded-allow-ips peers.

The tests connect from 127.0.0.1, the default trusted peer; an untrusted
peer is played by trusting some other address instead."""

from __future__ import annotations

import json
import re
import struct
import time

import pytest

from helpers import run_m0serve

APPS = {
    "wsgi": ("proxy_echo:wsgi",),
    "asgi": ("proxy_echo:asgi", "--interface=asgi"),
}
UNTRUSTED = "--forwarded-allow-ips=10.9.9.9,192.168.0.0/16"
FORWARDED_HEADERS = (
    "X-Forwarded-For: 6.6.6.6, 203.0.113.9\r\n"
    "X-Forwarded-Proto: https\r\n"
    "X-Forwarded-Host: example.com:8443\r\n"
)
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


@pytest.fixture(params=sorted(APPS))
def interface(request):
    return request.param


def start(serve, interface, *flags):
    app, *rest = APPS[interface]
    return serve(app, *rest, *flags)


def request(target: str = "/", headers: str = "") -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: inner:8000\r\n{headers}Connection: close\r\n\r\n".encode()


def facts(response: bytes) -> dict:
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), response
    return json.loads(body)


def listening(server):
    host, port = server.address
    return [host, port]


def v1(client: str = "203.0.113.7", port: int = 40123) -> bytes:
    family = "TCP6" if ":" in client else "TCP4"
    dst = "::1" if family == "TCP6" else "127.0.0.1"
    return f"PROXY {family} {client} {dst} {port} 8000\r\n".encode()


def v2(command: int = 1, client: bytes = bytes([198, 51, 100, 4]), port: int = 5555, tlvs: bytes = b"") -> bytes:
    addresses = client + bytes([127, 0, 0, 1]) + struct.pack("!HH", port, 8000)
    body = addresses + tlvs
    return V2_SIGNATURE + bytes([0x20 | command, 0x11]) + struct.pack("!H", len(body)) + body


# --- proxy headers ---------------------------------------------------------


def test_trusted_peer_x_forwarded_applied(serve, interface):
    server = start(serve, interface, "--proxy-headers")
    got = facts(server.exchange(request(headers=FORWARDED_HEADERS)))
    assert got["client"] == ["203.0.113.9", 0], "the right-most untrusted hop, not the spoofed 6.6.6.6"
    assert got["scheme"] == "https"
    assert got["server"] == ["example.com", 8443]
    if interface == "wsgi":
        assert got["host"] == "example.com:8443"
    else:
        assert got["host"] == "inner:8000", "ASGI headers stay as sent"


def test_trusted_peer_forwarded_wins_over_x_forwarded(serve, interface):
    server = start(serve, interface, "--proxy-headers")
    headers = FORWARDED_HEADERS + 'Forwarded: for="[2001:db8::1]:4711";proto=https;host=example.org\r\n'
    got = facts(server.exchange(request(headers=headers)))
    assert got["client"] == ["2001:db8::1", 4711]
    assert got["scheme"] == "https"
    assert got["server"] == ["example.org", 443], "no port forwarded: https's"
    # A malformed Forwarded changes nothing, and X-Forwarded-* is not consulted.
    headers = FORWARDED_HEADERS + "Forwarded: for=[2001:db8::1]\r\n"
    got = facts(server.exchange(request(headers=headers)))
    assert got["client"][0] == "127.0.0.1" and got["scheme"] == "http"
    assert got["server"] == listening(server)


def test_untrusted_peer_headers_change_nothing(serve, interface):
    server = start(serve, interface, "--proxy-headers", UNTRUSTED)
    for headers in (FORWARDED_HEADERS, "Forwarded: for=1.2.3.4;proto=https;host=evil\r\n"):
        got = facts(server.exchange(request(headers=headers)))
        assert got["client"][0] == "127.0.0.1" and got["client"][1] > 0
        assert got["scheme"] == "http"
        assert got["host"] == "inner:8000"
        assert got["server"] == listening(server)


def test_without_proxy_headers_nothing_changes(serve, interface):
    server = start(serve, interface)  # 127.0.0.1 trusted by default, but the flag is off
    got = facts(server.exchange(request(headers=FORWARDED_HEADERS)))
    assert got["client"][0] == "127.0.0.1" and got["scheme"] == "http"
    assert got["host"] == "inner:8000" and got["server"] == listening(server)


def test_uvicorn_env_names_the_trusted_peers(serve):
    server = serve(*APPS["wsgi"], "--proxy-headers", env={"FORWARDED_ALLOW_IPS": "10.9.9.9"})
    assert facts(server.exchange(request(headers=FORWARDED_HEADERS)))["client"][0] == "127.0.0.1"


@pytest.mark.parametrize(
    "args, env",
    [
        (["--forwarded-allow-ips=localhost"], None),
        (["--forwarded-allow-ips=10.0.0.1/8"], None),
        (["--forwarded-allow-ips=10.0.0.0/33,"], None),
        ([], {"M0SERVE_FORWARDED_ALLOW_IPS": "bogus"}),
        ([], {"FORWARDED_ALLOW_IPS": "1.2.3.4,nope"}),
    ],
)
def test_bad_trusted_lists_are_one_line_errors(args, env):
    done = run_m0serve(*args, "--proxy-headers", "proxy_echo:wsgi", env=env)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(r"forwarded[-_]allow[-_]ips", lines[0], re.I), done.stderr


# --- the PROXY protocol ----------------------------------------------------


def test_proxy_protocol_v1_and_v2_name_the_client(serve, interface):
    server = start(serve, interface, "--proxy-protocol")
    assert facts(server.exchange(v1() + request()))["client"] == ["203.0.113.7", 40123]
    assert facts(server.exchange(v1("2001:db8::7", 9) + request()))["client"] == ["2001:db8::7", 9]
    tlvs = b"\x01\x00\x02h2" + b"\x04\x00\x00"  # ALPN, NOOP: skipped
    assert facts(server.exchange(v2(tlvs=tlvs) + request()))["client"] == ["198.51.100.4", 5555]
    # LOCAL (the proxy's own health check): the peer's address stands.
    got = facts(server.exchange(v2(command=0) + request()))
    assert got["client"][0] == "127.0.0.1" and got["client"][1] > 0
    # Keep-alive: the preamble's client holds for every request on the connection.
    sock = server.connect()
    try:
        keep = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"
        sock.sendall(v1("192.0.2.1", 1) + keep + keep)
        data = b""
        while data.count(b'"192.0.2.1", 1') < 2:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    finally:
        sock.close()


def test_proxy_protocol_native_routes_keep_working(serve):
    server = serve(*APPS["wsgi"], "--proxy-protocol")
    response = server.exchange(v2() + request("/healthz"))
    assert response.startswith(b"HTTP/1.1 200 "), response


@pytest.mark.parametrize(
    "data",
    [
        request(),  # no preamble at all
        b"PROXY TCP4 203.0.113.7 127.0.0.1 99999 8000\r\n" + request(),
        b"PROXY TCP4 203.0.113.7  127.0.0.1 1 8000\r\n" + request(),
        b"PROXY " + b"A" * 120 + b"\r\n" + request(),
        V2_SIGNATURE + b"\x21\x12\x00\x0c" + bytes(12) + request(),  # datagram
        V2_SIGNATURE + b"\x21\x11\x00\x0f" + bytes(12) + b"\x01\x00\x09" + request(),  # TLV overrun
        V2_SIGNATURE + b"\x31\x11\x00\x0c" + bytes(12) + request(),  # version 3
    ],
    ids=["missing", "v1-port", "v1-spaces", "v1-long", "v2-dgram", "v2-tlv", "v2-version"],
)
def test_missing_or_malformed_preamble_closes_without_an_answer(serve, data):
    server = serve(*APPS["wsgi"], "--proxy-protocol")
    assert server.exchange(data) == b""
    # A bystander on the same server is served.
    assert facts(server.exchange(v1() + request()))["client"][0] == "203.0.113.7"


def test_incomplete_preamble_is_held_to_the_header_timeout(serve):
    server = serve(*APPS["wsgi"], "--proxy-protocol", "--header-read-timeout=0.5")
    for first in (b"PROXY TCP4 203.0.", V2_SIGNATURE[:7], b""):
        sock = server.connect()
        try:
            started = time.monotonic()
            sock.sendall(first)
            assert sock.recv(100) == b"", "closed without an answer"
            assert time.monotonic() - started < 4.0, first
        finally:
            sock.close()
    # A preamble in time, then a head that dawdles: the same clock, from the start.
    sock = server.connect()
    try:
        started = time.monotonic()
        sock.sendall(v1() + b"GET / HTTP/1.1\r\n")
        assert sock.recv(100) == b""
        assert time.monotonic() - started < 4.0
    finally:
        sock.close()


def test_untrusted_peer_preamble_is_not_believed(serve, interface):
    server = start(serve, interface, "--proxy-protocol", UNTRUSTED)
    # An untrusted peer speaks plain HTTP: served, its own address.
    got = facts(server.exchange(request()))
    assert got["client"][0] == "127.0.0.1"
    # Its preamble is then not HTTP: a 400, and the address it names is never used.
    response = server.exchange(v1() + request())
    assert response.startswith(b"HTTP/1.1 400 "), response
    assert b"203.0.113.7" not in response
    response = server.exchange(v2() + request())
    assert response.startswith(b"HTTP/1.1 400 "), response


def test_preamble_client_decides_whether_headers_are_believed(serve):
    # The balancer (127.0.0.1) is trusted for the preamble; the headers are
    # believed only when the preamble's client is itself a trusted proxy.
    server = serve(*APPS["wsgi"], "--proxy-protocol", "--proxy-headers",
                   "--forwarded-allow-ips=127.0.0.1,10.1.1.1")
    got = facts(server.exchange(v1("203.0.113.7") + request(headers=FORWARDED_HEADERS)))
    assert got["client"] == ["203.0.113.7", 40123] and got["scheme"] == "http", "a client's own headers"
    got = facts(server.exchange(v1("10.1.1.1") + request(headers=FORWARDED_HEADERS)))
    assert got["client"] == ["203.0.113.9", 0] and got["scheme"] == "https"


def test_without_proxy_protocol_a_preamble_is_a_bad_request(serve):
    server = serve(*APPS["wsgi"])
    response = server.exchange(v1() + request())
    assert response.startswith(b"HTTP/1.1 400 "), response
    assert facts(server.exchange(request()))["client"][0] == "127.0.0.1"


def test_access_log_names_the_forwarded_client(serve):
    server = serve(*APPS["wsgi"], "--proxy-headers", "--proxy-protocol", "--access-log")
    server.exchange(v1("10.1.1.1") + request("/via-preamble"))
    assert " 10.1.1.1 - - [" in server.wait_for(r'"GET /via-preamble HTTP/1.1"').string
    # The preamble's client (10.1.1.1) is not trusted for headers here: only 127.0.0.1 is.
    server.exchange(v2(command=0) + request("/via-headers", FORWARDED_HEADERS))
    assert " 203.0.113.9 - - [" in server.wait_for(r'"GET /via-headers HTTP/1.1"').string


def test_websocket_scope_takes_the_forwarded_scheme(serve):
    connect = pytest.importorskip("websockets.sync.client").connect
    server = serve("asgi_ws_raw:app", "--interface=asgi", "--proxy-headers")
    host, port = server.address
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
    with connect(f"ws://{host}:{port}/scope", additional_headers=headers, open_timeout=10) as ws:
        scope = json.loads(ws.recv(timeout=10))
    assert scope["scheme"] == "wss", "https through a proxy: a secure WebSocket"
    assert scope["client"] == ["203.0.113.9", 0]
