"""Readiness and the shutdown delay (issue 12, point 3).

`--ready-path` is answered on the core threads from the supervisor's flag,
shared with every worker: 200 once every worker slot has held a ready
worker (app imported, lifespan startup done) while at least one serves and
no shutdown has begun (issue 12: "503 while draining or while no worker is
ready"); a worker that died leaves it 200 while a sibling serves; 503 from
the moment SIGTERM/SIGINT arrives. A rolling restart (SIGHUP) keeps it 200:
a slot's old worker serves until its replacement is ready.

`--shutdown-delay` keeps the listener accepting and the workers serving as
usual (keep-alive too) for that long after the signal, readiness 503, then
the drain begins and new connections are refused; with 0 they are refused
at once (the negative arm). The signal again during the delay drains now.

Probes go on new connections: a probe lands on a worker that accepts, and
only ready workers accept (a booting worker imports its app, and runs its
lifespan startup, before its cores start). With a single worker that is
still starting nobody accepts, so a probe's connection waits in the
backlog and the probe times out: no 503 can be given then, and a kubelet
counts the timeout as a failure just the same.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from helpers import Server, start_server, stop_cleanly, worker_pids

READY_PATH = "--ready-path=/readyz"
ALL_READY = r"supervisor \(pid \d+\): {n} worker\(s\) ready"
DELAY_BEGUN = r"shutdown delay of .*readiness answers 503"
DELAY_OVER = r"the shutdown delay is over: stopping the workers"


def started(backend: str, app: str, workers: int, *flags: str, wait_all: bool = True, **kw) -> Server:
    server = start_server(backend, app, f"--workers={workers}", READY_PATH, *flags, **kw)
    if wait_all:
        server.wait_for(ALL_READY.format(n=workers), 20)
    return server


def get(address: Tuple[str, int], target: str, timeout: float = 5.0) -> int:
    """One GET on a new connection: its status."""
    conn = http.client.HTTPConnection(*address, timeout=timeout)
    try:
        conn.request("GET", target, headers={"Connection": "close"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def get_or_show(server: Server, target: str) -> int:
    """get(), failing with the server's log where no answer came."""
    try:
        return get(server.address, target)
    except OSError as e:
        raise AssertionError(f"GET {target}: {e!r}\n{server.output}") from e


def wait_status(server: Server, target: str, want: int, timeout: float) -> None:
    """Probe `target` until it answers `want`, within `timeout`."""
    deadline = time.monotonic() + timeout
    seen: List[object] = []
    while time.monotonic() < deadline:
        try:
            status = get(server.address, target, timeout=2.0)
        except OSError as e:
            status = repr(e)
        if status == want:
            return
        seen.append(status)
        time.sleep(0.05)
    raise AssertionError(f"{target} never answered {want} within {timeout}s (saw {seen[-5:]})\n{server.output}")


def refused(server: Server) -> bool:
    """Whether a new connection to the server is refused (or reset: one
    caught in the listen queue at the moment the listener is shut)."""
    try:
        socket.create_connection(server.address, timeout=2.0).close()
    except (ConnectionRefusedError, ConnectionResetError):
        return True
    return False


def first_refused_after(server: Server, t0: float, timeout: float) -> float:
    """Seconds from `t0` to the first refused connection (polling, `timeout` at most)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if refused(server):
            return time.monotonic() - t0
        time.sleep(0.02)
    raise AssertionError(f"new connections still accepted {timeout}s on\n{server.output}")


class InFlight:
    """A request to /slow?s=SECONDS on its own connection, in a thread:
    it keeps a worker draining (and the server up) past the drain's start."""

    def __init__(self, server: Server, seconds: float) -> None:
        self.status: Optional[int] = None
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(server.address, seconds), daemon=True)
        self._thread.start()
        time.sleep(0.3)  # in the app by now

    def _run(self, address, seconds: float) -> None:
        try:
            self.status = get(address, f"/slow?s={seconds}", timeout=seconds + 10)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def result(self) -> Optional[int]:
        self._thread.join(20)
        assert self.error is None, self.error
        return self.status


@pytest.mark.parametrize("workers", [1, 2])
def test_ready_is_200_once_up_and_refuses_other_methods(backend: str, workers: int) -> None:
    server = started(backend, "readiness_wsgi:app", workers)
    try:
        for _ in range(4):
            assert get(server.address, "/readyz") == 200
        conn = http.client.HTTPConnection(*server.address, timeout=5)
        conn.request("POST", "/readyz", body=b"")
        response = conn.getresponse()
        assert (response.status, response.getheader("Allow")) == (405, "GET, HEAD")
        conn.close()
    finally:
        stop_cleanly(server)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.serial
