"""What the tests share: running the installed ``m0serve``, reading its
output with deadlines, and raw HTTP over sockets where the bytes matter."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional, Tuple
from urllib.parse import urlsplit

import pytest

APPS = Path(__file__).resolve().parent / "apps"
START_TIMEOUT = 20.0
EXIT_TIMEOUT = 15.0
LISTENING = re.compile(r"listening on (https?://[^\s]+)")


def m0serve_command() -> List[str]:
    """The console script of the environment running pytest (where `pip install .` put it)."""
    script = Path(sys.executable).parent / "m0serve"
    if script.exists():
        return [str(script)]
    found = shutil.which("m0serve")
    if found is None:
        pytest.fail("no m0serve console script: run `pip install .` in this environment first")
    return [found]


def child_env(extra: Optional[dict] = None) -> dict:
    """This environment without M0SERVE_* (a stray one would change the flags)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("M0SERVE_")}
    env.pop("RUST_LOG", None)
    env.setdefault("RUST_BACKTRACE", "1")
    env.update(extra or {})
    return env


class Server:
    """A running m0serve; its output (stdout and stderr) is collected line by line."""

    def __init__(
        self, argv: List[str], cwd: Optional[Path], env: dict, pass_fds=(), listening=LISTENING
    ) -> None:
        """`pass_fds`: descriptors the server inherits (a socket the test made);
        `listening`: the line that says it serves, its group 1 the address."""
        self.argv = argv
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            pass_fds=pass_fds,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._lines: List[str] = []
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read, args=(stream,), daemon=True)
            for stream in (self.proc.stdout, self.proc.stderr)
        ]
        for reader in self._readers:
            reader.start()
        try:
            self.url = self.wait_for(listening, START_TIMEOUT).group(1)
        except AssertionError:
            self.proc.kill()
            self.proc.wait()
            raise
        split = urlsplit(self.url)
        self.address: Tuple[str, int] = (split.hostname or "127.0.0.1", split.port or 80)

    def _read(self, stream) -> None:
        for raw in iter(stream.readline, b""):
            with self._changed:
                self._lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._changed.notify_all()

    @property
    def output(self) -> str:
        """Everything it printed so far."""
        with self._changed:
            return "\n".join(self._lines)

    def wait_for(self, pattern, timeout: float = 5.0) -> "re.Match[str]":
        """The first output line matching `pattern`, waiting up to `timeout`
        (failing at once if the process has exited without printing it)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            seen = 0
            while True:
                for line in self._lines[seen:]:
                    m = regex.search(line)
                    if m:
                        return m
                seen = len(self._lines)
                exited = self.proc.poll() is not None
                left = deadline - time.monotonic()
                if left <= 0 or (exited and not any(r.is_alive() for r in self._readers)):
                    why = f"exited with {self.proc.returncode}" if exited else f"not within {timeout}s"
                    raise AssertionError(
                        f"no line matching {regex.pattern!r} ({why}): {self.argv}\n" + "\n".join(self._lines)
                    )
                self._changed.wait(min(left, 0.1))

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send `sig`, wait for the exit (bounded), return the status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            status = self.proc.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"m0serve did not exit within {EXIT_TIMEOUT}s of signal {sig}\n{self.output}")
        for reader in self._readers:
            reader.join(5)
        return status

    def connect(self, timeout: float = 10.0) -> socket.socket:
        """A raw TCP connection to the server, with `timeout` on every operation."""
        sock = socket.create_connection(self.address, timeout=timeout)
        sock.settimeout(timeout)
        return sock

    def exchange(self, data: bytes, timeout: float = 10.0) -> bytes:
        """Send `data` on a new connection; everything the server sends until it closes."""
        with self.connect(timeout) as sock:
            sock.sendall(data)
            chunks = []
            while True:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)


def worker_pids(server: "Server") -> List[int]:
    """The pids of the server's worker processes (the supervisor's children):
    from /proc on Linux, from pgrep elsewhere (macOS)."""
    tasks = Path(f"/proc/{server.proc.pid}/task")
    if tasks.exists():
        return [int(pid) for task in tasks.iterdir() for pid in (task / "children").read_text().split()]
    found = subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def start_server(backend: str, app: Optional[str], *flags: str, cwd=None, env=None, app_dir=APPS,
                 graceful: str = "5", listening: str = LISTENING) -> Server:
    """m0serve on `backend`, a free port (unless `flags` give a --bind: the
    two may not be mixed), one core, `--health-path /healthz`,
    `--graceful-timeout graceful`, `--app-dir app_dir` (None: the default,
    the current directory), then `flags` and `app`."""
    binds = "M0SERVE_BIND" in (env or {}) or any(f in ("-b", "--bind") or f.startswith("--bind=") for f in flags)
    argv = m0serve_command() + ([] if binds else ["--port=0"]) + [
        "--cores=1",
        f"--backend={backend}",
        "--health-path=/healthz",
        f"--graceful-timeout={graceful}",
    ]
    if app_dir is not None:
        argv.append(f"--app-dir={app_dir}")
    argv += list(flags)
    if app is not None:
        argv.append(app)
    return Server(argv, cwd, child_env(env), listening=listening)


def stop_cleanly(server: Server) -> None:
    """SIGTERM; the exit must be graceful (0) and nothing may have panicked."""
    status = server.stop()
    assert status == 0, f"m0serve exited {status} after SIGTERM\n{server.output}"
    assert "panicked" not in server.output, server.output


def run_m0serve(*args: str, cwd=None, env=None, timeout: float = 30.0, python_m: bool = False):
    """Run m0serve to its exit (a command that must not serve)."""
    argv = [sys.executable, "-m", "m0serve"] if python_m else m0serve_command()
    try:
        return subprocess.run(
            argv + list(args),
            cwd=cwd,
            env=child_env(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"m0serve {args} did not exit within {timeout}s: {e.stderr}")


# ---------------------------------------------------------------------------
# Raw HTTP/1.1, for the tests where the bytes on the wire matter
# ---------------------------------------------------------------------------


class RawResponse:
    """Reads one response from a socket, piece by piece."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        self.status = 0
        self.headers: List[Tuple[str, str]] = []

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise AssertionError(f"connection closed; have {self.buffer!r}")
        self.buffer += data

    def _take_line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            self._fill()
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def read_head(self) -> "RawResponse":
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]  # type: ignore[misc]
        return self

    def header(self, name: str) -> Optional[str]:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def read_chunk(self) -> Optional[bytes]:
        """The next chunk's data (None for the last, zero-size chunk; trailers are skipped)."""
        size = int(self._take_line().split(b";")[0], 16)
        if size == 0:
            while self._take_line():
                pass
            return None
        while len(self.buffer) < size + 2:
            self._fill()
        data, rest = self.buffer[:size], self.buffer[size:]
        assert rest[:2] == b"\r\n", f"chunk not followed by CRLF: {rest[:10]!r}"
        self.buffer = rest[2:]
        return data


def raw_get(server: Server, target: str, extra: str = "") -> Tuple[socket.socket, RawResponse]:
    """Send a GET for `target` on a new connection; return it with the response head read."""
    sock = server.connect()
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: test\r\n{extra}\r\n".encode("latin-1"))
    return sock, RawResponse(sock).read_head()


def websocket_handshake(address, path: str, extra: str = "") -> Tuple[socket.socket, str]:
    """A raw WebSocket client's opening handshake (`extra`: more header
    lines, each ending in CRLF): the socket, and the 101's head."""
    sock = socket.create_connection(address, timeout=10)
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        assert chunk, "closed during the handshake"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101 "), head
    return sock, head.decode()


def silent_websocket(address, path: str) -> socket.socket:
    """A WebSocket client that completes the handshake, then neither reads
    nor writes: a peer gone without a FIN, as far as the server can tell."""
    return websocket_handshake(address, path)[0]
