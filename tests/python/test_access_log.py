"""`--access-log-format` (issue 12, point 6), on both backends, WSGI and
ASGI: gunicorn's default format parsed back with a regex and checked
against the request sent, `json` lines read with json.loads, the duration
from the head's first byte to the response's last byte (a line is written
only once the client has taken the whole answer), and escaping that keeps
a client from forging a line or a field."""

from __future__ import annotations

import json
import re
import socket
import time

import pytest

from helpers import run_m0serve, start_server, stop_cleanly

GUNICORN = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
# A marker first, so the regex never starts inside the log prefix.
FORMAT = 'ACCESS ' + GUNICORN + ' %(D)s %({x-served}o)s %({x-request-id}i)s %(p)s'
QUOTED = r'"((?:[^"\\]|\\.)*)"'
LINE = re.compile(
    r"ACCESS (?P<h>\S+) (?P<l>\S+) (?P<u>\S+) \[(?P<t>[^\]]+)\] "
    + QUOTED.replace("(", "(?P<r>", 1)
    + r" (?P<s>\d{3}) (?P<b>\S+) "
    + QUOTED.replace("(", "(?P<f>", 1)
    + " "
    + QUOTED.replace("(", "(?P<a>", 1)
    + r" (?P<D>\d+) (?P<o>\S+) (?P<i>\S+) <(?P<p>\d+)>$"
)
CLF_TIME = re.compile(r"\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} \+0000")

# How early an app's sleep may end: uvloop's timers count whole milliseconds
# from the loop's clock as it was read at the start of the loop's iteration,
# so `asyncio.sleep(0.05)` can return after 49.7 ms of real time (seen in CI).
TIMER_SLACK_US = 1_000

INTERFACES = {"wsgi": ["access_log_app:wsgi"], "asgi": ["--interface=asgi", "access_log_app:asgi"]}


@pytest.fixture(params=sorted(INTERFACES))
def interface(request):
    return request.param


def start(backend: str, interface: str, *flags: str):
    *iface_flags, app = INTERFACES[interface]
    return start_server(backend, app, *iface_flags, *flags)


def request(target: str, *headers: str) -> bytes:
    lines = [f"GET {target} HTTP/1.1", "Host: t", "Connection: close", *headers, "", ""]
    return "\r\n".join(lines).encode("latin-1")


def test_gunicorns_default_format_parses_back_to_the_request(backend, interface):
    server = start(backend, interface, f"--access-log-format={FORMAT}")
    try:
        answer = server.exchange(
            request("/sleep?ms=150", "Referer: http://ref.example/p", "User-Agent: probe/1.0", "X-Request-Id: r-77"),
        )
        assert answer.startswith(b"HTTP/1.1 200"), answer
        m = server.wait_for(LINE, 10)
    finally:
        stop_cleanly(server)
    assert m["h"] == "127.0.0.1" and m["l"] == "-" and m["u"] == "-"
    assert CLF_TIME.fullmatch(m["t"]), m["t"]
    assert m["r"] == "GET /sleep?ms=150 HTTP/1.1"
    assert (m["s"], m["b"]) == ("200", str(len(b"slept")))
    assert (m["f"], m["a"]) == ("http://ref.example/p", "probe/1.0")
    assert (m["o"], m["i"]) == ("yes", "r-77")
    # The app slept 150 ms between the head and the answer.
    assert 150_000 - TIMER_SLACK_US <= int(m["D"]) < 10_000_000, m["D"]
    assert int(m["p"]) != server.proc.pid, "written by the worker that served it, not the supervisor"


def test_json_lines(backend, interface):
    server = start(backend, interface, "--access-log-format=json")
    try:
        server.exchange(request("/x?a=1", "User-Agent: j/2"))
        server.exchange(request("/sleep?ms=50"))
        server.wait_for(r'"path":"/sleep"', 10)
    finally:
        stop_cleanly(server)
    lines = [json.loads(line[line.index("{"):]) for line in server.output.splitlines() if '"duration_us"' in line]
    assert len(lines) == 2, server.output
    first, second = lines
    assert set(first) == {
        "time", "remote_addr", "remote_port", "method", "path", "query", "protocol",
        "status", "bytes", "referer", "user_agent", "duration_us", "pid",
    }
    assert first["remote_addr"] == "127.0.0.1" and isinstance(first["remote_port"], int)
    assert (first["method"], first["path"], first["query"], first["protocol"]) == ("GET", "/x", "a=1", "HTTP/1.1")
    assert (first["status"], first["bytes"], first["user_agent"], first["referer"]) == (200, 5, "j/2", None)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z", first["time"]), first["time"]
    assert second["duration_us"] >= 50_000 - TIMER_SLACK_US


