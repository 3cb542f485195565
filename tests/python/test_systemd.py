"""systemd's notify protocol (issue 33, point 7), against a fake notify
socket: READY=1 with MAINPID once every worker is ready, WATCHDOG=1 at half
of WATCHDOG_USEC, RELOADING=1 then READY=1 around a SIGHUP roll, STOPPING=1
at the drain; the workers and the application never see NOTIFY_SOCKET."""

from __future__ import annotations

import http.client
import signal
import socket
import time
from pathlib import Path
from typing import List

from helpers import start_server, stop_cleanly

APP = """\
import os

def app(environ, start_response):
    body = os.environ.get("NOTIFY_SOCKET", "-").encode()
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]
"""


class FakeSystemd:
    """A datagram socket where m0serve's notifications arrive, kept in order."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.1)
        self.messages: List[str] = []

    def wait_for(self, prefix: str, timeout: float = 20.0) -> str:
        """The first message not yet taken that starts with `prefix`."""
        give_up = time.monotonic() + timeout
        while True:
            for i, m in enumerate(self.messages):
                if m.startswith(prefix):
                    del self.messages[: i + 1]
                    return m
            assert time.monotonic() < give_up, f"no {prefix!r} in {self.messages}"
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass

    def close(self) -> None:
        self.sock.close()


def test_ready_watchdog_reloading_and_stopping_reach_a_notify_socket(backend: str, tmp_path: Path):
    (tmp_path / "notified.py").write_text(APP)
    systemd = FakeSystemd(tmp_path / "notify")
    env = {"NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHDOG_USEC": "400000"}
    server = start_server(backend, "notified:app", "--workers=2", app_dir=tmp_path, env=env)
    try:
        ready = systemd.wait_for("READY=1")
        assert f"MAINPID={server.proc.pid}" in ready.splitlines(), ready
        assert "STATUS=2 worker(s) ready" in ready.splitlines(), ready
        pinged = time.monotonic()
        systemd.wait_for("WATCHDOG=1", timeout=2)
        systemd.wait_for("WATCHDOG=1", timeout=2)
        assert time.monotonic() - pinged < 1.5, "the watchdog is pinged every 200 ms"

        conn = http.client.HTTPConnection(*server.address, timeout=10)
        conn.request("GET", "/")
        assert conn.getresponse().read() == b"-", "the worker saw NOTIFY_SOCKET"
        conn.close()

        server.proc.send_signal(signal.SIGHUP)
        reloading = systemd.wait_for("RELOADING=1")
        assert "MONOTONIC_USEC=" in reloading, reloading
        systemd.wait_for("READY=1")
        server.wait_for("rolling restart done", 20)
    finally:
        stop_cleanly(server)
        try:
            systemd.wait_for("STOPPING=1", timeout=5)
        finally:
            systemd.close()