def test_the_shutdown_delay_serves_on_with_503_then_drains(backend: str, workers: int) -> None:
    delay = 3.0
    server = started(backend, "readiness_wsgi:app", workers, f"--shutdown-delay={delay}")
    kept = http.client.HTTPConnection(*server.address, timeout=5)
    try:
        kept.request("GET", "/")
        first = kept.getresponse()
        assert first.status == 200
        first.read()
        # Outlives the delay, and keeps its worker draining past it.
        slow = InFlight(server, delay + 1.5)
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.wait_for(DELAY_BEGUN, 5)
        # Within the delay: readiness says 503, everything else serves as usual.
        assert get(server.address, "/readyz") == 503
        assert get(server.address, "/healthz") == 200
        assert get(server.address, "/") == 200
        kept.request("GET", "/")
        again = kept.getresponse()
        assert again.status == 200 and (again.getheader("Connection") or "").lower() != "close"
        again.read()
        assert not refused(server)
        checked = time.monotonic() - t0
        assert checked < delay, f"the checks took {checked:.1f}s, past the {delay}s delay: inconclusive"

        server.wait_for(DELAY_OVER, delay + 5)
        at = first_refused_after(server, t0, 5)
        assert at >= delay - 0.1, f"refused {at:.2f}s after SIGTERM, before the {delay}s delay was over"
        assert slow.result() == 200, "the request in flight finishes in the drain"
    finally:
        kept.close()
        stop_cleanly(server)
    assert "graceful timeout" in server.output


@pytest.mark.parametrize("workers", [1, 2])
def test_without_a_delay_new_connections_are_refused_at_once(backend: str, workers: int) -> None:
    """The negative arm of the one above: --shutdown-delay 0 (the default)."""
    server = started(backend, "readiness_wsgi:app", workers)
    try:
        assert get(server.address, "/readyz") == 200
        slow = InFlight(server, 2.5)
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        at = first_refused_after(server, t0, 5)
        assert at < 1.0, f"still accepting {at:.2f}s after SIGTERM with no delay"
        assert slow.result() == 200
    finally:
        stop_cleanly(server)
    assert "shutdown delay" not in server.output


def test_the_signal_again_cuts_the_delay_short(backend: str) -> None:
    server = started(backend, "readiness_wsgi:app", 2, "--shutdown-delay=30")
    try:
        slow = InFlight(server, 3)
        server.proc.send_signal(signal.SIGINT)
        server.wait_for(DELAY_BEGUN, 5)
        assert get(server.address, "/readyz") == 503
        t1 = time.monotonic()
        server.proc.send_signal(signal.SIGINT)
        server.wait_for(r"SIGINT again: the shutdown delay is cut short", 5)
        assert first_refused_after(server, t1, 5) < 2.0
        assert slow.result() == 200
    finally:
        status = server.stop()
    assert status == 0, server.output
    assert "panicked" not in server.output


@pytest.mark.parametrize("app", ["readiness_wsgi:app", "readiness_asgi:app"])
def test_503_until_every_worker_is_ready(backend: str, app: str, tmp_path: Path) -> None:
    """The WSGI app's import, or the ASGI app's lifespan startup, holds the
    second worker until the gate opens: the first one, serving, says 503."""
    flags = ["--interface=asgi"] if "asgi" in app else []
    server = started(backend, app, 2, *flags, wait_all=False, env={"M0_TEST_GATE": str(tmp_path)})
    try:
        server.wait_for(r"worker \d \(pid \d+\) ready", 20)
        for _ in range(3):
            assert get(server.address, "/readyz") == 503
        assert get(server.address, "/healthz") == 200
        assert get(server.address, "/") == 200
        assert not re.search(ALL_READY.format(n=2), server.output)
        (tmp_path / "open").touch()
        server.wait_for(ALL_READY.format(n=2), 20)
        wait_status(server, "/readyz", 200, 5)
    finally:
        stop_cleanly(server)


def test_a_roll_and_a_killed_worker_stay_ready_until_no_worker_serves(backend: str, tmp_path: Path) -> None:
    gate = tmp_path / "open"
    gate.touch()
    server = started(backend, "readiness_wsgi:app", 2, env={"M0_TEST_GATE": str(tmp_path)})
    try:
        assert get(server.address, "/readyz") == 200
        # SIGHUP: the replacements wait at the gate while the old workers serve.
        gate.unlink()
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for(r"SIGHUP: rolling restart", 5)
        server.wait_for(r"worker 1 started \(pid \d+\)", 5)
        for _ in range(10):
            assert get(server.address, "/readyz") == 200, "N ready workers serve during the roll"
            time.sleep(0.05)
        gate.touch()
        server.wait_for(r"rolling restart done", 30)
        assert get(server.address, "/readyz") == 200

        # A worker killed while its sibling serves: still ready (the pod
        # serves on; a 503 would move all its load onto the other pods).
        deadline = time.monotonic() + 10
        while len(worker_pids(server)) > 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # the rolled-out workers finish draining
        gate.unlink()
        first, second = worker_pids(server)[:2]
        os.kill(first, signal.SIGKILL)
        server.wait_for(rf"\(pid {first}\) exited: .*restarting it", 5)
        for _ in range(3):
            assert get_or_show(server, "/readyz") == 200, "one worker of two serves: ready"
        assert get_or_show(server, "/") == 200, "the other worker serves on"
        # The other killed too, with the first's replacement still at the
        # gate: no worker serves, so no probe is answered 200 (nobody
        # accepts until a replacement is ready: the probe times out, which a
        # kubelet counts as a failure like a 503) until one is ready.
        os.kill(second, signal.SIGKILL)
        server.wait_for(rf"\(pid {second}\) exited: .*restarting it", 5)
        for _ in range(2):
            try:
                status: object = get(server.address, "/readyz", timeout=1)
            except OSError as e:
                status = repr(e)
            assert status != 200, "no worker serves: not ready"
        gate.touch()
        wait_status(server, "/readyz", 200, 20)
    finally:
        stop_cleanly(server)
