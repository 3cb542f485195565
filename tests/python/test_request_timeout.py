"""`--request-timeout` (issue 33, point 3): an app call that runs longer has
its traceback logged and is abandoned, its client answered 504 (nothing was
sent yet) and the connection closed, while the worker's other threads (WSGI)
or its event loop (ASGI, which cancels the call) serve on; without the flag
the call is still pending past the same time."""

from __future__ import annotations

import socket
import time

from helpers import RawResponse
from test_worker_timeout import served_by_another
from test_workers import get, started

LIMIT = 1


def slow_call(server) -> socket.socket:
    sock = server.connect(timeout=LIMIT + 10)
    sock.sendall(b"GET /sleep HTTP/1.1\r\nHost: t\r\n\r\n")
    return sock


def times_out(backend: str, app: str, function: str, *flags: str, graceful: str) -> float:
    """The slow call's 504 and traceback, the worker serving on meanwhile;
    how long the server's SIGTERM then took."""
    server = started(backend, app, 1, f"--request-timeout={LIMIT}", *flags, graceful=graceful)
    try:
        sent = time.monotonic()
        sock = slow_call(server)
        time.sleep(0.2)
        # The worker serves on meanwhile.
        assert get(server.address, "/", timeout=LIMIT)[0] == 200
        response = RawResponse(sock).read_head()
        took = time.monotonic() - sent
        assert response.status == 504, server.output
        assert response.header("connection") == "close"
        assert LIMIT <= took < LIMIT + 3, took
        server.wait_for(rf"in {function}$", 5)
        assert "--request-timeout" in server.output
        assert get(server.address, "/")[0] == 200
        sock.close()
    finally:
        stopping = time.monotonic()
        server.stop()
    return time.monotonic() - stopping


def test_a_wsgi_view_past_the_limit_gets_504_and_its_traceback_while_others_are_served(backend):
    # Its thread sleeps on: the worker is killed past the graceful timeout.
    times_out(backend, "hung_app:wsgi_timed", "sleep_for_an_hour", "--blocking-threads=2", graceful="1")


def test_an_asgi_call_past_the_limit_is_cancelled_with_504_and_its_traceback(backend):
    # Cancelled: nothing is left for the drain to wait out.
    stop = times_out(backend, "hung_app:asgi_timed", "await_for_an_hour", graceful="10")
    assert stop < 5, f"the call was not cancelled: the stop took {stop:.1f}s"


def test_without_the_flag_the_slow_call_is_still_pending_past_the_limit(backend):
    server = started(backend, "hung_app:wsgi_timed", 1, "--blocking-threads=2", graceful="1")
    try:
        sock = slow_call(server)
        sock.settimeout(LIMIT + 1)
        try:
            data = sock.recv(1024)
            raise AssertionError(f"answered without --request-timeout: {data!r}")
        except socket.timeout:
            pass
        sock.close()
    finally:
        server.stop()


def test_a_worker_whose_pool_threads_are_all_stuck_is_replaced_ready_first(backend):
    server = started(
        backend, "hung_app:wsgi_timed", 1, f"--request-timeout={LIMIT}", "--blocking-threads=1", graceful="1"
    )
    try:
        status, old = get(server.address, "/")
        sock = slow_call(server)
        assert RawResponse(sock).read_head().status == 504
        server.wait_for(r"every pool thread \(1\) is stuck past --request-timeout", 5)
        server.wait_for(rf"recycled: draining worker 1 \(pid {old}\)", 20)
        # A connection the old worker's accept took as its drain began is
        # still its own to answer (and its one thread is stuck): retried.
        served_by_another(server, old, 10)
        sock.close()
    finally:
        server.stop()
