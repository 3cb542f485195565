"""Sockets made elsewhere (issue 12, point 7): a listening socket the parent
passes with `--fd N`, systemd's socket activation (`LISTEN_FDS` and
`LISTEN_PID`, the socket at descriptor 3), `--uds-permissions` and
`--backlog`. Each starts m0serve on a socket this test made."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

import pytest

from helpers import APPS, Server, child_env, m0serve_command, stop_cleanly

UNIX_LISTENING = re.compile(r"listening on (unix:\S+)")


def flags(backend: str, *more: str) -> List[str]:
    """start_server's flags, less the address (the socket is the test's)."""
    return [
        "--cores=1",
        f"--backend={backend}",
        "--health-path=/healthz",
        "--graceful-timeout=5",
        f"--app-dir={APPS}",
        *more,
    ]


def tcp_listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def get_body(conn: http.client.HTTPConnection, target: str) -> str:
    try:
        conn.request("GET", target, headers={"Connection": "close"})
        response = conn.getresponse()
        assert response.status == 200, response.status
        return response.read().decode()
    finally:
        conn.close()


def get_tcp(address, target: str) -> str:
    return get_body(http.client.HTTPConnection(*address, timeout=10), target)


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.path)


def still_listening(address) -> bool:
    """A connect completes: the socket is in LISTEN (the kernel queues it)."""
    try:
        socket.create_connection(address, timeout=2).close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize("workers", [1, 2])
def test_fd_serves_the_parents_tcp_socket_and_leaves_it_listening(backend, workers):
    parent = tcp_listener()
    address = parent.getsockname()
    fd = parent.fileno()
    argv = m0serve_command() + [f"--fd={fd}", f"--workers={workers}"] + flags(backend) + ["plain:hello"]
    server = Server(argv, None, child_env(), pass_fds=(fd,))
    try:
        assert server.url == f"http://127.0.0.1:{address[1]}", server.output
        for _ in range(4):
            assert get_tcp(address, "/x") == "hello from /x"
    finally:
        stop_cleanly(server)
    # The socket is the parent's: m0serve closed its copies but never shut it
    # down (a shutdown would refuse connections the parent's next server is
    # to take).
    assert still_listening(address), server.output
    parent.close()


def test_fd_serves_the_parents_unix_socket_and_leaves_its_file(backend):
    path = Path(tempfile.mkdtemp(prefix="m0serve-fd-")) / "parent.sock"
    parent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    parent.bind(str(path))
    parent.listen(16)
    fd = parent.fileno()
    argv = m0serve_command() + [f"--fd={fd}"] + flags(backend) + ["plain:hello"]
    server = Server(argv, None, child_env(), pass_fds=(fd,), listening=UNIX_LISTENING)
    try:
        assert server.url == f"unix:{path}", server.output
        assert get_body(UnixConnection(str(path)), "/u") == "hello from /u"
    finally:
        stop_cleanly(server)
    assert path.exists(), "the parent's socket file is not m0serve's to remove"
    parent.close()
    shutil.rmtree(path.parent)


# Socket activation as systemd does it: the socket at descriptor 3, and
# LISTEN_PID naming the server's own pid, known only after the fork: this
# wrapper sets it in the process that then execs m0serve (same pid).
ACTIVATE = """
import os, sys
fd, pid = int(sys.argv[1]), sys.argv[2]
os.dup2(fd, 3)
os.environ.update(LISTEN_PID=str(os.getpid()) if pid == "self" else pid, LISTEN_FDS="1", LISTEN_FDNAMES="http")
os.execv(sys.argv[3], sys.argv[3:])
"""


def activated(backend: str, parent: socket.socket, pid: str, *more: str) -> Server:
    fd = parent.fileno()
    argv = [sys.executable, "-c", ACTIVATE, str(fd), pid] + m0serve_command() + flags(backend, *more)
    return Server(argv + ["plain:listen_env"], None, child_env(), pass_fds=(fd,))


@pytest.mark.parametrize("workers", [1, 2])
def test_socket_activation_serves_fd_3_and_clears_the_variables(backend, workers):
    parent = tcp_listener()
    address = parent.getsockname()
    server = activated(backend, parent, "self", f"--workers={workers}")
    try:
        assert server.url == f"http://127.0.0.1:{address[1]}", server.output
        # The app's process (a worker) does not see them: they were taken
        # by the supervisor, so nothing it starts mistakes them for its own.
        assert get_tcp(address, "/") == "- - -"
    finally:
        stop_cleanly(server)
    parent.close()


def test_socket_activation_for_another_pid_is_not_ours(backend):
    parent = tcp_listener()
    server = activated(backend, parent, "1", "--port=0")
    try:
        # It bound its own port, and left the variables (not its own) alone.
        assert server.url != f"http://127.0.0.1:{parent.getsockname()[1]}", server.output
        assert get_tcp(server.address, "/") == "1 1 http"
    finally:
        stop_cleanly(server)
    parent.close()


def run_on_fd(fd: int, passed: bool = True) -> subprocess.CompletedProcess:
    argv = m0serve_command() + [f"--fd={fd}", "--cores=1", f"--app-dir={APPS}", "plain:hello"]
    return subprocess.run(
        argv,
        env=child_env(),
        pass_fds=(fd,) if passed else (),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_an_inherited_descriptor_that_is_not_a_listening_stream_socket_is_refused():
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    unbound = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    read, write = os.pipe()
    cases = [(udp.fileno(), "not a stream socket"), (unbound.fileno(), "not listening"), (read, "not a socket")]
    for fd, why in cases:
        result = run_on_fd(fd)
        assert result.returncode == 1, (why, result)
        assert f"m0serve: error: --fd {fd}: {why}" in result.stderr, result.stderr
        assert "panicked" not in result.stderr
    # A number the parent did not pass: not open in m0serve.
    closed = run_on_fd(1000, passed=False)
    assert closed.returncode == 1 and "--fd 1000: not an open descriptor" in closed.stderr, closed.stderr
    for s in (udp, unbound):
        s.close()
    os.close(read)
    os.close(write)


def test_uds_permissions_are_the_socket_files_mode(backend):
    folder = Path(tempfile.mkdtemp(prefix="m0serve-uds-"))
    try:
        # Two modes, so the umask's cannot pass for either.
        for given, mode in [("0o600", 0o600), ("666", 0o666)]:
            path = folder / "m0.sock"
            argv = m0serve_command() + [f"--uds={path}", f"--uds-permissions={given}"] + flags(backend)
            server = Server(argv + ["plain:hello"], None, child_env(), listening=UNIX_LISTENING)
            try:
                assert stat.S_IMODE(os.stat(path).st_mode) == mode
                assert get_body(UnixConnection(str(path)), "/p") == "hello from /p"
            finally:
                stop_cleanly(server)
    finally:
        shutil.rmtree(folder)


def listen_backlog(port: int) -> int:
    """The backlog of the socket listening on `port`: ss's Send-Q for a listener."""
    out = subprocess.run(
        ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, timeout=10, check=True
    ).stdout
    fields = out.split()
    assert fields and fields[0] == "LISTEN", out
    return int(fields[2])


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_backlog_is_the_listeners(backend):
    from helpers import start_server

    for backlog, expected in [(None, 1024), ("17", 17)]:
        extra = [] if backlog is None else [f"--backlog={backlog}"]
        server = start_server(backend, "plain:hello", *extra)
        try:
            assert listen_backlog(server.address[1]) == expected, server.output
        finally:
            stop_cleanly(server)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--backlog=0"], "--backlog"),
        (["--backlog=65536"], "--backlog"),
        (["--backlog=lots"], "--backlog"),
        (["--uds=/tmp/m0-x.sock", "--uds-permissions=rw-rw----"], "--uds-permissions"),
        (["--uds=/tmp/m0-x.sock", "--uds-permissions=1777"], "--uds-permissions"),
        (["--uds-permissions=660"], "needs --uds"),
        (["--fd=3", "--port=8001"], "--fd"),
        (["--fd=3", "--backlog=9"], "--fd"),
    ],
)
def test_bad_socket_flags_are_one_line_usage_errors(args, message):
    from helpers import run_m0serve

    result = run_m0serve(*args, "plain:hello")
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
