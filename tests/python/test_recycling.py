"""Recycling healthy workers (issue 9, point 7): after --workers-max-requests,
at --workers-lifetime, over --workers-max-rss in two samples in a row; each
through the rolling restart's path (the replacement READY, then the old
worker drained), one worker at a time."""

from __future__ import annotations

import http.client
import re
import time
from typing import Dict, List

from helpers import stop_cleanly
from test_workers import WORKER_READY, Load, get, ready_pids, started

RECYCLING = r"worker (\d+) \(pid {pid}\) {why}: recycling it"


def new_pid_serving(server, old: List[int], timeout: float = 10.0) -> int:
    """Wait until a worker not in `old` answers; its pid."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = int(get(server.address, "/")[1])
        if pid not in old:
            return pid
        time.sleep(0.05)
    raise AssertionError(f"no new worker served within {timeout}s\n{server.output}")


def test_max_requests_recycles_a_worker_after_its_nth_request_losing_none():
    server = started("portable", "workers_app:app", 1, "--workers-max-requests=30")
    try:
        (first,) = ready_pids(server)
        for _ in range(29):
            assert get(server.address, "/") == (200, str(first))
        time.sleep(0.3)
        assert "recycling it" not in server.output, server.output
        assert get(server.address, "/") == (200, str(first))
        server.wait_for(RECYCLING.format(pid=first, why="served its --workers-max-requests"), 2)
        load = Load(server.address, threads=2)
        server.wait_for(rf"\(pid {first}\) drained: exit status 0", 15)
        replacement = new_pid_serving(server, [first])
        results = load.stop()
    finally:
        stop_cleanly(server)
    assert [r for r in results if r[1] != 200] == [], f"requests failed during the recycle\n{server.output}"
    assert {str(first), str(replacement)} <= {body for _, _, body in results}
    assert len(results) > 10


def one_connection_per_worker(server, workers: int):
    """Keep-alive connections until each worker holds one (bounded); with
    the requests each worker served meanwhile."""
    held: Dict[int, http.client.HTTPConnection] = {}
    served: Dict[int, int] = {}
    spare = []
    for _ in range(64):
        conn = http.client.HTTPConnection(*server.address, timeout=5)
        conn.request("GET", "/")
        response = conn.getresponse()
        pid = int(response.read())
        served[pid] = served.get(pid, 0) + 1
        if pid in held:
            spare.append(conn)
        else:
            held[pid] = conn
        if len(held) == workers:
            break
    for conn in spare:
        conn.close()
    assert len(held) == workers, f"only {list(held)} answered\n{server.output}"
    return held, served


def test_two_workers_at_their_limit_together_are_recycled_one_after_the_other():
    limit = 20
    server = started("portable", "workers_app:app", 2, f"--workers-max-requests={limit}")
    try:
        old = ready_pids(server)
        conns, served = one_connection_per_worker(server, 2)
        assert all(n < limit - 1 for n in served.values()), served
        # Up to one request short of the limit on each, then the last one on
        # both together: they reach it within a few milliseconds of each
        # other, while neither replacement is up.
        for pid, conn in conns.items():
            for _ in range(limit - 1 - served[pid]):
                conn.request("GET", "/")
                conn.getresponse().read()
        for conn in conns.values():
            conn.request("GET", "/")
        for conn in conns.values():
            conn.getresponse().read()
            conn.close()
        for pid in old:
            server.wait_for(rf"\(pid {pid}\) drained: exit status 0", 20)
        lines = server.output.splitlines()
    finally:
        stop_cleanly(server)
    # After the boot: "worker N started (pid P)" for each replacement, then
    # its "ready"; the second replacement must not start before the first is ready.
    events = []
    for line in lines:
        if re.search(r"worker \d+ started \(pid \d+\)", line):
            events.append("started")
        elif WORKER_READY.search(line) and "ready on" not in line:
            events.append("ready")
    assert events[:2] == ["ready", "ready"], events  # the first generation
    assert events[2:] == ["started", "ready", "started", "ready"], "\n".join(lines)


def test_lifetime_recycles_the_first_workers_spread_over_it():
    lifetime = 4.0
    server = started("portable", "workers_app:app", 2, f"--workers-lifetime={lifetime}")
    try:
        ready_at = time.monotonic()
        old = ready_pids(server)
        load = Load(server.address, threads=2)
        m = server.wait_for(RECYCLING.format(pid=r"(\d+)", why="reached its --workers-lifetime"), lifetime)
        first_at = time.monotonic()
        assert m.group(1) == "1", server.output
        m = server.wait_for(RECYCLING.format(pid=r"(\d+)", why="reached its --workers-lifetime").replace(
            r"worker (\d+)", "worker (2)"), lifetime)
        second_at = time.monotonic()
        for pid in old:
            server.wait_for(rf"\(pid {pid}\) drained: exit status 0", 15)
        new_pid_serving(server, old)
        results = load.stop()
    finally:
        stop_cleanly(server)
    # Worker 1 of 2 at half the lifetime, worker 2 at the whole (both counted
    # from their spawn, a little before "ready").
    assert first_at - ready_at < lifetime / 2 + 1, (first_at - ready_at, server.output)
    assert second_at - first_at > lifetime / 2 - 1, (second_at - first_at, server.output)
    assert [r for r in results if r[1] != 200] == [], f"requests failed during the recycles\n{server.output}"


def test_max_rss_recycles_a_leaking_worker_and_not_a_burst():
    server = started("portable", "workers_app:app", 1, "--workers-max-rss=200", "--blocking-threads=2")
    try:
        (first,) = ready_pids(server)
        # Bursts over the limit (300 MiB written, held 0.5 s) shorter than the
        # sampling interval, each followed by a longer gap: at most one sample
        # over in a row, never two (a one-sample rule recycles on one of them).
        for _ in range(4):
            assert get(server.address, "/spike?mb=300&s=0.5") == (200, str(first))
            time.sleep(1.3)
        assert "recycling it" not in server.output, server.output
        # From the ask, not the reply: the memory grows while the view runs,
        # and on a loaded machine its reply came after the first sample over.
        asked_at = time.monotonic()
        assert get(server.address, "/grow?mb=300") == (200, str(first))
        server.wait_for(RECYCLING.format(pid=first, why=r"resident memory \d+ MiB over --workers-max-rss twice in a row"), 5)
        recycled_after = time.monotonic() - asked_at
        server.wait_for(rf"\(pid {first}\) drained: exit status 0", 15)
        new_pid_serving(server, [first])
    finally:
        stop_cleanly(server)
    # Two samples a second apart: between 1 and 3 seconds after the growth
    # began (its writing, and the reply, take a while on a loaded machine).
    assert 0.9 < recycled_after < 4.0, (recycled_after, server.output)