def slow_download(server, target: str) -> "re.Match[str]":
    """GET `target` (16 MiB), taking none of it for a second: no line before
    the client has it all (a line written when the answer was queued would
    be out by then), and its duration covers the wait."""
    path = target.split("?")[0]
    with server.connect() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        sock.sendall(request(target))
        time.sleep(1.0)
        assert f"ACCESS {path} " not in server.output, "logged before the client took the answer"
        received = 0
        while True:
            data = sock.recv(1 << 20)
            if not data:
                break
            received += len(data)
    assert received > 16 << 20
    m = server.wait_for(rf"ACCESS {re.escape(path)} (\d+) (\d+)$", 10)
    assert int(m.group(1)) == 16 << 20
    # Its clock starts when the server has read the request, a little after
    # the client's sleep began (seen: 998 ms on a loaded machine); a line
    # written when the answer was queued would say a few milliseconds.
    assert int(m.group(2)) >= 900_000, m.group(0)
    return m


def test_the_line_waits_for_the_last_byte(backend, interface):
    server = start(backend, interface, "--access-log-format=ACCESS %(U)s %(B)s %(D)s")
    try:
        slow_download(server, "/big?mib=16")
    finally:
        stop_cleanly(server)


def test_an_answer_whose_end_comes_after_its_last_byte_is_logged_at_its_end(backend, interface):
    """The answer's bytes all went out before the app ended it (its last
    event carries none): the line is due when the end comes, with no byte
    left to send and the connection kept alive. (The first design waited
    for a send that never came: the line appeared only at the close.)"""
    server = start(backend, interface, "--access-log-format", FORMAT)
    try:
        with server.connect() as sock:
            sock.sendall(b"GET /linger?ms=300 HTTP/1.1\r\nHost: t\r\n\r\n")
            answer = b""
            while not answer.endswith(b"lingered"):
                data = sock.recv(1 << 16)
                assert data, answer
                answer += data
            line = server.wait_for(r'ACCESS .*"GET /linger\?ms=300 HTTP/1.1" 200 8 ', 3)
            assert int(LINE.search(line.string).group("D")) >= 250_000, line.string
    finally:
        stop_cleanly(server)


def test_a_routes_line_waits_for_the_last_byte(backend, tmp_path):
    """A static file: the whole answer is queued at once (no app pacing it),
    so only the output offset tells when its last byte went."""
    (tmp_path / "big.bin").write_bytes(b"y" * (16 << 20))
    server = start(
        backend,
        "wsgi",
        "--access-log-format=ACCESS %(U)s %(B)s %(D)s",
        "--static-path-route=/static",
        f"--static-path-mount={tmp_path}",
    )
    try:
        slow_download(server, "/static/big.bin")
    finally:
        stop_cleanly(server)


def test_client_values_cannot_forge_a_line_or_a_field(backend):
    server = start(backend, "wsgi", f"--access-log-format={FORMAT}")
    forged = 'x" 200 5 "-" "y'
    try:
        # A quote to close the field early, a tab, and a byte outside ASCII
        # (obs-text, which a header value may carry).
        raw = request("/z", "User-Agent: " + forged + "\tz\xff", "X-Request-Id: r-1\"2")
        server.exchange(raw)
        m = server.wait_for(LINE, 10)
    finally:
        stop_cleanly(server)
    assert m["a"] == r'x\" 200 5 \"-\" \"y\x09z\xff', m.group(0)
    assert (m["r"], m["i"]) == ("GET /z HTTP/1.1", r'r-1\"2')
    assert len([line for line in server.output.splitlines() if "ACCESS" in line]) == 1


def test_the_default_line_is_unchanged(backend):
    server = start(backend, "wsgi", "--access-log")
    try:
        server.exchange(request("/q?x=1"))
        m = server.wait_for(r'(\S+) - - \[([^\]]+)\] "GET /q\?x=1 HTTP/1\.1" 200 5$', 10)
    finally:
        stop_cleanly(server)
    assert m.group(1) == "127.0.0.1" and CLF_TIME.fullmatch(m.group(2))


@pytest.mark.parametrize("spec, message", [("%(h)s %(zz)s", "unknown atom %(zz)s"), ("100%", "'%'")])
def test_a_bad_format_is_a_one_line_usage_error(spec, message):
    result = run_m0serve(f"--access-log-format={spec}", "plain:hello")
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--access-log-format" in lines[0] and message in lines[0], result.stderr
