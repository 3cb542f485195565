"""HTTP/2 end to end with real clients, on both backends: curl over TLS
(ALPN h2) and in clear text (prior knowledge), httpx with http2=True, and
the Python h2 library for raw frames (a rapid reset flood, a CONTINUATION
flood, a client that offers HTTP/1.1 alone), with WSGI and ASGI apps."""

from __future__ import annotations

import hashlib
import json
import socket
import ssl
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import httpx
import pytest
import trustme

APPS = {
    "wsgi": ("h2_app:wsgi",),
    "asgi": ("h2_app:asgi", "--interface=asgi"),
}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    root = tmp_path_factory.mktemp("h2pki")
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    paths = {}
    for name, data in (("ca.pem", ca.cert_pem.bytes()),
                       ("cert.pem", b"".join(b.bytes() for b in cert.cert_chain_pems)),
                       ("key.pem", cert.private_key_pem.bytes())):
        (root / name).write_bytes(data)
        paths[name] = str(root / name)
    return paths


def tls_flags(pki):
    return (f"--ssl-certfile={pki['cert.pem']}", f"--ssl-keyfile={pki['key.pem']}")


def curl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", "-sS", *args], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_curl_h2c_prior_knowledge_and_http11_on_one_port(serve, kind):
    server = serve(APPS[kind][0], *APPS[kind][1:])
    done = curl("--http2-prior-knowledge", "-H", "Cookie: a=1", "-H", "Cookie: b=2", "--data-binary", "hello",
                "-w", "\n%{http_version}", f"{server.url}/echo")
    body, version = done.stdout.rsplit("\n", 1)
    assert version == "2", done.stderr
    facts = json.loads(body)
    assert facts["version"] == ("HTTP/2" if kind == "wsgi" else "2")
    assert facts["host"] == server.url.split("//")[1]
    assert facts["cookie"] == "a=1; b=2"
    assert facts["sha256"] == hashlib.sha256(b"hello").hexdigest()
    # The same port still speaks HTTP/1.1 to a client that does.
    done = curl("--http1.1", "-w", "\n%{http_version}", f"{server.url}/echo")
    assert done.stdout.rsplit("\n", 1)[1] == "1.1"
    assert json.loads(done.stdout.rsplit("\n", 1)[0])["version"] in ("HTTP/1.1", "1.1")


def test_http_1_answers_a_preface_with_http11s_refusal(serve):
    server = serve(APPS["wsgi"][0], "--http=1")
    done = curl("--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", f"{server.url}/echo")
    assert done.stdout != "200"


def test_http_refuses_uvicorns_parser_names():
    from helpers import run_m0serve
    done = run_m0serve("--http=httptools", "x:app")
    assert done.returncode == 2
    assert "one HTTP/1.1 implementation" in done.stderr


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_httpx_many_streams_on_one_connection_over_tls(serve, pki, kind):
    server = serve(APPS[kind][0], *APPS[kind][1:], *tls_flags(pki))
    with httpx.Client(http2=True, verify=ssl.create_default_context(cafile=pki["ca.pem"]), timeout=20) as client:
        start = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda _: client.get(f"{server.url}/slow"), range(16)))
        took = time.monotonic() - start
        assert {a.http_version for a in answers} == {"HTTP/2"}
        assert {a.status_code for a in answers} == {200}
        if kind == "asgi":
            # Sixteen 0.3 s answers at once, not one after another.
            assert took < 3, took
        upload = b"u" * 3_000_000
        r = client.post(f"{server.url}/echo", content=upload)
        assert r.json()["sha256"] == hashlib.sha256(upload).hexdigest()
        r = client.get(f"{server.url}/stream")
        assert len(r.content) == 2_000_000
        r = client.get(f"{server.url}/healthz")
        assert r.status_code == 200 and r.http_version == "HTTP/2"
        r = client.get(f"{server.url}/nothing-here") if kind == "wsgi" else client.get(f"{server.url}/echo")
        assert r.http_version == "HTTP/2"


