"""Issue 11, point 0, in every shape a Python app is served in: the request
line that overflowed a core thread's stack (`GET /a b HTTP/1.1`) and its
relatives are 400, answered by the core, and kill nothing; a bystander on a
kept-alive connection is served before, between and after them. (tests/
bad_input.rs holds the same family against the pure binary.)"""

from __future__ import annotations

import socket

import pytest

from helpers import Server

SHAPES = {
    "wsgi-pool": ("plain:hello", "--blocking-threads=2"),
    "wsgi-loop-only": ("plain:hello", "--blocking-threads=0"),
    "asgi": ("proxy_echo:asgi", "--interface=asgi"),
}

HOSTILE = [
    b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a b HTTP/1.2\r\nHost: x\r\n\r\n",
    b"GET /a b c HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a\tb HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET / HTTP/1.1 \r\nHost: x\r\n\r\n",
    b"GET / HTTP/1.1 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET / extra HTTP/1.1\r\nHost: x\r\n\r\n",
    b" GET / HTTP/1.1\r\nHost: x\r\n\r\n",
]


@pytest.fixture(params=sorted(SHAPES))
def shape(request):
    return request.param


def bystander_get(sock) -> bytes:
    sock.sendall(b"GET /bystander HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the bystander's connection was closed"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_whitespace_in_the_request_line_is_400_in_every_shape(serve, shape):
    server: Server = serve(*SHAPES[shape])
    with server.connect() as bystander:
        assert bystander_get(bystander).startswith(b"HTTP/1.1 200 ")
        for line in HOSTILE:
            answer = server.exchange(line, timeout=5)
            assert answer.startswith(b"HTTP/1.1 400 "), (line, answer)
            assert bystander_get(bystander).startswith(b"HTTP/1.1 200 "), line
    assert server.proc.poll() is None, server.output


@pytest.mark.parametrize("half_close", [False, True], ids=["waits", "half-closes"])
def test_a_bad_request_line_is_answered_before_the_rest_of_its_head(serve, half_close):
    """The line alone, then nothing (or a FIN): the 400 does not wait for a
    head that will not come (before, a half-closed client got no answer and
    a waiting one waited out the head's timeout)."""
    server: Server = serve("plain:hello", "--header-read-timeout=30")
    for line in HOSTILE[:-1] + [b"GET / HTTQ/1.1\r\n", b"PROXY TCP4 192.168.0.1 192.168.0.11 65iii 100000\r\n"]:
        partial = line[: line.index(b"\r\n") + 2]
        with server.connect(timeout=5) as sock:
            sock.sendall(partial)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := sock.recv(1 << 16):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 400 "), (partial, answer)
    assert server.proc.poll() is None, server.output
