"""The lingering close (``src/backend/linger.rs``): a connection the server
ends while its client is still sending is half-closed and its input drained,
so the client reads the answer instead of a reset. Real clients, both
backends; each test's negative arm turns it off (``M0_LINGER_MS=0``) and the
same client loses the answer.

- An upload over ``--max-body-size``: http.client sends the whole body before
  it reads, so without the linger its write fails (a broken pipe or a reset)
  and the 413 is never read.
- A WebSocket message over ``--ws-max-message-size``, sent in fragments by
  the ``websockets`` client: without the linger its next write fails and it
  reports no Close received, rather than our 1009.
"""

from __future__ import annotations

import asyncio
import http.client

import pytest

from helpers import start_server, stop_cleanly

TRIES = 5


def judge(linger, attempt, answer):
    """`TRIES` attempts, each ending with a value or an error's name: every
    one reads `answer` with the linger on, none does with it off."""
    seen = []
    for _ in range(TRIES):
        try:
            seen.append(attempt())
        except OSError as e:
            seen.append(type(e).__name__)
    if linger == "on":
        assert seen == [answer] * TRIES, seen
    else:
        assert answer not in seen, f"the negative arm read its {answer} anyway: {seen}"


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
        async with connect(f"ws://{host}:{port}/ws/echo", open_timeout=10) as ws:
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
