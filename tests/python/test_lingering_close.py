"""The lingering close (``src/backend/linger.rs``): a connection the server
ends while its client is still sending is half-closed and its input drained,
so the client reads the answer instead of a reset. Real clients, both
backends; each test's negative arm turns it off (``M0_LINGER_MS=0``) and the
same client loses the answer.

- An upload over ``--max-body-size``: http.client sends the whole body before
  it reads, so without the linger its write fails (a broken pipe or a reset)
  and the 413 is never read.
- Requests pipelined behind a ``Connection: close`` one, sent in one burst:
  the first answer is read before the end (positive arm only: on io_uring
  the burst was all read before the close often enough that the arm with
  the linger off passed too).
- A WebSocket message over ``--ws-max-message-size``, sent in fragments by
  the ``websockets`` client: without the linger its next write fails and it
  reports no Close received, rather than our 1009.
"""

from __future__ import annotations

import asyncio
import http.client
import socket

import pytest

from helpers import start_server, stop_cleanly

TRIES = 5


def judge(linger, attempt, answer):
    """`TRIES` attempts, each ending with a value or an error's name: every
    one reads `answer` with the linger on; with it off, not every one does
    (a client may still read an answer that came before the reset, so the
    off arm is judged loosely; the backends' conformance tests hold the
    strict one)."""
    seen = []
    for _ in range(TRIES):
        try:
            seen.append(attempt())
        except OSError as e:
            seen.append(type(e).__name__)
    if linger == "on":
        assert seen == [answer] * TRIES, seen
    else:
        assert seen != [answer] * TRIES, f"the negative arm read every {answer}: {seen}"


@pytest.mark.parametrize("linger", ["on", "off"])
def test_an_upload_over_the_limit_reads_its_413(backend, linger):
    env = None if linger == "on" else {"M0_LINGER_MS": "0"}
    server = start_server(backend, "plain:hello", "--max-body-size=64K", env=env)
    host, port = server.address

    def upload():
        conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            # Far more than both sockets' buffers: the client is still
            # writing when the server has answered and is done.
            conn.request("POST", "/upload", body=b"x" * (16 << 20))
            return conn.getresponse().status
        finally:
            conn.close()

    try:
        judge(linger, upload, 413)
    finally:
        stop_cleanly(server)


def test_requests_pipelined_behind_a_closing_one_do_not_reset_its_answer(backend):
    server = start_server(backend, "plain:hello")
    host, port = server.address
    burst = (b"GET /first HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
             + b"GET /more HTTP/1.1\r\nHost: x\r\n\r\n" * 20000)

    def pipelined():
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(burst)
            got = b""
            while chunk := s.recv(65536):
                got += chunk
            return got.split(b"\r\n", 1)[0].decode()

    try:
        judge("on", pipelined, "HTTP/1.1 200 OK")
    finally:
        stop_cleanly(server)


@pytest.mark.parametrize("linger", ["on", "off"])
def test_a_websocket_message_over_the_limit_reads_its_1009(backend, linger):
    pytest.importorskip("websockets")
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    env = None if linger == "on" else {"M0_LINGER_MS": "0"}
    server = start_server(backend, "asgi_ws_raw:app", "--interface=asgi",
                          "--ws-max-message-size=2K", env=env)
    host, port = server.address

    async def too_big():
        # Uncompressed: the stream must outlast the sockets' buffers.
        async with connect(f"ws://{host}:{port}/ws/echo", open_timeout=10,
                           compression=None) as ws:
            try:
                # 16 MiB in 4 KiB fragments, against a 2 KiB limit: the
                # client is still sending when the server has failed it.
                await ws.send([b"A" * 4096] * 4096)
                await asyncio.wait_for(ws.recv(), 10)
            except ConnectionClosed as e:
                return e.rcvd.code if e.rcvd else None
            return "no close"

    try:
        judge(linger, lambda: asyncio.run(too_big()), 1009)
    finally:
        stop_cleanly(server)
