"""`--worker-timeout` (issue 33, point 3): a worker whose Python side stops
answering the supervisor's heartbeat (a view spinning in C with the GIL
held, an ASGI loop stuck in a blocking call) has every Python thread's
traceback logged, is killed and replaced, while its core threads still
answer the native health path (which must not count as alive); with
`--worker-timeout 0` the stuck worker is left alone."""

from __future__ import annotations

import os
import signal
import socket
import time

from test_workers import alive, get, started

TIMEOUT = 2
#: The supervisor's wait for the tracebacks before SIGKILL (watchdog.rs).
DUMP_WAIT = 1
#: A replacement's start on a busy test machine, with room.
START = 10
SILENT = r"worker 1 \(pid (\d+)\) silent for [\d.]+s \(--worker-timeout 2s\)"


def stick(server, target: str) -> socket.socket:
    """Send `target` on a connection of its own, left open: its view never ends."""
    sock = server.connect()
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    return sock


def served_by_another(server, old: str, bound: float) -> float:
    """Seconds until `/` is answered by a worker other than `old`."""
    start = time.monotonic()
    while time.monotonic() - start < bound:
        try:
            status, body = get(server.address, "/", timeout=2)
            if status == 200 and body != old:
                return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"no other worker answered within {bound}s\n{server.output}")


def found_replaced(backend: str, app: str, target: str, function: str) -> None:
    server = started(backend, app, 1, f"--worker-timeout={TIMEOUT}")
    try:
        status, old = get(server.address, "/")
        assert status == 200
        stuck_at = time.monotonic()
        sock = stick(server, target)
        time.sleep(0.5)
        # The cores still answer what needs no Python: no sign of life for the watchdog.
        assert get(server.address, "/healthz", timeout=2)[0] == 200
        m = server.wait_for(SILENT, TIMEOUT + START)
        assert m.group(1) == old
        served_by_another(server, old, TIMEOUT + DUMP_WAIT + START)
        assert time.monotonic() - stuck_at < TIMEOUT + DUMP_WAIT + START
        # faulthandler's dump, from the stuck worker, names the stuck view.
        server.wait_for(rf"in {function}$", 5)
        assert "most recent call first" in server.output
        assert "was killed as hung" in server.output, server.output
        sock.close()
    finally:
        server.stop()


def test_a_view_spinning_in_c_with_the_gil_held_is_found_and_its_worker_replaced(backend):
    found_replaced(backend, "hung_app:app", "/spin", "spin_in_c")


def test_an_asgi_loop_stuck_in_a_blocking_call_is_found_and_its_worker_replaced(backend):
    found_replaced(backend, "hung_app:asgi_app", "/block", "block_the_loop")


def test_a_healthy_idle_worker_is_left_alone(backend):
    server = started(backend, "hung_app:app", 1, f"--worker-timeout={TIMEOUT}")
    try:
        status, pid = get(server.address, "/")
        time.sleep(TIMEOUT * 2.5)
        assert get(server.address, "/") == (200, pid)
        assert "silent for" not in server.output
    finally:
        server.stop()


def test_with_worker_timeout_0_the_stuck_worker_is_left_alone(backend):
    server = started(backend, "hung_app:app", 1, "--worker-timeout=0")
    try:
        status, old = get(server.address, "/")
        sock = stick(server, "/spin")
        time.sleep(TIMEOUT + DUMP_WAIT + 1)
        assert "silent for" not in server.output
        assert alive(int(old)), "killed without the watchdog"
        try:
            get(server.address, "/", timeout=1)
            raise AssertionError(f"answered while the GIL is held\n{server.output}")
        except OSError:
            pass
        sock.close()
        os.kill(int(old), signal.SIGKILL)  # the test's own stuck worker
    finally:
        server.stop()

