"""ASGI apps on the executor (issue 5): raw ASGI callables for the protocol's
corners, and Starlette, FastAPI and Django ASGI apps for real, on each backend."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import time

import httpx
import pytest

from helpers import APPS, RawResponse, raw_get, run_m0serve

ASGI = ("--interface=asgi",)
UPLOAD = bytes(range(256)) * 4096  # 1 MiB: more than one body message


@pytest.fixture
def raw(serve):
    return serve("asgi_raw:app", *ASGI)


def test_the_scope(serve, tmp_path):
    server = serve("asgi_raw:app", *ASGI, "--root-path=/api")
    r = httpx.get(server.url + "/scope/caf%C3%A9%20x?a=1&b=%20", headers={"X-Custom": "Yes"}, timeout=10)
    assert r.status_code == 200
    scope = r.json()
    host, port = server.address
    assert scope["type"] == "http"
    assert scope["asgi"] == {"version": "3.0", "spec_version": "2.4"}
    assert scope["http_version"] == "1.1" and scope["method"] == "GET" and scope["scheme"] == "http"
    assert scope["path"] == "/scope/café x"
    assert scope["raw_path"] == "/scope/caf%C3%A9%20x"
    assert scope["query_string"] == "a=1&b=%20"
    assert scope["root_path"] == "/api"
    assert ["x-custom", "Yes"] in scope["headers"], "names lowercased, values as sent"
    assert scope["client"][0] == "127.0.0.1" and isinstance(scope["client"][1], int)
    assert scope["server"] == [host, port]
    assert scope["state"] == {"token": "from-lifespan"}, "the lifespan state reaches requests"
    assert scope["bytes_types"] == ["bytes", "bytes"]


def test_an_upload_arrives_in_several_messages(raw):
    r = httpx.post(raw.url + "/echo", content=iter([UPLOAD[i:i + 65536] for i in range(0, len(UPLOAD), 65536)]),
                   timeout=10)
    assert r.status_code == 200
    got = r.json()
    assert got["size"] == len(UPLOAD) and got["sha256"] == hashlib.sha256(UPLOAD).hexdigest()
    assert got["messages"] > 1, "the body is streamed, with more_body, not gathered first"
    # No body: one message, more_body false.
    assert httpx.post(raw.url + "/echo", timeout=10).json() == {
        "size": 0, "sha256": hashlib.sha256(b"").hexdigest(), "messages": 1}


def test_receive_and_send_work_where_coroutines_do(raw):
    # They return ready awaitables when they need not wait: tasks, wait_for,
    # gather and a hand-stepped send() must treat them as coroutines.
    body = b"abc" * 50000
    r = httpx.post(raw.url + "/awaitables", content=iter([body[i:i + 4096] for i in range(0, len(body), 4096)]),
                   timeout=10)
    assert r.status_code == 200 and r.content == body * 2


def test_a_stream_arrives_as_it_is_produced(raw, tmp_path):
    gate = tmp_path / "gate"
    sock, response = raw_get(raw, f"/stream?gate={gate}")
    with sock:
        assert response.status == 200 and response.header("transfer-encoding") == "chunked"
        assert response.read_chunk() == b"first\n"
        assert not gate.exists(), "the first chunk came before the app was let go on"
        gate.touch()
        assert response.read_chunk() == b"second\n"
        assert response.read_chunk() == b"third\n"
        assert response.read_chunk() is None


def test_a_slow_client_makes_send_wait(raw):
    mib = 64
    sock = raw.connect(timeout=20)
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        sock.sendall(b"GET /big?mib=%d HTTP/1.1\r\nHost: t\r\n\r\n" % mib)
        time.sleep(1.0)
        # The loop is not blocked: another client is served meanwhile.
        seen = httpx.get(raw.url + "/seen", timeout=10).json()
        assert not seen["done"]
        assert seen["sent"] < 16 << 20, f"send() did not wait for the client: {seen['sent']} bytes accepted"
        response = RawResponse(sock).read_head()
        assert response.header("content-length") == str(mib << 20)
        got = len(response.buffer)
        while got < mib << 20:
            data = sock.recv(1 << 20)
            assert data, "closed early"
            got += len(data)
    assert got == mib << 20
    deadline = time.monotonic() + 10
    while not httpx.get(raw.url + "/seen", timeout=10).json()["done"]:
        assert time.monotonic() < deadline


def test_receive_answers_http_disconnect_once_the_client_leaves(raw):
    sock = raw.connect()
    sock.sendall(b"GET /wait-disconnect HTTP/1.1\r\nHost: t\r\n\r\n")
    time.sleep(0.3)
    # A reset: the client is certainly gone (a plain FIN: the tests below).
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    deadline = time.monotonic() + 3
    while not httpx.get(raw.url + "/seen", timeout=10).json()["disconnected"]:
        assert time.monotonic() < deadline, "receive() never answered http.disconnect"
        time.sleep(0.05)


@pytest.mark.serial
def test_a_plain_close_after_the_request_is_http_disconnect_within_100_ms(raw):
    """A FIN (the client closed its socket) while the app awaits receive()
    after the body: http.disconnect within 100 ms, on both backends."""
    sock = raw.connect()
    sock.sendall(b"GET /wait-disconnect HTTP/1.1\r\nHost: t\r\n\r\n")
    time.sleep(0.3)
    closed_at = time.monotonic()
    sock.close()
    deadline = closed_at + 3
    while not (seen := httpx.get(raw.url + "/seen", timeout=10).json())["disconnected"]:
        assert time.monotonic() < deadline, "receive() never answered http.disconnect"
        time.sleep(0.02)
    took = seen["disconnected_at"] - closed_at
    assert took < 0.1, f"http.disconnect {took * 1000:.0f} ms after the close"


def test_a_half_closed_client_hears_disconnect_and_still_reads_the_answer(raw):
    sock = raw.connect()
    sock.sendall(b"GET /wait-disconnect?answer=1 HTTP/1.1\r\nHost: t\r\n\r\n")
    time.sleep(0.2)
    sock.shutdown(socket.SHUT_WR)
    sock.settimeout(5)
    got = b""
    while chunk := sock.recv(4096):
        got += chunk
    sock.close()
    assert got.startswith(b"HTTP/1.1 200"), got
    assert got.endswith(b"19\r\nanswered after disconnect\r\n0\r\n\r\n"), got


def _most_active_of_concurrent_slow_requests(server, n: int) -> int:
    """`n` clients at once ask for a slow answer; all are answered. Returns
    how many the app ran at once."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(n) as clients:
        answers = list(clients.map(lambda _: httpx.get(server.url + "/slow?s=0.3", timeout=10), range(n)))
    assert [r.status_code for r in answers] == [200] * n
    return httpx.get(server.url + "/seen", timeout=10).json()["most_active"]