def test_connection_specific_fields_of_an_app_are_dropped(serve):
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:])
    done = curl("--http2-prior-knowledge", "-D", "-", "-o", "/dev/null", f"{server.url}/hop")
    head = done.stdout.lower()
    assert head.startswith("http/2 200"), done.stdout
    assert "x-kept: yes" in head
    for gone in ("connection:", "keep-alive:", "upgrade:"):
        assert gone not in head


def raw_connection(server):
    host, port = server.address
    sock = socket.create_connection((host, port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn


def read_until_closed(sock, conn, limit=10.0):
    """The events until the server closes; the GOAWAY's code, if any."""
    code = None
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not data:
            break
        try:
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ConnectionTerminated):
                    code = event.error_code
        except h2.exceptions.ProtocolError:
            break
    return code


def request_headers(server, path="/healthz"):
    return [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", "localhost")]


def bystander_ok(server):
    done = curl("--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", f"{server.url}/healthz")
    return done.stdout == "200"


@pytest.mark.parametrize("guard", ["on", "off"])
def test_rapid_reset_ends_the_connection_with_enhance_your_calm(serve, guard):
    env = {"M0_H2_RESET_GUARD": "0"} if guard == "off" else None
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:], env=env)
    sock, conn = raw_connection(server)
    for i in range(500):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, request_headers(server, "/slow"), end_stream=True)
        conn.reset_stream(sid)
    sock.sendall(conn.data_to_send())
    sock.settimeout(2)
    code = read_until_closed(sock, conn, limit=2)
    if guard == "off":
        # Negative arm: the 500 streams opened and cancelled, the connection kept.
        assert code is None
    else:
        assert code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
        time.sleep(0.2)
        assert "HTTP/2 connection ended" in server.output
    assert bystander_ok(server)


@pytest.mark.parametrize("limit", ["16K", "1G"])
def test_a_continuation_flood_is_cut_while_it_accumulates(serve, limit):
    """The header list is bounded while it accumulates; the negative arm, a
    limit far above what is sent, reads the whole MiB of it."""
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:], f"--http2-max-headers-size={limit}")
    sock, conn = raw_connection(server)
    sock.sendall(conn.data_to_send())
    # HEADERS without END_HEADERS, then CONTINUATION frames of a growing literal.
    header = bytes([0x82, 0x86, 0x84, 0x41, 0x01, ord("h"), 0x40, 0x01, ord("x"), 0x7F, 0x81, 0x80, 0x40])
    frame = lambda kind, flags, sid, payload: len(payload).to_bytes(3, "big") + bytes([kind, flags]) + sid.to_bytes(4, "big") + payload
    sock.sendall(frame(0x1, 0x0, 1, header))
    # Waiting 50 ms for an answer to each KiB, the negative arm would run
    # into --header-read-timeout (10 s) before its MiB is out.
    sock.settimeout(0.05 if limit == "16K" else 0.002)
    sent, closed = 0, False
    while sent < 1024 and not closed:  # 1 MiB if nothing stops it
        try:
            sock.sendall(frame(0x9, 0x0, 1, b"a" * 1024))
            sent += 1
            data = sock.recv(65536)
        except socket.timeout:
            continue
        except (BrokenPipeError, ConnectionResetError):
            break
        try:
            events = conn.receive_data(data) if data else []
        except h2.exceptions.ProtocolError:
            events = []
        closed = not data or any(isinstance(e, h2.events.ConnectionTerminated) for e in events)
    if limit == "1G":
        assert not closed and sent == 1024, (closed, sent, server.output[-800:])
    else:
        assert closed and sent <= 64, f"still reading one header block after {sent} KiB"
    assert bystander_ok(server)


