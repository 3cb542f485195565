"""Prometheus metrics (issue 12, point 4): `--metrics-address` serves the
text exposition format from the supervisor's own listener, with every
worker's series under its `worker` label. The scrapes are parsed with
prometheus_client's parser, and the counts checked against the requests
these tests sent (exactly: every request is raw bytes on its own
connection, so the bytes in and out are known too)."""

from __future__ import annotations

import http.client
import os
import socket
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers import RawResponse, run_m0serve, silent_websocket, stop_cleanly
from test_workers import started

SCRAPE_DEADLINE = 10.0


# Port 0: the kernel picks a free port as the supervisor binds it, and the
# log says which. (A port found free beforehand and closed again could be
# taken by something else before the server binds it: CI saw that once.)
ANY_PORT = "127.0.0.1:0"
METRICS = f"--metrics-address={ANY_PORT}"


def metrics_port(server) -> int:
    """The port the server's metrics listener was bound to, from its log."""
    return int(server.wait_for(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", 20).group(1))


class Scrape:
    """One scrape, parsed: every sample by name, with its labels."""

    def __init__(self, text: str) -> None:
        self.samples = [
            (s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples
        ]

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples named `name` whose labels include `labels`."""
        return sum(
            v for n, ls, v in self.samples if n == name and all(ls.get(k) == want for k, want in labels.items())
        )

    def has(self, name: str, **labels: str) -> bool:
        return any(n == name and all(ls.get(k) == want for k, want in labels.items()) for n, ls, _ in self.samples)

    def workers(self, name: str) -> set:
        return {ls["worker"] for n, ls, _ in self.samples if n == name}


def scrape(port: int) -> Scrape:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type").startswith("text/plain; version=0.0.4")
        return Scrape(response.read().decode())
    finally:
        conn.close()


def wait_until(port: int, check, what: str, timeout: float = SCRAPE_DEADLINE) -> Scrape:
    """Scrape until `check(scrape)` holds (closes are counted as the
    connection is dropped, a moment after the client saw it)."""
    end = time.monotonic() + timeout
    while True:
        s = scrape(port)
        if check(s):
            return s
        if time.monotonic() > end:
            pytest.fail(f"{what} never held; last scrape:\n{s.samples}")
        time.sleep(0.05)


def request(method: str, target: str, body: bytes = b"") -> bytes:
    head = f"{method} {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
    if body:
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


needs_proc = pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads socket states from /proc (Linux)")


def listening_sockets(pid: int) -> int:
    """How many listening TCP sockets process `pid` holds (from /proc: Linux)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    listening = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                listening += 1
    return listening


@needs_proc
def test_off_by_default_and_on_with_the_flag_or_its_variable(serve) -> None:
    off = serve("plain:hello")
    assert "metrics on" not in off.output
    assert listening_sockets(off.proc.pid) == 1, "only the server's own listener"
    on = serve("plain:hello", env={"M0SERVE_METRICS_ADDRESS": ANY_PORT})
    port = metrics_port(on)
    assert listening_sockets(on.proc.pid) == 2
    assert scrape(port).value("m0serve_build_info") == 1


def test_requests_bytes_and_connections_match_what_was_sent(serve) -> None:
    server = serve("plain:raises", METRICS)
    port = metrics_port(server)
    before = scrape(port)
    # The negative arm: nothing sent, nothing counted.
    assert before.value("m0serve_requests_total") == 0
    assert before.value("m0serve_connections_accepted_total") == 0
    assert before.workers("m0serve_requests_total") == {"1"}
    sent = [
        *[request("GET", "/ok")] * 4,
        *[request("POST", "/ok", b"x" * 100)] * 2,
        *[request("GET", "/boom")] * 3,
        b"NOT A REQUEST\r\n\r\n",
    ]
    received = sum(len(server.exchange(r)) for r in sent)
    after = wait_until(
        port, lambda s: s.value("m0serve_connections_open") == 0 and s.value("m0serve_requests_total") == 10, "all closed"
    )
    assert after.value("m0serve_requests_total", method="GET", status="2xx") == 4
    assert after.value("m0serve_requests_total", method="POST", status="2xx") == 2
    assert after.value("m0serve_requests_total", method="GET", status="5xx") == 3
    assert after.value("m0serve_requests_total", method="other", status="4xx") == 1
    assert after.value("m0serve_requests_total", method="DELETE") == 0, "never sent"
    assert after.value("m0serve_request_duration_seconds_count") == 10
    assert after.value("m0serve_request_duration_seconds_bucket", le="+Inf") == 10
    assert after.value("m0serve_requests_in_flight") == 0
    assert after.value("m0serve_connections_accepted_total") == len(sent)
    assert after.value("m0serve_connections_closed_total", cause="bad_request") == 1
    assert after.value("m0serve_connections_closed_total") == len(sent)
    assert after.value("m0serve_received_bytes_total") == sum(len(r) for r in sent)
    assert after.value("m0serve_sent_bytes_total") == received


def test_in_flight_during_a_slow_request_and_its_duration(serve) -> None:
    server = serve("plain:sleepy", METRICS, "--blocking-threads=2")
    port = metrics_port(server)
    done: List[int] = []
    slow = threading.Thread(target=lambda: done.append(len(server.exchange(request("GET", "/sleep?s=1.5")))))
    slow.start()
    try:
        during = wait_until(port, lambda s: s.value("m0serve_requests_in_flight") == 1, "one in flight", timeout=1.4)
        assert during.value("m0serve_requests_total") == 0, "not counted before its answer is sent"
    finally:
        slow.join(10)
    after = wait_until(port, lambda s: s.value("m0serve_requests_total") == 1, "the slow request counted")
    assert after.value("m0serve_requests_in_flight") == 0
    # 1.5 s from its head to its last byte: above the 1 s bucket, within 2.5 s.
    assert after.has("m0serve_request_duration_seconds_bucket", le="1.0")
    assert after.value("m0serve_request_duration_seconds_bucket", le="1.0") == 0
    assert after.value("m0serve_request_duration_seconds_bucket", le="2.5") == 1
    assert 1.4 < after.value("m0serve_request_duration_seconds_sum") < 2.5


def test_connections_closed_by_keep_alive_and_header_timeouts(serve) -> None:
    server = serve(
        "plain:hello",
        METRICS,
        "--keep-alive-timeout=0.5",
        "--header-read-timeout=0.5",
    )
    port = metrics_port(server)
    idle = socket.create_connection(server.address, timeout=10)
    partial = socket.create_connection(server.address, timeout=10)
    try:
        idle.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        assert idle.recv(65536).startswith(b"HTTP/1.1 200")
        partial.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n")
        after = wait_until(
            port,
            lambda s: s.value("m0serve_connections_closed_total") == 2,
            "both connections closed by their timeouts",
        )
    finally:
        idle.close()
        partial.close()
    assert after.value("m0serve_connections_closed_total", cause="keep_alive_timeout") == 1
    assert after.value("m0serve_connections_closed_total", cause="header_timeout") == 1
    assert after.value("m0serve_connections_open") == 0


def test_two_workers_in_one_scrape(backend: str) -> None:
    server = started(backend, "plain:hello", 2, METRICS)
    port = metrics_port(server)
    try:
        sent = 40
        # Held open together, so that the least-connections tally spreads them.
        socks = [socket.create_connection(server.address, timeout=10) for _ in range(sent)]
        for sock in socks:
            sock.sendall(request("GET", "/"))
        for sock in socks:
            while sock.recv(65536):
                pass
            sock.close()
        after = wait_until(
            port,
            lambda s: s.value("m0serve_requests_total") == sent and s.value("m0serve_connections_open") == 0,
            "every request counted",
        )
        assert after.workers("m0serve_requests_total") == {"1", "2"}
        assert after.workers("m0serve_request_duration_seconds_count") == {"1", "2"}
        by_worker: Dict[str, float] = {
            w: after.value("m0serve_requests_total", worker=w, method="GET", status="2xx") for w in ("1", "2")
        }
        assert sum(by_worker.values()) == sent
        assert after.value("m0serve_connections_accepted_total") == sent
    finally:
        stop_cleanly(server)


@pytest.mark.parametrize("value", ["nonsense", "127.0.0.1:", ":80", "127.0.0.1:99999"])
def test_a_bad_address_is_one_line_and_exit_2(value: str) -> None:
    result = run_m0serve(f"--metrics-address={value}", "plain:hello")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--metrics-address" in lines[0], result.stderr


def test_an_address_in_use_exits_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_m0serve(f"--metrics-address=127.0.0.1:{port}", "--port=0", "plain:hello", f"--app-dir={Path(__file__).parent / 'apps'}")
    assert result.returncode == 1, result.stderr
    assert f"--metrics-address 127.0.0.1:{port}" in result.stderr


def test_the_wsgi_pool_figures(serve) -> None:
    server = serve("plain:sleepy", METRICS, "--blocking-threads=1")
    port = metrics_port(server)
    # One thread: the first request sleeps in it, the other two wait in the queue.
    slow = [
        threading.Thread(target=server.exchange, args=(request("GET", "/sleep?s=1"),)) for _ in range(3)
    ]
    for t in slow:
        t.start()
    try:
        wait_until(port, lambda s: s.value("m0serve_pool_queue_depth") >= 1, "a job queued", timeout=2.5)
    finally:
        for t in slow:
            t.join(10)
    after = wait_until(
        port,
        lambda s: s.value("m0serve_pool_queue_depth") == 0 and s.value("m0serve_pool_reattach_wait_seconds_count") >= 3,
        "the queue drained, an attach a job",
    )
    assert after.workers("m0serve_pool_queue_depth") == {"1"}
    count = after.value("m0serve_pool_reattach_wait_seconds_count")
    assert after.value("m0serve_pool_reattach_wait_seconds_bucket", le="+Inf") == count
    # The negative arm: the loop-only shape has no pool, so no pool series.
    server = serve("plain:hello", METRICS, "--blocking-threads=0")
    port = metrics_port(server)
    assert not scrape(port).has("m0serve_pool_queue_depth")


def test_the_asgi_executor_and_websocket_figures(serve) -> None:
    from websockets.sync.client import connect

    server = serve("asgi_ws_raw:app", "--interface=asgi", METRICS)
    port = metrics_port(server)
    host, http_port = server.address
    with connect(f"ws://{host}:{http_port}/ws/echo", open_timeout=10) as ws:
        during = wait_until(port, lambda s: s.value("m0serve_asgi_tasks") == 1, "the echo task running")
        assert during.value("m0serve_websocket_connections_open") == 1
        for text in ("a", "b", "c"):
            ws.send(text)
            assert ws.recv(timeout=10) == text
    after = wait_until(
        port,
        lambda s: s.value("m0serve_websocket_connections_open") == 0 and s.value("m0serve_asgi_tasks") == 0,
        "the WebSocket closed and its task ended",
    )
    assert after.value("m0serve_websocket_connections_total") == 1
    assert after.value("m0serve_websocket_messages_total") == 6
    assert after.value("m0serve_requests_total", method="GET", status="1xx") == 1, "the 101"
    assert after.value("m0serve_asgi_queue_depth") == 0
    assert not after.has("m0serve_pool_queue_depth"), "no WSGI pool here"


def test_a_websocket_whose_ping_goes_unanswered(serve) -> None:
    server = serve("asgi_ws_raw:app", "--interface=asgi", METRICS,
                   "--ws-ping-interval=0.2", "--ws-ping-timeout=0.2")
    port = metrics_port(server)
    with silent_websocket(server.address, "/ws/echo"):
        after = wait_until(
            port,
            lambda s: s.value("m0serve_connections_closed_total", cause="ws_ping_timeout") == 1,
            "an unanswered ping counted as ws_ping_timeout",
        )
    assert after.value("m0serve_websocket_connections_open") == 0


def test_a_killed_worker_is_counted_as_restarted_and_its_series_start_again(backend: str) -> None:
    import signal

    from helpers import worker_pids
    from test_workers import WORKER_READY

    server = started(backend, "plain:hello", 2, METRICS)
    port = metrics_port(server)
    try:
        server.exchange(request("GET", "/"))
        before = wait_until(port, lambda s: s.value("m0serve_requests_total") == 1, "one request")
        assert before.value("m0serve_worker_restarts_total") == 0, "nothing restarted yet"
        served = next(
            w for w in ("1", "2") if before.value("m0serve_requests_total", worker=w) == 1
        )
        pid = next(
            int(m.group(2)) for m in WORKER_READY.finditer(server.output) if m.group(1) == served
        )
        assert pid in worker_pids(server)
        os.kill(pid, signal.SIGKILL)
        after = wait_until(
            port,
            lambda s: s.value("m0serve_worker_restarts_total", worker=served, cause="exited") == 1,
            "the restart counted",
        )
        assert after.value("m0serve_requests_total", worker=served) == 0, "the dead worker's shards are freed"
        server.wait_for(rf"worker {served} \(pid (?!{pid})\d+\) ready", 20)
        server.exchange(request("GET", "/"))
        wait_until(port, lambda s: s.value("m0serve_requests_total") == 1, "the new request counted")
    finally:
        stop_cleanly(server)


def test_connections_closed_by_the_client_the_server_and_a_reset(serve) -> None:
    import struct

    server = serve("plain:hello", METRICS)
    port = metrics_port(server)
    # The client ends a kept-alive connection with a FIN, having read the
    # whole answer (a close with unread bytes would send an RST instead).
    with socket.create_connection(server.address, timeout=10) as kept:
        kept.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        answer = RawResponse(kept).read_head()
        assert answer.status == 200
        length = int(answer.header("Content-Length"))
        while len(answer.buffer) < length:
            answer._fill()
        kept.shutdown(socket.SHUT_WR)
    wait_until(port, lambda s: s.value("m0serve_connections_closed_total", cause="client_closed") == 1,
               "a FIN counted as client_closed")
    # The exchange ends it (Connection: close).
    server.exchange(request("GET", "/"))
    wait_until(port, lambda s: s.value("m0serve_connections_closed_total", cause="server_closed") == 1,
               "Connection: close counted as server_closed")
    # The client resets it halfway through a head (SO_LINGER 0: an RST, no FIN).
    rude = socket.create_connection(server.address, timeout=10)
    rude.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n")
    time.sleep(0.2)
    rude.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    rude.close()
    after = wait_until(port, lambda s: s.value("m0serve_connections_closed_total", cause="reset") == 1,
                       "an RST counted as reset")
    assert after.value("m0serve_connections_closed_total") == 3
    assert after.value("m0serve_connections_open") == 0


def test_a_rolling_restart_is_counted_by_its_cause(backend: str) -> None:
    import signal

    server = started(backend, "plain:hello", 2, METRICS)
    port = metrics_port(server)
    try:
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for(r"rolling restart done", 30)
        after = wait_until(
            port,
            lambda s: s.value("m0serve_worker_restarts_total", cause="rolling_restart") == 2,
            "both workers' restarts counted as rolling_restart",
        )
        assert after.value("m0serve_worker_restarts_total", cause="exited") == 0
    finally:
        stop_cleanly(server)