def test_backpressure_bounds_the_requests_on_the_loop(serve):
    # Past the bound a call is refused and the connection waits unread; each
    # finished request lets one more in, so all are answered, one at a time.
    bounded = serve("asgi_raw:app", *ASGI, "--backpressure=1")
    assert _most_active_of_concurrent_slow_requests(bounded, 4) == 1
    # Without it (the default bound is far above 4) they run together.
    unbounded = serve("asgi_raw:app", *ASGI)
    assert _most_active_of_concurrent_slow_requests(unbounded, 4) == 4


def test_pathsend(raw, tmp_path):
    data = os.urandom(300_000)
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    r = httpx.get(raw.url + "/pathsend", params={"file": str(path)}, timeout=10)
    assert r.status_code == 200 and r.content == data


def test_header_pairs_may_be_lists_tuples_or_bytearrays_but_not_str(raw):
    r = httpx.get(raw.url + "/header-shapes", timeout=10)
    assert r.status_code == 200 and r.text == "shapes"
    assert (r.headers["x-list"], r.headers["x-tuple"], r.headers["x-bytearray"]) == ("1", "2", "3")
    r = httpx.get(raw.url + "/header-str", timeout=10)
    assert r.status_code == 500
    raw.wait_for("byte strings, not str")
    assert httpx.get(raw.url + "/header-shapes", timeout=10).status_code == 200


def test_failures_then_the_server_keeps_serving(raw):
    r = httpx.get(raw.url + "/raise-before", timeout=10)
    assert r.status_code == 500
    raw.wait_for("failed before the response start")
    for path in ("/raise-after", "/incomplete"):
        sock, response = raw_get(raw, path)
        with sock:
            assert response.status == 200
            if path == "/raise-after":
                assert response.read_chunk() == b"partial"
            with pytest.raises(AssertionError, match="connection closed"):
                while response.read_chunk() is not None:
                    pass
    raw.wait_for("failed mid-answer")
    raw.wait_for("returned without completing the response")
    assert httpx.get(raw.url + "/scope", timeout=10).status_code == 200


def test_lifespan_order_and_shutdown_after_requests(backend, tmp_path):
    from helpers import start_server, stop_cleanly

    log = tmp_path / "lifespan.log"
    server = start_server(backend, "asgi_raw:app", *ASGI, env={"LIFESPAN_LOG": str(log)})
    assert log.read_text() == "startup\n", "startup ran before the server listened"
    assert httpx.get(server.url + "/scope", timeout=10).json()["state"] == {"token": "from-lifespan"}
    stop_cleanly(server)
    assert log.read_text() == "startup\nrequest\nshutdown\n"


def test_a_failed_startup_exits_non_zero_with_the_message(backend):
    done = run_m0serve("--port=0", f"--backend={backend}", f"--app-dir={APPS}", *ASGI, "asgi_raw:failing_startup")
    assert done.returncode == 1, done.stderr
    assert "application startup failed: database unreachable" in done.stderr
    assert "listening on" not in done.stderr