def test_a_client_that_offers_only_http11_over_tls_gets_http11(serve, pki):
    server = serve(APPS["wsgi"][0], *tls_flags(pki))
    ctx = ssl.create_default_context(cafile=pki["ca.pem"])
    ctx.set_alpn_protocols(["http/1.1"])
    host, port = server.address
    with socket.create_connection((host, port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.selected_alpn_protocol() == "http/1.1"
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            assert tls.recv(100).startswith(b"HTTP/1.1 200")


def test_an_idle_connection_gets_a_goaway_after_the_keep_alive_timeout(serve):
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:], "--keep-alive-timeout=1")
    sock, conn = raw_connection(server)
    conn.send_headers(1, request_headers(server), end_stream=True)
    sock.sendall(conn.data_to_send())
    start = time.monotonic()
    code = read_until_closed(sock, conn, limit=5)
    assert code == h2.errors.ErrorCodes.NO_ERROR
    assert 0.8 < time.monotonic() - start < 4


def frames(data: bytes):
    """(type, flags, stream, payload) of each whole frame in `data`, and the rest."""
    out = []
    while len(data) >= 9:
        length = int.from_bytes(data[:3], "big")
        if len(data) < 9 + length:
            break
        out.append((data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7FFFFFFF, data[9:9 + length]))
        data = data[9 + length:]
    return out, data


def test_a_drain_sends_two_goaways_and_lets_the_open_stream_finish(serve):
    """RFC 9113 §6.8: GOAWAY with 2^31-1, a PING, then GOAWAY with the last
    stream processed; the stream in flight is answered whole. Raw frames:
    the Python h2 library takes the first GOAWAY as the connection's end."""
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:])
    sock, conn = raw_connection(server)
    conn.send_headers(1, request_headers(server, "/slow"), end_stream=True)
    sock.sendall(conn.data_to_send())
    time.sleep(0.1)
    server.proc.send_signal(15)
    goaways, answered, ended = [], False, False
    rest = b""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        data = sock.recv(65536)
        if not data:
            break
        got, rest = frames(rest + data)
        for kind, flags, stream, payload in got:
            if kind == 0x7:
                goaways.append(int.from_bytes(payload[:4], "big") & 0x7FFFFFFF)
            elif kind == 0x6 and not flags & 0x1:
                sock.sendall(len(payload).to_bytes(3, "big") + bytes([0x6, 0x1]) + bytes(4) + payload)
            elif kind == 0x1 and stream == 1:
                answered = True
            if stream == 1 and kind in (0x0, 0x1) and flags & 0x1:
                ended = True
    assert goaways[:2] == [2**31 - 1, 1], goaways
    assert answered and ended


def read_stream(sock, conn, stream_id, limit=5.0):
    """The response headers, body and trailers of one stream."""
    headers, body, trailers = None, b"", None
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        data = sock.recv(65536)
        if not data:
            break
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream_id:
                headers = dict(event.headers)
            elif isinstance(event, h2.events.DataReceived) and event.stream_id == stream_id:
                body += event.data
                conn.acknowledge_received_data(event.flow_controlled_length, stream_id)
            elif isinstance(event, h2.events.TrailersReceived) and event.stream_id == stream_id:
                trailers = dict(event.headers)
            elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream_id:
                return headers, body, trailers
        sock.sendall(conn.data_to_send())
    raise AssertionError(f"stream {stream_id} did not end")


def test_asgi_trailers_go_out_after_the_body_and_http11_drops_them(serve):
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:])
    sock, conn = raw_connection(server)
    conn.send_headers(1, request_headers(server, "/trailers") + [("te", "trailers")], end_stream=True)
    sock.sendall(conn.data_to_send())
    headers, body, trailers = read_stream(sock, conn, 1)
    assert headers[":status"] == "200" and body == b"abc"
    # Both trailers messages (more_trailers) in the one trailing HEADERS frame.
    assert trailers == {"x-digest": "ba7816bf", "x-count": "3"}
    # Trailers before the body is complete: refused to the app, nothing sent early.
    conn.send_headers(3, request_headers(server, "/trailers-early"), end_stream=True)
    sock.sendall(conn.data_to_send())
    _, body, trailers = read_stream(sock, conn, 3)
    assert b"before the body was complete" in body and trailers == {"x-refused": "yes"}
    # HTTP/1.1: the body is whole, the trailers dropped.
    r = httpx.get(f"{server.url}/trailers")
    assert r.status_code == 200 and r.content == b"abc" and "x-digest" not in r.headers


