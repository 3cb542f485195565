"""The drain tells streams to end, when the operator says (issue 33, point
2): `--stream-drain-timeout` into the drain, an ASGI answer still streaming
hears `http.disconnect` from its `receive()` (what it sends still goes
out) and a WebSocket gets its Close (1001), so an app that listens ends its
stream cleanly rather than being cut at the graceful timeout. By default
(the graceful timeout less a second) finite streams and requests in flight
finish whole; `0` tells them as the drain begins."""

from __future__ import annotations

import http.client
import signal
import socket
import struct
import threading
import time

from helpers import start_server, stop_cleanly, websocket_handshake


class Stream:
    """GET `path` on a thread, reading the chunked answer to its end (or
    its failure): the body, how it ended, and when."""

    def __init__(self, server, path: str) -> None:
        self.body = b""
        self.error = None
        self.ended_at = None
        self.started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(server.address, path), daemon=True)
        self._thread.start()
        assert self.started.wait(10), "the stream never started"

    def _run(self, address, path) -> None:
        conn = http.client.HTTPConnection(*address, timeout=20)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            assert response.status == 200
            self.body += response.read1(65536)
            self.started.set()
            self.body += response.read()  # IncompleteRead if cut
        except Exception as e:  # noqa: BLE001 - recorded for the test
            self.error = e
        finally:
            self.started.set()
            self.ended_at = time.monotonic()
            conn.close()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the stream did not end"


def test_with_no_stream_drain_timeout_an_endless_stream_ends_cleanly_as_the_drain_begins(backend: str):
    server = start_server(backend, "streams:app", "--stream-drain-timeout=0", graceful="30")
    stream = Stream(server, "/sse")
    time.sleep(0.2)
    signalled = time.monotonic()
    stop_cleanly(server)
    exited = time.monotonic() - signalled
    stream.join(5)
    assert stream.error is None, f"the stream was cut: {stream.error!r}"
    assert stream.body.endswith(b"event: end\ndata: told\n\n"), stream.body[-80:]
    assert exited < 3.0, f"exit took {exited:.1f}s after SIGTERM (the graceful timeout: 30 s)"


def test_by_default_a_finite_stream_and_a_request_in_flight_finish_whole(backend: str):
    """The default tells streams a second before the graceful timeout: a
    5-second stream and a 2-second answer begun before SIGTERM complete."""
    server = start_server(backend, "streams:app", graceful="30")
    stream = Stream(server, "/finite")
    slow = {}

    def ask_slow():
        conn = http.client.HTTPConnection(*server.address, timeout=20)
        conn.request("GET", "/slow")
        response = conn.getresponse()
        slow["answer"] = (response.status, response.read())
        conn.close()

    asking = threading.Thread(target=ask_slow, daemon=True)
    asking.start()
    time.sleep(0.3)
    stop_cleanly(server)
    stream.join(5)
    asking.join(5)
    assert stream.error is None, f"the stream was cut: {stream.error!r}"
    assert stream.body.endswith(b"event: end\ndata: done\n\n"), stream.body[-80:]
    assert slow.get("answer") == (200, b"ok"), slow


def _frame(sock: socket.socket):
    """One unmasked server frame: (opcode, payload)."""
    head = _exactly(sock, 2)
    size = head[1] & 0x7F
    if size == 126:
        size = struct.unpack("!H", _exactly(sock, 2))[0]
    return head[0] & 0x0F, _exactly(sock, size)


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        more = sock.recv(n - len(data))
        assert more, "the connection closed mid-frame"
        data += more
    return data


def _send_text(sock: socket.socket, text: str, opcode: int = 0x1) -> None:
    payload = text.encode()
    mask = b"\x01\x02\x03\x04"
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    sock.sendall(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)


def test_a_websocket_is_told_to_go_away_at_the_stream_drain_timeout_and_not_before(backend: str):
    server = start_server(backend, "streams:app", "--stream-drain-timeout=1.5", graceful="10")
    sock, head = websocket_handshake(server.address, "/ws")
    assert head.startswith("HTTP/1.1 101"), head
    sock.settimeout(10)
    server.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    time.sleep(0.5)
    _send_text(sock, "still here")
    assert _frame(sock) == (0x1, b"still here"), "the WebSocket was told before its time"
    opcode, payload = _frame(sock)
    told = time.monotonic() - signalled
    assert opcode == 0x8 and struct.unpack("!H", payload[:2])[0] == 1001, (opcode, payload)
    assert 1.2 < told < 4.0, f"told {told:.1f}s into the drain"
    _send_text(sock, "", opcode=0x8)
    sock.close()
    stop_cleanly(server)


def test_a_stream_drain_timeout_past_the_graceful_timeout_is_refused(backend: str):
    from helpers import run_m0serve

    result = run_m0serve("--graceful-timeout=5", "--stream-drain-timeout=6", "--app-dir=.", "x:app")
    assert result.returncode == 2, result
    assert "--stream-drain-timeout" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
