"""A drain loses no request of a client that does not retry (issue 33,
point 1): eight http.client threads, half on keep-alive connections, half on
a new connection per request, and two HTTP/2 clients (h2load, prior
knowledge, requests one after another on a connection for 2 s at a time,
a new connection on a GOAWAY; it retries nothing), through three
SIGHUP rolls, recycles by --workers-max-requests and a SIGTTOU, on both
backends: every request answered 200. An HTTP/2 connection is drained by
GOAWAY (RFC 9113 §6.8: the first with 2^31-1, the last stream processed a
PING later), on which its client moves its next requests to a new one
(httpx cannot: its h2 library takes the first GOAWAY as the end and fails
its request in flight on the PING, python-hyper/h2#1199).

A connection open at the drain's start is not closed under a request that
may be on its way: its next response carries `Connection: close`, and one
idle at the drain's start is kept for the idle grace (M0_DRAIN_IDLE_MS)
since its last response before it is closed. The negative arm,
M0_DRAIN_IDLE_MS=0, closes the idle ones at once (the old rule), and a
client that had just sent its next request on one gets no answer."""

from __future__ import annotations

import http.client
import signal
import threading
import time
from collections import Counter
from typing import List

import re
import shutil
import subprocess

import pytest
from test_workers import started

from helpers import stop_cleanly

CLIENTS = 8
H2_CLIENTS = 2
# The HTTP/2 clients are h2load's: .ci/run installs it; the sid chroot's
# legs have none, and run the HTTP/1.1 clients alone.
HAS_H2LOAD = shutil.which("h2load") is not None


class Clients:
    """CLIENTS threads GETting / until stopped, the first half on one
    keep-alive connection each (a new one only after the server said
    `Connection: close`), the rest on a new connection per request; no
    request is ever retried. Statuses and errors are counted."""

    def __init__(self, address) -> None:
        self.address = address
        self.statuses: Counter = Counter()
        self.errors: List[str] = []
        self.h2_answers = 0
        self.h2_unsent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(i < CLIENTS // 2,), daemon=True) for i in range(CLIENTS)
        ] + [threading.Thread(target=self._run_h2, daemon=True) for _ in range(H2_CLIENTS if HAS_H2LOAD else 0)]
        for t in self._threads:
            t.start()

    def _run(self, keep_alive: bool) -> None:
        conn = None
        while not self._stop.is_set():
            if conn is None:
                conn = http.client.HTTPConnection(*self.address, timeout=10)
            try:
                conn.request("GET", "/", headers={} if keep_alive else {"Connection": "close"})
                response = conn.getresponse()
                response.read()
                closing = response.getheader("Connection", "").lower() == "close"
                with self._lock:
                    self.statuses[response.status] += 1
            except OSError as e:  # RemoteDisconnected, resets, timeouts
                with self._lock:
                    self.errors.append(f"{'kept-alive' if keep_alive else 'new'} connection at {time.monotonic():.3f}: {e!r}")
                closing = True
            if closing or not keep_alive:
                conn.close()
                conn = None
        if conn is not None:
            conn.close()

    def _run_h2(self) -> None:
        import os
        import tempfile
        url = "http://%s:%d/" % self.address
        fd, log = tempfile.mkstemp(prefix="h2load-")
        os.close(fd)
        try:
            while not self._stop.is_set():
                os.truncate(log, 0)  # h2load appends
                done = subprocess.run(["h2load", "-D", "2", "-c", "1", "-m", "1", "--log-file", log, url],
                                      capture_output=True, text=True, timeout=60)
                rows = [line.split("\t") for line in open(log).read().splitlines()]
                with self._lock:
                    if done.returncode != 0:
                        self.errors.append(f"HTTP/2: h2load said {done.stdout[-300:]!r} {done.stderr[-300:]!r}")
                    for start, status, _ in rows:
                        if status == "-1" and start == "0":
                            # Never sent: the client had it queued as the GOAWAY came
                            # and dropped it; the server never saw it.
                            self.h2_unsent += 1
                        elif status == "-1":
                            self.errors.append(f"HTTP/2 at {time.monotonic():.3f}: a request sent, no answer")
                        else:
                            self.statuses[int(status)] += 1
                            self.h2_answers += 1
        finally:
            os.unlink(log)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)


def under_load(backend: str, env: dict, flags: tuple, act) -> tuple[Clients, str]:
    """Two workers started with `flags`, `act(server)` done under the
    clients; their counts, and the supervisor's log."""
    server = started(backend, "workers_app:app", 2, *flags, env=env)
    try:
        clients = Clients(server.address)
        try:
            act(server)
        finally:
            clients.stop()
    finally:
        stop_cleanly(server)
    return clients, server.output


def wait_count(server, text: str, n: int, timeout: float = 30.0) -> None:
    give_up = time.monotonic() + timeout
    while server.output.count(text) < n:
        assert time.monotonic() < give_up, f"{text!r} not seen {n} time(s)\n{server.output}"
        time.sleep(0.05)


def roll_and_scale(server) -> None:
    """Three SIGHUP rolls, one after another, then a worker added and one removed."""
    for n in range(1, 4):
        server.proc.send_signal(signal.SIGHUP)
        wait_count(server, "rolling restart done", n)
    server.proc.send_signal(signal.SIGTTIN)
    server.wait_for(r"worker 3 \(pid \d+\) ready", 20)
    server.proc.send_signal(signal.SIGTTOU)
    server.wait_for(r"worker 3 \(pid \d+\) drained", 20)


def recycle_thrice(server) -> None:
    """Recycles by --workers-max-requests (apart from the rolls: a roll shares
    their queue, and under recycles that never empties it is never done)."""
    wait_count(server, "recycling it", 3)
    wait_count(server, "recycled: draining worker", 3)


def test_rolls_recycles_and_scale_down_lose_no_request_of_a_client_that_does_not_retry(backend: str):
    for flags, act in (((), roll_and_scale), (("--workers-max-requests=300",), recycle_thrice)):
        clients, _ = under_load(backend, {}, flags, act)
        assert clients.errors == [], f"{act.__name__}: {len(clients.errors)} requests lost, e.g. {clients.errors[:3]}"
        assert set(clients.statuses) == {200}, (act.__name__, clients.statuses)
        assert clients.statuses[200] > 200, (act.__name__, clients.statuses)
        assert clients.h2_answers > 50 or not HAS_H2LOAD, (act.__name__, clients.h2_answers)


def test_closing_idle_keep_alive_connections_at_once_loses_requests(backend: str):
    """The negative arm: the old rule, an idle keep-alive connection closed
    the moment the drain begins."""
    clients, _ = under_load(backend, {"M0_DRAIN_IDLE_MS": "0"}, (), roll_and_scale)
    lost = [e for e in clients.errors if "RemoteDisconnected" in e or "Reset" in e]
    assert lost, f"closing idle connections at once lost nothing: {clients.statuses}"