def pings_until_closed(sock, conn, answer, limit):
    """Reads for `limit` s, answering PINGs if `answer`: (PINGs seen, when
    the server closed or None)."""
    pings, start = 0, time.monotonic()
    sock.settimeout(0.1)
    while time.monotonic() - start < limit:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            data = b""
        if not data:
            return pings, time.monotonic() - start
        events = conn.receive_data(data)
        pings += sum(isinstance(e, h2.events.PingReceived) for e in events)
        if answer:
            sock.sendall(conn.data_to_send())
    return pings, None


@pytest.mark.parametrize("interval", [None, 200])
def test_keep_alive_pings_close_a_client_that_stops_answering(serve, interval):
    flags = [f"--http2-keep-alive-interval={interval}"] if interval else []
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:], "--keep-alive-timeout=30",
                   "--http2-keep-alive-timeout=1", *flags)
    # A client that answers is pinged every interval and kept.
    sock, conn = raw_connection(server)
    pings, closed = pings_until_closed(sock, conn, answer=True, limit=1.5)
    assert closed is None
    if interval is None:
        assert pings == 0
        # Negative arm: no PING, so a silent client is never found out.
        sock2, conn2 = raw_connection(server)
        assert pings_until_closed(sock2, conn2, answer=False, limit=2) == (0, None)
        return
    assert 3 <= pings <= 8, pings
    # One that stops answering is closed a timeout after the PING.
    sock2, conn2 = raw_connection(server)
    pings, closed = pings_until_closed(sock2, conn2, answer=False, limit=4)
    assert pings == 1 and closed is not None and 1.0 < closed < 2.5, (pings, closed)


def raw_frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


USELESS = (raw_frame(0x4, 0, 0) + raw_frame(0x6, 0, 0, bytes(8)) + raw_frame(0x2, 0, 3, bytes([0, 0, 0, 1, 16]))
           + raw_frame(0x8, 0, 0, (1).to_bytes(4, "big")) + raw_frame(0xFA, 0, 0, b"abc"))


def flood(server, limit_bytes: int, mix: bytes = USELESS):
    """Opens stream 1 (a body still to come), then sends `mix` — by default
    frames that carry nothing: SETTINGS, PING, PRIORITY, WINDOW_UPDATE, an
    unknown type — while a thread reads what comes back: (bytes sent, the
    GOAWAY's code or None)."""
    import threading
    sock, conn = raw_connection(server)
    conn.send_headers(1, [(":method", "POST")] + request_headers(server, "/slow")[1:])
    sock.sendall(conn.data_to_send())
    found = {}

    def reader():
        # Millions of ACKs come back: parsed in place (no slicing per frame),
        # so the GOAWAY behind them is reached on a busy machine too.
        buf, pos = bytearray(), 0
        while True:
            try:
                data = sock.recv(1 << 16)
            except OSError:
                return
            if not data:
                return
            buf += data
            while len(buf) - pos >= 9:
                length = int.from_bytes(buf[pos:pos + 3], "big")
                if len(buf) - pos < 9 + length:
                    break
                if buf[pos + 3] == 0x7:
                    found["goaway"] = int.from_bytes(buf[pos + 13:pos + 17], "big")
                pos += 9 + length
            del buf[:pos]
            pos = 0

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    chunk = mix * (65536 // len(mix))
    sent = 0
    try:
        while sent < limit_bytes and "goaway" not in found:
            sock.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass
    # The end of input; the reader goes on to the server's close.
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    thread.join(timeout=60)
    sock.close()
    return sent, found.get("goaway")


@pytest.mark.parametrize("guard", ["on", "off"])
def test_a_flood_of_frames_that_carry_nothing_ends_with_enhance_your_calm(serve, guard):
    env = {"M0_H2_FLOOD_GUARD": "0"} if guard == "off" else None
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:], env=env)
    sent, code = flood(server, 24 * 1024 * 1024)
    if guard == "off":
        # Negative arm: read on for as long as the client sends.
        assert code is None and sent >= 24 * 1024 * 1024
    else:
        # (How much was read before it is proto::h2's tests' to bound: here
        # the socket buffers and the reader thread's pace blur it.)
        assert code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
        time.sleep(0.2)
        assert "a flood of frames that carry nothing" in server.output
    assert bystander_ok(server)


