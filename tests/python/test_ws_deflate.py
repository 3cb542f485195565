"""permessage-deflate (RFC 7692, ``proto/src/ws/deflate.rs``) end to end, both
backends: the ``websockets`` client's own offer (it compresses by default) and
a byte-level client that checks what crosses the wire: the ``101``'s answer,
a compressed frame in (RSV1), a compressed frame out, inflated by zlib. The
negative arm (``--no-ws-per-message-deflate``) negotiates nothing, and a
compressed frame sent anyway is refused with 1002.
"""

from __future__ import annotations

import os
import struct
import zlib

import pytest

from helpers import start_server, stop_cleanly, websocket_handshake

websockets = pytest.importorskip("websockets")
from websockets.sync.client import connect  # noqa: E402

TEXT = ("m0serve compresses what repeats " * 4000).strip()


@pytest.fixture(params=["on", "off"])
def deflate(request):
    return request.param


@pytest.fixture
def server(backend, deflate):
    flags = ["--interface=asgi"] + (["--no-ws-per-message-deflate"] if deflate == "off" else [])
    server = start_server(backend, "asgi_ws_raw:app", *flags)
    yield server
    stop_cleanly(server)


def test_the_websockets_client_negotiates_it_and_messages_round_trip(server, deflate):
    host, port = server.address
    with connect(f"ws://{host}:{port}/ws/echo", open_timeout=10) as ws:
        names = [e.name for e in ws.protocol.extensions]
        assert names == (["permessage-deflate"] if deflate == "on" else []), names
        for message in [TEXT, TEXT.encode(), "short", os.urandom(100_000)]:
            ws.send(message)
            assert ws.recv(timeout=10) == message


def raw_frame(payload: bytes, opcode: int, rsv1: bool) -> bytes:
    """A final, masked client frame."""
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | (0x40 if rsv1 else 0) | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def read_frame(sock) -> tuple[int, bytes]:
    """(first byte, payload) of the next server frame."""
    def exactly(n):
        got = b""
        while len(got) < n:
            chunk = sock.recv(n - len(got))
            assert chunk, "closed mid-frame"
            got += chunk
        return got
    b0, b1 = exactly(2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", exactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", exactly(8))
    return b0, exactly(n)


def deflated(data: bytes) -> bytes:
    """`data` as one message, no context takeover (RFC 7692 §7.2.1)."""
    z = zlib.compressobj(wbits=-15)
    out = z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


def test_on_the_wire(server, deflate):
    sock, head = websocket_handshake(
        server.address, "/ws/echo",
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n")
    with sock:
        answer = [line for line in head.split("\r\n")
                  if line.lower().startswith("sec-websocket-extensions:")]
        packed = deflated(TEXT.encode())
        assert len(packed) < len(TEXT) // 20
        sock.sendall(raw_frame(packed, 0x1, rsv1=True))
        b0, payload = read_frame(sock)
        if deflate == "off":
            assert answer == []
            # Not agreed: RSV1 is a protocol error (RFC 6455 §5.2).
            assert b0 == 0x88 and struct.unpack("!H", payload[:2])[0] == 1002, (b0, payload)
            return
        assert answer == ["Sec-WebSocket-Extensions: permessage-deflate; "
                          "server_no_context_takeover; client_no_context_takeover"], answer
        assert b0 == 0x80 | 0x40 | 0x1, "a final text frame, compressed"
        assert len(payload) < len(TEXT) // 20
        inflated = zlib.decompressobj(wbits=-15).decompress(payload + b"\x00\x00\xff\xff")
        assert inflated == TEXT.encode()


def test_a_compressed_flood_is_not_held_back(server, deflate, tmp_path):
    # The app's sends wait while its payload bytes are unwritten; compressed,
    # 1 MiB of one byte goes out as about 1 KiB, and what compression saved is
    # credited when the frame is made (else the flood would stall at the
    # high water, its bytes never written as such).
    host, port = server.address
    mib = 32
    url = f"ws://{host}:{port}/ws/flood?mib={mib}&record={tmp_path / 'sent'}"
    with connect(url, max_size=None, open_timeout=10) as ws:
        got = [ws.recv(timeout=20) for _ in range(mib)]
    assert all(m == b"x" * (1 << 20) for m in got)
