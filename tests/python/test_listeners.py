"""Several listeners (issue 33, point 6): `--bind` repeated (`HOST:PORT`,
`[::1]:PORT`, `unix:PATH`, `fd://N`), every listener served by every worker
on both backends; dual stack answered by an IPv4 and an IPv6 client; systemd's
socket activation with two sockets (`LISTEN_FDS=2`); a SIGHUP roll that loses
no request on either of two binds; and `--bind` beside the old address flags,
or a bad address, a one-line usage error."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

import pytest
from test_drain_loses_nothing import Clients, wait_count
from test_sockets import UnixConnection, flags, tcp_listener
from test_tls import Pki, get_over
from test_workers import READY, started

from helpers import Server, child_env, m0serve_command, run_m0serve, stop_cleanly

# The supervisor's line once every worker is ready, with every listener's URL.
READY_ON = re.compile(r"worker\(s\) ready on (.+)$", re.MULTILINE)


def urls(server: Server) -> List[str]:
    """Every listener's URL, in the order of the binds (the supervisor's
    ready line)."""
    return READY_ON.search(server.output).group(1).split(", ")


def address(url: str) -> Tuple[str, int]:
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    return host.strip("[]"), int(port)


def pids_over_held_connections(connect, n: int = 6) -> set:
    """`n` connections from `connect()`, all held open, each asked once:
    the worker pids that answered (the workers' tally spreads held ones)."""
    conns, pids = [], set()
    try:
        for _ in range(n):
            conn = connect()
            conns.append(conn)
            conn.request("GET", "/")
            response = conn.getresponse()
            assert response.status == 200
            pids.add(response.read().decode())
    finally:
        for conn in conns:
            conn.close()
        # A worker's tally counts a closed connection until it reads the
        # close: the next round's connections wait for that, or a worker still
        # counting these defers to its sibling for all of them.
        time.sleep(0.3)
    return pids


@pytest.fixture
def folder():
    path = Path(tempfile.mkdtemp(prefix="m0serve-binds-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_two_tcp_binds_and_a_unix_bind_are_each_served_by_every_worker(backend, folder):
    sock = folder / "m0.sock"
    server = started(
        backend, "workers_app:app", 2, "--bind=127.0.0.1:0", "-b", "127.0.0.1:0", f"--bind=unix:{sock}"
    )
    try:
        first, second, unix = urls(server)
        assert unix == f"unix:{sock}", server.output
        assert first != second, server.output
        for url in (first, second, unix):
            # Each worker says where it listens: both say it of every bind.
            assert server.output.count(f"listening on {url} ") == 2, server.output
        for url in (first, second):
            connect = lambda: http.client.HTTPConnection(*address(url), timeout=10)  # noqa: E731
            assert len(pids_over_held_connections(connect)) == 2, (url, server.output)
        assert len(pids_over_held_connections(lambda: UnixConnection(str(sock)))) == 2, server.output
    finally:
        stop_cleanly(server)
    assert not sock.exists(), "the bound socket file is removed at exit"


def test_the_app_is_told_the_listener_each_request_came_in_on(backend, folder):
    sock = folder / "named.sock"
    server = started(backend, "plain:server_address", 2, "--bind=localhost:0", "--bind=127.0.0.1:0", f"--bind=unix:{sock}")
    try:
        first, second, _ = urls(server)
        for url, name in ((first, "localhost"), (second, "127.0.0.1")):
            conn = http.client.HTTPConnection(*address(url), timeout=10)
            conn.request("GET", "/")
            assert conn.getresponse().read().decode() == f"{name} {address(url)[1]}", (url, server.output)
            conn.close()
        conn = UnixConnection(str(sock))
        conn.request("GET", "/")
        assert conn.getresponse().read().decode() == f"{sock} 80"
        conn.close()
    finally:
        stop_cleanly(server)


def ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_dual_stack_answers_an_ipv4_and_an_ipv6_client(backend):
    server = started(backend, "request_echo:app", 2, "--bind=127.0.0.1:0", "--bind=[::1]:0")
    try:
        v4, v6 = urls(server)
        assert v4.startswith("http://127.0.0.1:") and v6.startswith("http://[::1]:"), server.output
        for url, family, client in ((v4, socket.AF_INET, "127.0.0.1"), (v6, socket.AF_INET6, "::1")):
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(10)
                s.connect(address(url))
                s.sendall(b"GET /which HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 200"), answer
            assert f'"client": "{client}"'.encode() in answer, answer
    finally:
        stop_cleanly(server)


def test_one_tls_setting_serves_every_tcp_bind_and_a_unix_bind_plain(backend, folder):
    pki = Pki(folder)
    sock = folder / "plain.sock"
    binds = ("--bind=127.0.0.1:0", "--bind=127.0.0.1:0", f"--bind=unix:{sock}")
    server = started(backend, "workers_app:app", 2, *binds, *pki.flags())
    try:
        first, second, unix = urls(server)
        assert first.startswith("https://") and second.startswith("https://"), server.output
        for url in (first, second):
            raw = socket.create_connection(address(url), timeout=10)
            with pki.context().wrap_socket(raw, server_hostname="localhost") as tls:
                assert get_over(tls).startswith(b"HTTP/1.1 200"), url
        conn = UnixConnection(str(sock))
        conn.request("GET", "/")
        assert conn.getresponse().status == 200, "plain HTTP on the Unix socket"
        conn.close()
        assert f"{unix}: plain HTTP (TLS applies to TCP listeners only)" in server.output, server.output
    finally:
        stop_cleanly(server)


# systemd's activation with two sockets: a TCP one at 3, a Unix one at 4.
ACTIVATE_TWO = """
import os, sys
tcp, unix = int(sys.argv[1]), int(sys.argv[2])
os.dup2(tcp, 3)
os.dup2(unix, 4)
os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS="2", LISTEN_FDNAMES="web:local")
os.execv(sys.argv[3], sys.argv[3:])
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_socket_activation_with_two_sockets_serves_both(backend, workers, folder):
    tcp = tcp_listener()
    path = folder / "activated.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(path))
    unix.listen(16)
    fds = (tcp.fileno(), unix.fileno())
    argv = [sys.executable, "-c", ACTIVATE_TWO, *map(str, fds)] + m0serve_command()
    argv += flags(backend, f"--workers={workers}") + ["plain:hello"]
    server = Server(argv, None, child_env(), pass_fds=fds)
    try:
        if workers > 1:
            server.wait_for(READY.format(n=workers), 20)
        assert server.url == f"http://127.0.0.1:{tcp.getsockname()[1]}", server.output
        server.wait_for(re.escape(f"listening on unix:{path} "))
        conn = http.client.HTTPConnection(*tcp.getsockname(), timeout=10)
        conn.request("GET", "/t")
        assert conn.getresponse().read() == b"hello from /t"
        conn.close()
        conn = UnixConnection(str(path))
        conn.request("GET", "/u")
        assert conn.getresponse().read() == b"hello from /u"
        conn.close()
    finally:
        stop_cleanly(server)
    assert path.exists(), "the socket file is systemd's, left alone"
    tcp.close()
    unix.close()


def test_a_roll_loses_no_request_on_either_of_two_binds(backend):
    server = started(backend, "workers_app:app", 2, "--bind=127.0.0.1:0", "--bind=127.0.0.1:0")
    try:
        load = [Clients(address(url)) for url in urls(server)]
        try:
            for n in range(1, 3):
                server.proc.send_signal(signal.SIGHUP)
                wait_count(server, "rolling restart done", n)
        finally:
            for clients in load:
                clients.stop()
    finally:
        stop_cleanly(server)
    for clients in load:
        assert clients.errors == [], f"{len(clients.errors)} requests lost, e.g. {clients.errors[:3]}"
        assert set(clients.statuses) == {200} and clients.statuses[200] > 50, clients.statuses


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bind=127.0.0.1:0", "--port=9000"], "--port"),
        (["--bind=127.0.0.1:0", "--host=0.0.0.0"], "--host"),
        (["--bind=127.0.0.1:0", "--uds=/tmp/x.sock"], "--uds"),
        (["--bind=::1:8000"], "in brackets"),
        (["--bind=localhost:http"], "not a port"),
        (["--bind=unix:"], "needs a path"),
    ],
)
def test_bad_binds_are_one_line_usage_errors(args, message):
    result = run_m0serve(*args, "plain:hello")
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--bind" in lines[0] and message in lines[0], result.stderr


def test_the_variable_is_a_comma_separated_list(backend, folder):
    sock = folder / "env.sock"
    env = {"M0SERVE_BIND": f"127.0.0.1:0,unix:{sock}"}
    server = started(backend, "workers_app:app", 2, env=env)
    try:
        _, unix = urls(server)
        assert unix == f"unix:{sock}", server.output
        conn = UnixConnection(str(sock))
        conn.request("GET", "/")
        assert conn.getresponse().status == 200
        conn.close()
        assert os.path.exists(sock)
    finally:
        stop_cleanly(server)