def test_an_empty_data_flood_ends_with_enhance_your_calm(serve):
    """Empty DATA frames on an open stream (CVE-2019-9518): the h2 crate's
    own guard ends these, before the meter above would (so with it off too)."""
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:], env={"M0_H2_FLOOD_GUARD": "0"})
    sent, code = flood(server, 8 * 1024 * 1024, mix=raw_frame(0x0, 0, 1))
    assert code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM and sent < 8 * 1024 * 1024, (sent, code)
    assert bystander_ok(server)


@pytest.mark.parametrize("send_timeout", ["1", "30"])
def test_a_stream_whose_window_stays_shut_frees_its_thread_at_the_send_timeout(serve, send_timeout):
    """A client that opens its stream windows at 0 and never updates them:
    the WSGI app streaming to it holds the only Python thread until the
    send timeout resets the stream (CANCEL). The negative arm, a send
    timeout longer than the test, keeps the thread, so a bystander waits."""
    server = serve(APPS["wsgi"][0], "--blocking-threads=1", f"--send-timeout={send_timeout}")
    host, port = server.address
    sock = socket.create_connection((host, port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.local_settings = h2.settings.Settings(client=True, initial_values={
        h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    conn.initiate_connection()
    conn.send_headers(1, request_headers(server, "/stream"), end_stream=True)
    sock.sendall(conn.data_to_send())
    time.sleep(0.3)  # the app is answering, held by the shut window
    bystander = curl("--http2-prior-knowledge", "-m", "4", "-o", "/dev/null", "-w", "%{http_code}",
                     f"{server.url}/echo")
    reset = None
    sock.settimeout(0.5)
    for _ in range(6):
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.StreamReset):
                reset = event.error_code
        sock.sendall(conn.data_to_send())
        if reset is not None:
            break
    if send_timeout == "1":
        assert bystander.stdout == "200", bystander.stderr
        assert reset == h2.errors.ErrorCodes.CANCEL
    else:
        assert bystander.stdout != "200" and reset is None


def test_max_body_size_holds_on_http2_by_length_and_as_the_body_comes(serve, tmp_path):
    server = serve(APPS["wsgi"][0], "--max-body-size=1K")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 10_000)
    for extra in ([], ["-H", "Transfer-Encoding: chunked"]):  # the second sends no content-length
        done = curl("--http2-prior-knowledge", *extra, "--data-binary", f"@{big}", "-o", "/dev/null",
                    "-w", "%{http_code} %{http_version}", f"{server.url}/echo")
        assert done.stdout == "413 2", (extra, done.stdout, done.stderr)
    done = curl("--http2-prior-knowledge", "--data-binary", "small", "-w", "\n%{http_code}", f"{server.url}/echo")
    assert done.stdout.endswith("\n200")


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_request_timeout_answers_a_stream_504(serve, kind):
    server = serve(APPS[kind][0], *APPS[kind][1:], "--request-timeout=0.1")
    done = curl("--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                f"{server.url}/slow")
    assert done.stdout == "504 2", done.stderr
    # The connection's other streams, and the next ones, are served.
    with httpx.Client(http2=True, timeout=10) as client:
        assert client.get(f"{server.url}/echo").status_code == 200
    time.sleep(0.2)
    assert "ran past --request-timeout" in server.output


def test_backpressure_counts_streams_and_queues_them_without_loss(serve):
    """--backpressure 1 with one thread: the streams of one connection wait
    their turn for the app (the core retries each refused call) and all are
    answered, one at a time."""
    server = serve(APPS["wsgi"][0], "--blocking-threads=1", "--backpressure=1")
    host, port = server.address
    sock, conn = raw_connection(server)
    start = time.monotonic()
    for sid in (1, 3, 5, 7):
        conn.send_headers(sid, request_headers(server, "/slow"), end_stream=True)
    sock.sendall(conn.data_to_send())
    ended = set()
    deadline = time.monotonic() + 10
    while len(ended) < 4 and time.monotonic() < deadline:
        data = sock.recv(65536)
        assert data, "closed"
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.StreamEnded):
                ended.add(event.stream_id)
        sock.sendall(conn.data_to_send())
    assert ended == {1, 3, 5, 7}
    assert time.monotonic() - start >= 4 * 0.3 - 0.05


def tool(name: str, package: str) -> str:
    """The path of a client the test drives; skipped where it is missing
    (.ci/run installs them on the CI machine; the Debian sid chroot of the
    3.14/3.15 legs has none of them)."""
    import shutil
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"needs {name} (apt-get install {package})")
    return found


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_h2load_many_streams_on_few_connections_all_succeed(serve, pki, kind, scheme, tmp_path):
    h2load = tool("h2load", "nghttp2-client")
    body = tmp_path / "body"
    body.write_bytes(b"y" * 3000)  # each request POSTs it
    flags = tls_flags(pki) if scheme == "https" else ()
    server = serve(APPS[kind][0], *APPS[kind][1:], *flags)
    url = server.url.replace("http:", f"{scheme}:") + "/echo"
    done = subprocess.run([h2load, "-n", "2000", "-c", "4", "-m", "10", "-d", str(body), url],
                          capture_output=True, text=True, timeout=60)
    assert "Application protocol: h2" in done.stdout, done.stdout + done.stderr
    assert "2000 succeeded, 0 failed, 0 errored, 0 timeout" in done.stdout, done.stdout
    assert "status codes: 2000 2xx" in done.stdout


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_nghttp_fetches_with_prior_knowledge_and_over_alpn(serve, pki, scheme):
    nghttp = tool("nghttp", "nghttp2-client")
    flags = tls_flags(pki) if scheme == "https" else ()
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:], *flags)
    url = server.url.replace("http:", f"{scheme}:")
    done = subprocess.run([nghttp, "-v", "-H", "cookie: a=1", "-H", "cookie: b=2", f"{url}/echo"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ":status: 200" in done.stdout
    body = json.loads(done.stdout[done.stdout.index('{"version"'):].split("\n")[0].split("}")[0] + "}")
    assert body["version"] == "2" and body["cookie"] == "a=1; b=2"
    # Its stream statistics: a 2 MB answer streamed whole.
    done = subprocess.run([nghttp, "-ns", f"{url}/stream"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "/stream" in done.stdout, done.stdout + done.stderr


PAGE = """<!doctype html><html><head><link rel="stylesheet" href="app.css"></head>
<body><img src="logo.svg"><script src="app.js"></script></body></html>"""
SCRIPT = """fetch('/echo').then(r => r.json()).then(j => {
  document.body.setAttribute('data-version', j.version);
  document.body.setAttribute('data-width', getComputedStyle(document.body).width);
});"""


def test_chromium_loads_a_page_and_its_assets_over_h2(serve, pki, tmp_path):
    chromium = tool("chromium", "chromium")
    static = tmp_path / "site"
    static.mkdir()
    (static / "index.html").write_text(PAGE)
    (static / "app.css").write_text("body { width: 321px; }")
    (static / "app.js").write_text(SCRIPT)
    (static / "logo.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"/>')
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:], *tls_flags(pki), "--static-path-route=/site",
                   f"--static-path-mount={static}", "--access-log-format=%(H)s %(U)s %(s)s")
    url = server.url.replace("http:", "https:") + "/site/index.html"
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--ignore-certificate-errors",
                           "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
                           "--virtual-time-budget=5000", "--dump-dom", url],
                          capture_output=True, text=True, timeout=90)
    assert 'data-version="2"' in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert 'data-width="321px"' in done.stdout
    time.sleep(0.3)
    lines = [line for line in server.output.splitlines() if " /site/" in line or " /echo " in line]
    for path in ("/site/index.html", "/site/app.css", "/site/app.js", "/site/logo.svg", "/echo"):
        assert any(line.endswith(f"HTTP/2 {path} 200") for line in lines), (path, lines)


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_h2c_behind_a_proxy_protocol_preamble(serve, kind):
    """A load balancer speaking PROXY protocol and h2c end to end: the
    preamble names the client, then the preface is sniffed; HTTP/1.1 after a
    preamble still works."""
    server = serve(APPS[kind][0], *APPS[kind][1:], "--proxy-protocol")
    host, port = server.address
    sock = socket.create_connection((host, port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    conn.send_headers(1, request_headers(server, "/echo"), end_stream=True)
    sock.sendall(b"PROXY TCP4 203.0.113.7 127.0.0.1 40123 8000\r\n" + conn.data_to_send())
    headers, body, _ = read_stream(sock, conn, 1)
    assert headers[":status"] == "200"
    facts = json.loads(body)
    assert facts["client"] == "203.0.113.7" and facts["version"] in ("HTTP/2", "2")
    sock.close()
    done = socket.create_connection((host, port), timeout=10)
    done.sendall(b"PROXY TCP4 203.0.113.8 127.0.0.1 40124 8000\r\nGET /echo HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    data = b""
    while chunk := done.recv(65536):
        data += chunk
    assert data.startswith(b"HTTP/1.1 200") and b"203.0.113.8" in data


def test_the_last_stream_id_is_served_and_none_can_follow(serve):
    """Stream-ID exhaustion: a client may jump to 2^31-1, the last stream
    it can open; it is answered, and a stream after it (an ID that goes
    back) ends the connection with PROTOCOL_ERROR; others are served."""
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:])
    sock, conn = raw_connection(server)
    last = 2**31 - 1
    conn.send_headers(last, request_headers(server, "/echo"), end_stream=True)
    sock.sendall(conn.data_to_send())
    headers, _, _ = read_stream(sock, conn, last)
    assert headers[":status"] == "200"
    # HEADERS on stream 1 (END_STREAM|END_HEADERS, `GET /` from the static table).
    sock.sendall(raw_frame(0x1, 0x5, 1, bytes([0x82, 0x86, 0x84, 0x41, 0x01, ord("h")])))
    assert read_until_closed(sock, conn) == h2.errors.ErrorCodes.PROTOCOL_ERROR
    assert bystander_ok(server)


@pytest.mark.parametrize("limit", ["64K", "1G"])
def test_an_hpack_bomb_is_counted_by_its_decoded_size(serve, limit):
    """One 4 KB field in HPACK's dynamic table, then 200 one-byte references
    to it: 4 KB sent, 800 KB decoded. The decoded size is held to the limit:
    so far past it, h2 ends the connection (GOAWAY ENHANCE_YOUR_CALM, its
    "header_list_way_too_big"); the negative arm, a limit above it, answers."""
    server = serve(APPS["asgi"][0], *APPS["asgi"][1:], f"--http2-max-headers-size={limit}")
    sock, conn = raw_connection(server)
    bomb = [("x-bomb", "b" * 4000)] * 200
    conn.send_headers(1, request_headers(server, "/echo") + bomb, end_stream=True)
    sent = conn.data_to_send()
    assert len(sent) < 8000
    sock.sendall(sent)
    if limit == "64K":
        assert read_until_closed(sock, conn) == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    else:
        headers, _, _ = read_stream(sock, conn, 1)
        assert headers[":status"] == "200"
    assert bystander_ok(server)
