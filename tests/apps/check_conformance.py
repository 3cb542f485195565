"""Drive tests/apps/wsgi_conformance.py served by m0serve and check each PEP 3333 point.

    python tests/apps/check_conformance.py 127.0.0.1:8000 [--root-path /mnt] [--loop-only]

--loop-only: the server runs the view on its core thread (--blocking-threads
0), which cannot write while the view runs: the check that a stream's first
chunk leaves before the generator ends is skipped.

Standard library only, bounded in time (every socket has a timeout). Exits 1
listing the failed checks. The pytest suite can import `CHECKS` and call each
`check(addr)`; each raises AssertionError with what went wrong.
"""

import hashlib
import http.client
import json
import socket
import sys
import time

TIMEOUT = 10.0
ROOT = ""


def pattern(size, offset=0):
    return bytes(i % 251 for i in range(offset, offset + size))


def request(addr, method, path, body=None, headers=None):
    host, port = addr
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    try:
        conn.request(method, ROOT + path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def get_json(addr, path, **kw):
    status, headers, data = request(addr, kw.pop("method", "GET"), path, **kw)
    assert status == 200, (path, status, data[:300])
    return json.loads(data)


def raw(addr, data, until_close=True):
    """Send raw bytes, return everything read until the server closes (or times out)."""
    with socket.create_connection(addr, timeout=TIMEOUT) as s:
        s.sendall(data)
        chunks, deadline = [], time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            chunks.append(chunk)
            if not until_close:
                break
        return b"".join(chunks)


def expect_500(addr, path):
    status, _, _ = request(addr, "GET", path)
    assert status == 500, (path, status)


def expect_cut(addr, path):
    """The head left, then the app failed: the connection must close early."""
    host, port = addr
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    try:
        conn.request("GET", ROOT + path)
        resp = conn.getresponse()
        try:
            resp.read()
        except http.client.IncompleteRead:
            return
        raise AssertionError("%s: the body was complete, the connection should have been cut" % path)
    finally:
        conn.close()


# ---- checks ----------------------------------------------------------------------


def check_environ(addr):
    e = get_json(
        addr,
        "/environ?a=1&b=%20x",
        headers={"X-Thing": "one", "Cookie": "a=1", "Content-Type": "text/x"},
    )
    assert e["REQUEST_METHOD"] == "GET"
    assert e["SCRIPT_NAME"] == ROOT and e["PATH_INFO"] == "/environ", e
    assert e["QUERY_STRING"] == "a=1&b=%20x", e["QUERY_STRING"]
    assert e["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert e["SERVER_PORT"] == str(addr[1]) and e["SERVER_NAME"], e
    assert e["REMOTE_ADDR"] == "127.0.0.1" and e["REMOTE_PORT"].isdigit(), e
    assert e["HTTP_X_THING"] == "one" and e["HTTP_COOKIE"] == "a=1"
    assert e["CONTENT_TYPE"] == "text/x" and "HTTP_CONTENT_TYPE" not in e
    assert "CONTENT_LENGTH" not in e or e["CONTENT_LENGTH"] in ("", "0"), e
    assert e["wsgi.version"] == [1, 0] and e["wsgi.url_scheme"] == "http"
    assert e["wsgi.multiprocess"] is False and e["wsgi.run_once"] is False
    assert isinstance(e["wsgi.multithread"], bool)
    assert e["wsgi.input_terminated"] is True and e["wsgi.file_wrapper.callable"] is True


def check_path_info_latin1(addr):
    e = get_json(addr, "/environ/caf%C3%A9%2Fx")
    # UTF-8 bytes, percent-decoded, seen as latin-1 chars (PEP 3333 "native strings")
    assert e["PATH_INFO"] == "/environ/caf\u00c3\u00a9/x", e["PATH_INFO"]


def check_duplicate_headers(addr):
    reply = raw(
        addr,
        b"GET " + ROOT.encode() + b"/environ HTTP/1.1\r\nHost: x\r\nX-Dup: a\r\nX-Dup: b\r\n"
        b"Cookie: c=1\r\nCookie: d=2\r\nX_Spoof: 1\r\nConnection: close\r\n\r\n",
    )
    e = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    # A comma alone, as wsgiref, Werkzeug, gunicorn and Granian join them.
    assert e["HTTP_X_DUP"] == "a,b", e["HTTP_X_DUP"]
    assert e["HTTP_COOKIE"] == "c=1; d=2", e["HTTP_COOKIE"]
    assert "HTTP_X_SPOOF" not in e, "a header with '_' must be dropped"


def check_http10(addr):
    reply = raw(addr, b"GET " + ROOT.encode() + b"/environ HTTP/1.0\r\n\r\n")
    e = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert e["SERVER_PROTOCOL"] == "HTTP/1.0"


def check_input_read(addr):
    body = b"0123456789" * 10
    r = get_json(addr, "/input/read", method="POST", body=body)
    assert r["body"].encode("latin-1") == body and r["sizes"] == [100]
    r = get_json(addr, "/input/read?n=-1", method="POST", body=body)
    assert r["sizes"] == [100]
    r = get_json(addr, "/input/read?n=30", method="POST", body=body)
    assert r["sizes"] == [30, 30, 30, 10, 0], r["sizes"]
    r = get_json(addr, "/input/read?n=30", method="POST", body=b"")
    assert r["sizes"] == [0]


def check_input_lines(addr):
    body = b"one\ntwo\n\nthree"
    r = get_json(addr, "/input/readline", method="POST", body=body)
    assert r["lines"] == ["one\n", "two\n", "\n", "three"], r
    r = get_json(addr, "/input/readline?n=2", method="POST", body=body)
    assert r["lines"] == ["on", "e\n", "tw", "o\n", "\n", "th", "re", "e"], r
    r = get_json(addr, "/input/readlines", method="POST", body=body)
    assert r["lines"] == ["one\n", "two\n", "\n", "three"] and r["rest"] == ""
    r = get_json(addr, "/input/readlines?hint=5", method="POST", body=body)
    assert r["lines"] == ["one\n", "two\n"] and r["rest"] == "\nthree", r
    r = get_json(addr, "/input/iter", method="POST", body=body)
    assert r["lines"] == ["one\n", "two\n", "\n", "three"]


def check_input_chunked(addr):
    body = b"hello chunked world"
    chunked = b"5\r\nhello\r\n8\r\n chunked\r\n6\r\n world\r\n0\r\n\r\n"
    reply = raw(
        addr,
        b"POST " + ROOT.encode() + b"/input/digest HTTP/1.1\r\nHost: x\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked,
    )
    r = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert r == {"sha256": hashlib.sha256(body).hexdigest(), "length": len(body)}, r
    # Received whole before the app runs, a chunked body has a CONTENT_LENGTH:
    # its de-chunked length (RFC 3875 §4.1.2), in memory or spilled to a file.
    big = pattern(2 << 20)
    big_chunked = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (big[i : i + 65536] for i in range(0, len(big), 65536)))
    for data, length in ((chunked, len(body)), (big_chunked + b"0\r\n\r\n", len(big))):
        reply = raw(
            addr,
            b"POST " + ROOT.encode() + b"/environ HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + data,
        )
        e = json.loads(reply.split(b"\r\n\r\n", 1)[1])
        assert e.get("CONTENT_LENGTH") == str(length), (length, e.get("CONTENT_LENGTH"))


def check_input_large(addr):
    body = pattern(3 << 20)
    r = get_json(addr, "/input/digest", method="POST", body=body)
    assert r == {"sha256": hashlib.sha256(body).hexdigest(), "length": len(body)}


def check_write(addr):
    status, headers, data = request(addr, "GET", "/write")
    assert status == 200 and data == b"written 1\nwritten 2\nreturned\n", data


def check_stream_first_chunk_early(addr):
    """The first chunk arrives before the generator ends (1 s later)."""
    host, port = addr
    with socket.create_connection(addr, timeout=TIMEOUT) as s:
        s.sendall(b"GET " + ROOT.encode() + b"/stream?n=2&delay=1.0 HTTP/1.1\r\nHost: x\r\n\r\n")
        start, got = time.monotonic(), b""
        while b"chunk 0" not in got:
            piece = s.recv(65536)
            assert piece, "closed before the first chunk"
            got += piece
        assert time.monotonic() - start < 0.8, "the first chunk waited for the generator"
        head = got.split(b"\r\n\r\n", 1)[0].lower()
        assert b"transfer-encoding: chunked" in head and b"content-length" not in head, head
        while not got.endswith(b"0\r\n\r\n"):
            piece = s.recv(65536)
            assert piece, "closed before the end"
            got += piece
        assert b"chunk 1" in got


def check_stream_with_length(addr):
    status, headers, data = request(addr, "GET", "/stream-cl?n=3&delay=0.05")
    assert data == b"chunk 0\nchunk 1\nchunk 2\n" and headers["content-length"] == "24"
    assert "transfer-encoding" not in headers


def check_list_gets_length(addr):
    status, headers, data = request(addr, "GET", "/close-count")
    assert "content-length" in headers and "transfer-encoding" not in headers
    status, headers, data = request(addr, "GET", "/empty")
    assert status == 200 and data == b"" and headers.get("content-length") == "0", headers


def check_empty_generator(addr):
    status, headers, data = request(addr, "GET", "/empty-generator")
    assert status == 200 and data == b""


def check_big(addr):
    size = 5 << 20
    status, headers, data = request(addr, "GET", "/big?size=%d" % size)
    assert len(data) == size and data[:65536] == pattern(65536)


def check_file(addr):
    size = 300_000
    status, headers, data = request(addr, "GET", "/file?size=%d" % size)
    assert status == 200 and data == pattern(size) and headers["content-length"] == str(size)
    status, headers, data = request(addr, "GET", "/file?size=%d&offset=1000" % size)
    assert data == pattern(size - 1000, 1000), "file_wrapper must start at the file's position"
    status, headers, data = request(addr, "GET", "/file?size=%d&offset=10&cl=100" % size)
    assert data == pattern(100, 10) and headers["content-length"] == "100"
    status, headers, data = request(addr, "GET", "/file?size=0")
    assert status == 200 and data == b""
    status, headers, data = request(addr, "GET", "/file-bytesio?size=10000")
    assert data == pattern(10000)


def check_head(addr):
    status, headers, data = request(addr, "HEAD", "/head-cl")
    assert status == 200 and data == b"" and headers["content-length"] == "5", headers
    status, headers, data = request(addr, "GET", "/head-cl")
    assert data == b"hello"


def check_statuses(addr):
    for code in (201, 404, 418, 503):
        status, _, data = request(addr, "GET", "/status/%d" % code)
        assert status == code and data == b"status %d\n" % code
    for code in (204, 304):
        status, headers, data = request(addr, "GET", "/status/%d" % code)
        assert status == code and data == b"" and "transfer-encoding" not in headers


def check_exc_info(addr):
    status, _, data = request(addr, "GET", "/exc-info")
    assert status == 500 and data == b"custom error page\n", (status, data)


def check_errors_stream(addr):
    assert get_json(addr, "/errors") == {"ok": True}


def check_close_always(addr):
    get_json(addr, "/reset")
    request(addr, "GET", "/closing?n=3")
    expect_500(addr, "/bad/raise-in-iter")
    expect_500(addr, "/bad/yield-str")
    # the client leaves mid-stream: close() must still be called
    with socket.create_connection(addr, timeout=TIMEOUT) as s:
        s.sendall(b"GET " + ROOT.encode() + b"/closing?n=50&delay=0.05 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100)
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        if get_json(addr, "/close-count")["closed"] == 4:
            return
        time.sleep(0.1)
    raise AssertionError("close() count %s, want 4" % get_json(addr, "/close-count"))


def check_bad_apps(addr):
    for path in (
        "/bad/raise",
        "/bad/raise-after-start",
        "/bad/str",
        "/bad/bytes",
        "/bad/none",
        "/bad/twice",
        "/bad/no-start",
        "/bad/status",
        "/bad/header-newline",
        "/bad/header-bytes",
        "/bad/hop-by-hop",
    ):
        expect_500(addr, path)
    for path in ("/bad/raise-mid-stream", "/bad/exc-info-after-sent", "/bad/length-short"):
        expect_cut(addr, path)
    status, headers, data = request(addr, "GET", "/bad/length-long")
    assert status == 200 and data == b"012", data
    # and the server still serves
    assert get_json(addr, "/close-count")["closed"] >= 0


def check_keep_alive(addr):
    host, port = addr
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    try:
        for path in ("/environ", "/stream?n=2&delay=0", "/write", "/empty", "/file?size=1000"):
            conn.request("GET", ROOT + path)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200, (path, resp.status)
    finally:
        conn.close()


CHECKS = [v for k, v in sorted(globals().items()) if k.startswith("check_")]


def main():
    global ROOT
    args = sys.argv[1:]
    if "--root-path" in args:
        i = args.index("--root-path")
        ROOT = args[i + 1]
        del args[i : i + 2]
    checks = CHECKS
    if "--loop-only" in args:
        args.remove("--loop-only")
        checks = [c for c in CHECKS if c is not check_stream_first_chunk_early]
    host, _, port = (args[0] if args else "127.0.0.1:8000").rpartition(":")
    addr = (host, int(port))
    failed = []
    for check in checks:
        try:
            check(addr)
            print("ok    ", check.__name__)
        except Exception as e:  # noqa: BLE001 - report every failure, keep going
            failed.append(check.__name__)
            print("FAIL  ", check.__name__, "-", type(e).__name__, e)
    print("%d checks, %d failed" % (len(checks), len(failed)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
