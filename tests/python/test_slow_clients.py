"""Slow clients never hold a Python thread: WSGI bodies are buffered by the
core before the view runs (memory, then an unlinked file), a stalled body gets
408, and a client that reads nothing makes the view's write fail within
--send-timeout. Real sockets, loopback only, every wait bounded."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path

import pytest

from helpers import RawResponse, worker_pids

APP = "slow_clients:wsgi"


def connect(server, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(server.address, timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def answer(sock: socket.socket) -> RawResponse:
    """One whole response (Content-Length framed) read off `sock`."""
    response = RawResponse(sock).read_head()
    length = int(response.header("Content-Length") or 0)
    while len(response.buffer) < length:
        response._fill()
    response.body = response.buffer[:length]
    return response


def get_json(server, path: str):
    with connect(server) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
        response = answer(sock)
        assert response.status == 200, response.status
        return json.loads(response.body)


def trickle_upload(server, pieces: int, gap: float):
    """POST /upload one byte every `gap` seconds; returns (view's record,
    when the first and the last byte were sent)."""
    with connect(server) as sock:
        sock.sendall(f"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {pieces}\r\n\r\n".encode())
        first = time.time()
        for i in range(pieces):
            if i:
                time.sleep(gap)
            sock.sendall(b"a")
        last = time.time()
        response = answer(sock)
        assert response.status == 200, response.status
        return json.loads(response.body), first, last


@pytest.mark.parametrize("threads", ["2", "0"], ids=["pool", "loop-only"])
def test_a_trickled_upload_reaches_the_view_only_once_complete(serve, threads):
    server = serve(APP, "--blocking-threads", threads)
    record, first, last = trickle_upload(server, pieces=12, gap=0.1)
    assert record["length"] == 12
    # Clocks of one machine; the view must not start before the last byte left.
    assert record["started"] >= last - 0.02, (record, first, last)


def test_with_request_buffering_off_the_view_starts_before_the_upload_ends(serve):
    server = serve(APP, "--blocking-threads", "2", "--request-buffering", "off")
    record, first, last = trickle_upload(server, pieces=12, gap=0.1)
    assert record["length"] == 12
    assert record["started"] < last - 0.5, (record, first, last)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def fds_into(pid: int, directory: Path):
    """The server's open files that live (or lived) in `directory`."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            found.append(target)
    return found


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
@pytest.mark.parametrize("threads", ["1", "0"], ids=["pool", "loop-only"])
def test_a_10_mib_upload_over_a_1_mib_buffer_spills_to_an_unlinked_file(serve, tmp_path, threads):
    spill = tmp_path / "spill"
    spill.mkdir()
    server = serve(APP, "--blocking-threads", threads, "--body-buffer-size", "1M",
                   "--body-spill-dir", str(spill))
    get_json(server, "/fast")  # warm: the view, the pool, the allocator
    (pid,) = worker_pids(server)  # the one worker: its fds and RSS, not the supervisor's
    before = rss_kib(pid)
    size = 10 << 20
    body = os.urandom(size)
    with connect(server) as sock:
        sock.sendall(f"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n".encode())
        sock.sendall(body[:-1])
        # All but the last byte is with the server: held, the view not run.
        deadline = time.monotonic() + 10
        while not fds_into(pid, spill) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # what the socket still held has been read
        held = fds_into(pid, spill)
        during = rss_kib(pid)
        assert held, "the body never went to a file in the spill dir"
        assert all("(deleted)" in t for t in held), held
        assert list(spill.iterdir()) == [], "the spill file has a name"
        sock.sendall(body[-1:])
        response = answer(sock)
    assert response.status == 200
    record = json.loads(response.body)
    assert record["length"] == size
    assert record["sha256"] == hashlib.sha256(body).hexdigest()
    # 10 MiB received, 1 MiB of it in memory (plus socket-sized reads).
    assert during - before < 6 * 1024, (before, during)
    deadline = time.monotonic() + 5
    while fds_into(pid, spill) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fds_into(pid, spill) == [], "the file outlived its request"
    assert list(spill.iterdir()) == []


def test_a_stalled_body_gets_408_after_the_body_read_timeout(serve):
    server = serve(APP, "--blocking-threads", "1", "--body-read-timeout", "1")
    with connect(server) as sock:
        sock.sendall(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
        sent = time.monotonic()
        sock.settimeout(5)
        response = answer(sock)
        waited = time.monotonic() - sent
        assert response.status == 408
        assert 0.8 <= waited <= 3.0, waited
        assert sock.recv(100) == b"", "the connection closes after the 408"
    # The thread was never held: the next request is served at once.
    assert get_json(server, "/fast") == "fast"


def stall_big(server, interface: str):
    """A client asks for /big and reads nothing; returns when it asked."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(server.address)
    sock.sendall(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
    return sock, time.time()


def server_side_state(server_port: int, client_port: int):
    """The TCP state of the server's end of a loopback connection (None once
    the kernel has let it go), from /proc/net/tcp."""
    states = {"01": "ESTABLISHED", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT",
              "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0B": "CLOSING"}
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == client_port:
                return states.get(state, state)
    return None


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads socket states from /proc/net/tcp (Linux)")
@pytest.mark.parametrize("interface", ["wsgi", "asgi"])
def test_a_client_that_never_reads_is_disconnected_at_the_send_timeout(serve, interface):
    """The connection closes, not only the view's write: a send still in
    flight to a client that reads nothing must not hold it (and its slot
    under --max-connections) open for as long as the client stays."""
    flags = ["--blocking-threads", "2", "--send-timeout", "1"]
    if interface == "asgi":
        flags += ["--interface", "asgi"]
    server = serve(f"slow_clients:{interface}", *flags)
    sock, asked = stall_big(server, interface)
    client_port = sock.getsockname()[1]
    try:
        assert server_side_state(server.address[1], client_port) == "ESTABLISHED"
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            state = server_side_state(server.address[1], client_port)
            if state != "ESTABLISHED":
                break
            time.sleep(0.1)
        assert state != "ESTABLISHED", "the server still holds the connection 8 s into a 1 s send timeout"
        # Filling the buffers takes a moment; then at most the timeout, plus slack.
        assert time.time() - asked <= 1 + 2.5
        assert get_json(server, "/fast") == "fast"
    finally:
        sock.close()


@pytest.mark.parametrize("interface", ["wsgi", "asgi"])
def test_a_client_that_never_reads_makes_the_views_write_fail_within_the_send_timeout(serve, interface):
    flags = ["--blocking-threads", "2", "--send-timeout", "1"]
    if interface == "asgi":
        flags += ["--interface", "asgi"]
    server = serve(f"slow_clients:{interface}", *flags)
    sock, asked = stall_big(server, interface)
    try:
        deadline = time.monotonic() + 10
        record = {}
        ended = "closed" if interface == "wsgi" else "failed"
        while time.monotonic() < deadline:
            # Other clients are served meanwhile.
            record = get_json(server, "/status")
            if ended in record:
                break
            time.sleep(0.1)
        assert ended in record, record
        # Filling the buffers takes a moment; then at most the timeout, plus slack.
        assert record[ended] - asked <= 1 + 2.5, (record, asked)
        assert record[ended] - record["last_write"] >= 0.8, record
        if interface == "wsgi":
            assert record["complete"] is False, "the iteration stopped early, close() was called"
        else:
            assert record["error"], "send() raised an OSError"
            assert record["after"] == "http.disconnect", record
        assert get_json(server, "/fast") == "fast"
    finally:
        sock.close()