def test_lifespan_auto_tolerates_an_app_without_it_and_on_requires_it(serve, backend):
    server = serve("asgi_raw:http_only", *ASGI)
    assert httpx.get(server.url + "/", timeout=10).json() == {"ok": True}
    server.wait_for("lifespan' protocol appears unsupported")
    done = run_m0serve("--port=0", f"--backend={backend}", f"--app-dir={APPS}", *ASGI, "--lifespan=on",
                       "asgi_raw:http_only")
    assert done.returncode == 1 and "only HTTP here" in done.stderr, done.stderr
    off = serve("asgi_raw:http_only", *ASGI, "--lifespan=off")
    assert httpx.get(off.url + "/", timeout=10).status_code == 200
    assert "unsupported" not in off.output


def test_a_task_still_running_at_the_graceful_timeout_is_cancelled(backend, tmp_path):
    from helpers import start_server

    mark = tmp_path / "mark"
    server = start_server(backend, "asgi_raw:app", *ASGI)  # --graceful-timeout=5
    sock = server.connect()
    with sock:
        sock.sendall(f"GET /hang?mark={mark} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        time.sleep(0.3)
        assert server.stop() == 0, server.output
    assert mark.read_text() == "cancelled"


@pytest.mark.parametrize("graceful,work,outcome", [("5", "1", "done"), ("0.3", "5", "cancelled")])
def test_work_after_the_answer_finishes_within_the_graceful_timeout(backend, tmp_path, graceful, work,
                                                                     outcome):
    # The ASGI call lasts past its response (Starlette's background tasks):
    # shutdown waits for it, up to the graceful timeout, before cancelling.
    from helpers import start_server

    mark = tmp_path / "mark"
    server = start_server(backend, "asgi_raw:app", *ASGI, graceful=graceful)
    answer = httpx.get(server.url + f"/background?s={work}&mark={mark}", timeout=10)
    assert answer.text == "answered"
    assert server.stop() == 0, server.output
    assert mark.read_text() == outcome


def test_request_tasks_come_from_the_apps_task_factory(serve):
    # Eager request tasks (Python 3.12+) must not bypass a factory the app set.
    server = serve("asgi_raw:with_task_factory", *ASGI)
    assert httpx.get(server.url + "/", timeout=10).json() == {"made_by_factory": True}


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_the_event_loop_flag(serve, event_loop):
    if event_loop == "uvloop":
        pytest.importorskip("uvloop")
    server = serve("asgi_raw:http_only", *ASGI, f"--loop={event_loop}", "--lifespan=off")
    server.wait_for(rf"\(ASGI 3, {event_loop}\)")
    assert httpx.get(server.url + "/", timeout=10).json() == {"ok": True}


# --- real frameworks ---------------------------------------------------------


def test_starlette(serve, tmp_path):
    pytest.importorskip("starlette")
    server = serve("starlette_app:app", *ASGI)
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/json", params={"a": "1"}).json() == {
            "hello": "starlette", "query": {"a": "1"}, "greeting": "hello from lifespan"}
        r = client.post("/upload", content=iter([UPLOAD[i:i + 65536] for i in range(0, len(UPLOAD), 65536)]))
        got = r.json()
        assert got["size"] == len(UPLOAD) and got["sha256"] == hashlib.sha256(UPLOAD).hexdigest()
        assert got["chunks"] > 1
        path = tmp_path / "page.txt"
        path.write_bytes(b"static text\n" * 1000)
        r = client.get("/file", params={"path": str(path)})
        assert r.status_code == 200 and r.content == path.read_bytes()
    gate = tmp_path / "gate"
    sock, response = raw_get(server, f"/stream?gate={gate}")
    with sock:
        assert response.read_chunk() == b"first\n"
        assert not gate.exists()
        gate.touch()
        assert response.read_chunk() == b"second\n"
        assert response.read_chunk() == b"third\n"
        assert response.read_chunk() is None


def test_fastapi(serve):
    pytest.importorskip("fastapi")
    server = serve("fastapi_app:app", *ASGI)
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/items/7", params={"q": "x"}).json() == {"item_id": 7, "q": "x"}
        assert client.post("/items", json={"name": "pen", "price": 2.0}).json() == {
            "name": "pen", "price_with_tax": 2.4}
        r = client.post("/items", json={"name": "pen"})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "price"]
        assert client.get("/items/notanint").status_code == 422


def test_django_asgi(serve):
    project = APPS / "django_project"
    server = serve("djproject.asgi:application", *ASGI, app_dir=project, env={"PYTHONPATH": str(APPS)})
    with httpx.Client(base_url=server.url, timeout=10) as client:
        r = client.get("/json/", params={"a": "1"})
        assert r.status_code == 200
        assert r.json() == {"hello": "django", "method": "GET", "query": {"a": "1"}, "script_name": "",
                            "path": "/json/"}
        r = client.post("/upload/", data={"name": "dj"}, files={"file": ("b.bin", UPLOAD, "application/octet-stream")})
        assert r.status_code == 200, r.text
        assert r.json()["sha256"] == hashlib.sha256(UPLOAD).hexdigest()
    server.wait_for("lifespan' protocol appears unsupported")
