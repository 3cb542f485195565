"""WebSockets through ASGI (issue 5, points 4 and 6): a raw ASGI app, a
Starlette route and a FastAPI one, on each backend, driven by the
``websockets`` client library."""

from __future__ import annotations

import json
import os
import socket
import struct
import time

import pytest

from helpers import silent_websocket, start_server, stop_cleanly

websockets = pytest.importorskip("websockets")
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

APPS = ["asgi_ws_raw:app", "starlette_app:app", "fastapi_app:app"]
MIB = 1 << 20


@pytest.fixture(scope="module", params=APPS)
def server(request, backend):
    """One server per app and backend, shared by the module's tests."""
    if request.param != "asgi_ws_raw:app":
        pytest.importorskip(request.param.split("_")[0])
    server = start_server(backend, request.param, "--interface=asgi")
    yield server
    stop_cleanly(server)


@pytest.fixture
def raw_server(backend):
    server = start_server(backend, "asgi_ws_raw:app", "--interface=asgi", "--root-path=/api")
    yield server
    stop_cleanly(server)


def ws_url(server, path):
    host, port = server.address
    return f"ws://{host}:{port}{path}"


def recorded(path, timeout=5.0):
    """What the app wrote to `path`, waiting for it."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "the app never recorded its disconnect"
        time.sleep(0.02)
    with open(path) as f:
        return json.load(f)


def test_the_websocket_scope(raw_server):
    with connect(ws_url(raw_server, "/api/scope/caf%C3%A9?a=1"), subprotocols=["one", "two"],
                 open_timeout=10) as ws:
        scope = json.loads(ws.recv(timeout=10))
        assert ws.subprotocol is None, "none chosen: none confirmed"
    host, port = raw_server.address
    assert scope["type"] == "websocket"
    assert scope["asgi"] == {"version": "3.0", "spec_version": "2.4"}
    assert scope["http_version"] == "1.1" and scope["scheme"] == "ws"
    assert "method" not in scope
    assert scope["path"] == "/api/scope/café" and scope["raw_path"] == "/api/scope/caf%C3%A9"
    assert scope["query_string"] == "a=1" and scope["root_path"] == "/api"
    assert scope["subprotocols"] == ["one", "two"]
    assert ["upgrade", "websocket"] in scope["headers"]
    assert scope["client"][0] == "127.0.0.1" and scope["server"] == [host, port]
    assert scope["extensions"] == {"websocket.http.response": {}}
    assert scope["state"] == {}


def test_text_and_binary_echo_in_order(server):
    with connect(ws_url(server, "/ws/echo"), open_timeout=10) as ws:
        assert ws.response.headers["x-echo"] == "yes", "websocket.accept's headers"
        sent = [f"text {i}" if i % 2 else b"binary %d" % i for i in range(60)]
        for message in sent:
            ws.send(message)
        got = [ws.recv(timeout=10) for _ in sent]
    assert got == sent, "same messages, same types, same order"


def test_a_1mb_message_each_way(server):
    blob = os.urandom(MIB)
    text = "é" * (MIB // 2)
    with connect(ws_url(server, "/ws/echo"), max_size=None, open_timeout=10) as ws:
        ws.send(blob)
        assert ws.recv(timeout=20) == blob
        ws.send(text)
        assert ws.recv(timeout=20) == text


def test_subprotocol_negotiation(server):
    with connect(ws_url(server, "/ws/echo"), subprotocols=["chat.v1", "chat.v2"], open_timeout=10) as ws:
        assert ws.subprotocol == "chat.v2"
    with connect(ws_url(server, "/ws/echo"), subprotocols=["chat.v1"], open_timeout=10) as ws:
        assert ws.subprotocol is None


def test_a_subprotocol_in_the_accept_headers_is_held_to_the_offer(backend, tmp_path):
    """The spec wants the choice in ``subprotocol``; an app that puts it in its
    headers instead gets the same check: one the client offered is confirmed
    once, one it did not (which the client would fail on) or several are
    refused to the app, and the handshake fails with a 500."""
    server = start_server(backend, "asgi_ws_raw:app", "--interface=asgi")
    url = ws_url(server, "/ws/protocol-field")
    try:
        check_protocol_field(url, tmp_path)
    finally:
        stop_cleanly(server)


def check_protocol_field(url, tmp_path):
    with connect(f"{url}?choose=two", subprotocols=["one", "two"], open_timeout=10) as ws:
        assert ws.subprotocol == "two"
        assert ws.response.headers.get_all("sec-websocket-protocol") == ["two"]
    # An empty field names none.
    with connect(f"{url}?choose=", subprotocols=["one", "two"], open_timeout=10) as ws:
        assert ws.subprotocol is None
        assert "sec-websocket-protocol" not in ws.response.headers
    for i, (choose, offered, refusal) in enumerate([("three", ["one", "two"], "not offered"),
                                     ("one&choose=two", ["one", "two"], "several"),
                                     ("one%2C%20two", ["one", "two"], "several"),
                                     ("one", None, "not offered")]):
        record = str(tmp_path / f"raised-{i}")
        with pytest.raises(InvalidStatus) as refused:
            connect(f"{url}?choose={choose}&record={record}", subprotocols=offered, open_timeout=10)
        assert refused.value.response.status_code == 500
        assert refusal in recorded(record)


def test_a_close_from_the_client(server, tmp_path):
    record = str(tmp_path / "seen")
    with connect(ws_url(server, f"/ws/echo?record={record}"), open_timeout=10) as ws:
        ws.send("hello")
        assert ws.recv(timeout=10) == "hello"
        ws.close(4001, "client says bye")
        assert ws.close_code == 4001, "the server answered the Close with its code"
    assert recorded(record) == {"code": 4001, "reason": "client says bye"}


def test_a_close_from_the_app(server, tmp_path):
    record = str(tmp_path / "seen")
    with connect(ws_url(server, f"/ws/echo?record={record}"), open_timeout=10) as ws:
        ws.send("close:4002:server says bye")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4002, "server says bye")
    # The client answered with the same code: the app's receive() saw it.
    assert recorded(record)["code"] == 4002


def test_close_before_accept_is_a_403(server):
    with pytest.raises(InvalidStatus) as denied:
        connect(ws_url(server, "/ws/reject"), open_timeout=10)
    assert denied.value.response.status_code == 403


def test_a_denial_response(server):
    with pytest.raises(InvalidStatus) as denied:
        connect(ws_url(server, "/ws/deny"), open_timeout=10)
    assert denied.value.response.status_code == 401
    assert denied.value.response.body == b"denied"


def test_a_client_that_vanishes(server, tmp_path):
    record = str(tmp_path / "seen")
    with connect(ws_url(server, f"/ws/echo?record={record}"), open_timeout=10) as ws:
        ws.send("hello")
        assert ws.recv(timeout=10) == "hello"
        # A reset, no Close: the app must still hear of it.
        ws.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        ws.socket.shutdown(socket.SHUT_RDWR)
        assert recorded(record)["code"] == 1006


def test_a_slow_client_makes_send_wait(raw_server, tmp_path):
    record = str(tmp_path / "sent")
    mib = 64
    sock = socket.create_connection(raw_server.address, timeout=20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    # max_queue=1: the client stops reading with one message waiting. No
    # compression: the flood is all one byte, 1 MiB of which is 1 KiB on the
    # wire compressed, which a slow reader takes (test_ws_deflate.py).
    with connect(ws_url(raw_server, f"/ws/flood?mib={mib}&record={record}"), sock=sock,
                 max_size=None, max_queue=1, open_timeout=10, compression=None) as ws:
        time.sleep(1.0)
        sent = recorded(record)
        assert sent < 16, f"send() did not wait for the client: {sent} MiB accepted"
        got = [ws.recv(timeout=20) for _ in range(mib)]
        assert all(len(m) == MIB for m in got)
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)
    assert recorded(record) == mib


def test_no_ws_hands_the_upgrade_over_as_http(backend):
    server = start_server(backend, "asgi_ws_raw:app", "--interface=asgi", "--no-ws")
    try:
        with pytest.raises(InvalidStatus) as refused:
            connect(ws_url(server, "/ws/echo"), open_timeout=10)
        assert refused.value.response.status_code == 426
        assert refused.value.response.body == b"http scope"
    finally:
        stop_cleanly(server)


def read_to_end(sock, timeout):
    got = b""
    sock.settimeout(timeout)
    try:
        while chunk := sock.recv(4096):
            got += chunk
    except ConnectionResetError:
        pass
    return got


@pytest.mark.parametrize("keepalive", ["on", "off"])
def test_a_silent_client_is_pinged_then_dropped(backend, tmp_path, keepalive):
    interval = "0.3" if keepalive == "on" else "0"
    server = start_server(backend, "asgi_ws_raw:app", "--interface=asgi",
                          f"--ws-ping-interval={interval}", "--ws-ping-timeout=0.3")
    try:
        record = str(tmp_path / "seen")
        sock = silent_websocket(server.address, f"/ws/echo?record={record}")
        with sock:
            if keepalive == "off":
                # The negative arm: nothing ends a quiet connection.
                time.sleep(2.0)
                assert not os.path.exists(record), "the app heard of a disconnect"
                sock.setblocking(False)
                with pytest.raises(BlockingIOError):
                    sock.recv(1)
                return
            # A Ping with no payload, then a Close 1011 and the end: the app is told 1006.
            assert recorded(record, timeout=5.0) == {"code": 1006, "reason": ""}
            reason = b"keepalive ping timeout"
            close = bytes([0x88, 2 + len(reason)]) + (1011).to_bytes(2, "big") + reason
            assert read_to_end(sock, timeout=5.0) == b"\x89\x00" + close
    finally:
        stop_cleanly(server)


def test_a_client_that_answers_pings_stays_connected(backend, tmp_path):
    # A second to answer each Ping, for a loaded machine; the quiet spell
    # below outlasts interval + timeout, so ignored Pings would end it.
    server = start_server(backend, "asgi_ws_raw:app", "--interface=asgi",
                          "--ws-ping-interval=0.3", "--ws-ping-timeout=1")
    try:
        record = str(tmp_path / "seen")
        # The websockets client answers pings from its own thread (its own pings are off).
        with connect(ws_url(server, f"/ws/echo?record={record}"), open_timeout=10,
                     ping_interval=None) as ws:
            time.sleep(2.5)  # quiet: pinged, answered each time
            ws.send("still here")
            assert ws.recv(timeout=5) == "still here"
            assert not os.path.exists(record), "dropped while answering"
        assert recorded(record)["code"] == 1000
    finally:
        stop_cleanly(server)
