"""A WSGI app whose routes exercise each point of PEP 3333 a server must get right.

Serve it with `m0serve tests.apps.wsgi_conformance:app` (or `--app-dir tests/apps
wsgi_conformance:app`). Routes whose behaviour is valid WSGI go through
`wsgiref.validate.validator`, which raises AssertionError (a 500) on anything the
server does wrong; the `/bad/*` routes are deliberately broken apps, served
unwrapped, for which the server must answer 500 (or cut the connection once the
head has left) and keep serving.

Routes (all answer JSON unless said otherwise):
  /environ, /environ/...    the environ's CGI and wsgi.* entries
  /input/read?n=N          body read in read(N) pieces (N=-1: read(-1); none: read())
  /input/readline?n=N      body as readline() lines (readline(N) when given)
  /input/readlines?hint=H  readlines(H)
  /input/iter              for line in wsgi.input
  /input/digest            sha256 and length of the body, read 64 KiB at a time
  /write                   body sent through write(), then a last item
  /stream?n=N&delay=S      N chunks, S seconds apart (chunked: no Content-Length)
  /stream-cl?n=N&delay=S   the same with a Content-Length
  /big?size=B              B bytes in 64 KiB items (flow control)
  /file?size=B&offset=O&cl=L  wsgi.file_wrapper of a temp file of B bytes (pattern
                           bytes(i % 251)), seeked to O, Content-Length L if given
  /file-bytesio?size=B     file_wrapper of a BytesIO (iterated, not zero-copy)
  /empty                   an empty list (Content-Length: 0)
  /empty-generator         a generator yielding only b"" (headers at the end)
  /head-cl                 Content-Length: 5 and a body only for GET (HEAD-correct)
  /status/CODE             that status, empty body for 204/304
  /exc-info                an error caught before the body: start_response again
                           with exc_info, 500 and a custom body
  /errors                  writes to wsgi.errors
  /closing?n=N&delay=S     a slow iterable whose close() is counted
  /close-count             {"closed": count of close() calls on /closing and the bad routes}
  /reset                   reset the counter
Deliberately bad (unvalidated):
  /bad/raise               raises before start_response
  /bad/raise-after-start   calls start_response, then raises
  /bad/raise-in-iter       the iterable raises before any body (counted close)
  /bad/raise-mid-stream    yields a chunk, then raises (the connection is cut)
  /bad/exc-info-after-sent yields a chunk, then start_response(exc_info): re-raised
  /bad/str                 returns a str
  /bad/bytes               returns bytes instead of a list of bytes
  /bad/none                returns None
  /bad/yield-str           yields a str (counted close)
  /bad/twice               start_response twice without exc_info
  /bad/no-start            returns a body without calling start_response
  /bad/status              status "200" (no reason)
  /bad/header-newline      a header value with CR LF in it
  /bad/header-bytes        a header value given as bytes
  /bad/hop-by-hop          a Connection header
  /bad/length-short        Content-Length 10, 5 bytes of body (the connection is cut)
  /bad/length-long         Content-Length 3, 10 bytes of body (the excess is dropped)
"""

import hashlib
import io
import json
import os
import sys
import tempfile
import threading
import time
from urllib.parse import parse_qs
from wsgiref.validate import validator

_lock = threading.Lock()
_closed = 0


def _count_close():
    global _closed
    with _lock:
        _closed += 1


def _json(start_response, obj, status="200 OK"):
    body = json.dumps(obj, sort_keys=True).encode()
    start_response(
        status,
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]


def _query(environ):
    return {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _int(q, name, default):
    return int(q[name]) if name in q else default


def _pattern(size):
    return bytes(i % 251 for i in range(size))


class _Closing:
    """An iterable with a counted close(), optionally slow."""

    def __init__(self, chunks, delay=0.0, fail_at=None, item=None):
        self.chunks, self.delay, self.fail_at, self.item = chunks, delay, fail_at, item

    def __iter__(self):
        for i in range(self.chunks):
            if i == self.fail_at:
                raise RuntimeError("iteration failed on purpose")
            if i and self.delay:
                time.sleep(self.delay)
            yield self.item if self.item is not None else b"chunk %d\n" % i

    def close(self):
        _count_close()


# ---- valid routes -------------------------------------------------------------


def environ_route(environ, start_response):
    shown = {}
    for key, value in environ.items():
        if isinstance(value, (str, bool, int)) or value is None:
            shown[key] = value
        elif isinstance(value, tuple):
            shown[key] = list(value)
        else:
            shown[key] = type(value).__name__
    shown["wsgi.file_wrapper.callable"] = callable(environ.get("wsgi.file_wrapper"))
    return _json(start_response, shown)


def input_read(environ, start_response):
    q, stream = _query(environ), environ["wsgi.input"]
    pieces = []
    if "n" not in q:
        pieces.append(stream.read())
    else:
        n = int(q["n"])
        while True:
            piece = stream.read(n)
            pieces.append(piece)
            if not piece or n < 0:
                break
    body = b"".join(pieces)
    return _json(
        start_response,
        {"sizes": [len(p) for p in pieces], "body": body.decode("latin-1")},
    )


def input_readline(environ, start_response):
    q, stream = _query(environ), environ["wsgi.input"]
    lines = []
    while True:
        line = stream.readline(int(q["n"])) if "n" in q else stream.readline()
        if not line:
            break
        lines.append(line.decode("latin-1"))
    return _json(start_response, {"lines": lines})


def input_readlines(environ, start_response):
    q = _query(environ)
    stream = environ["wsgi.input"]
    first = stream.readlines(int(q["hint"])) if "hint" in q else stream.readlines()
    rest = stream.read(1 << 30)
    return _json(
        start_response,
        {"lines": [x.decode("latin-1") for x in first], "rest": rest.decode("latin-1")},
    )


def input_iter(environ, start_response):
    lines = [line.decode("latin-1") for line in environ["wsgi.input"]]
    return _json(start_response, {"lines": lines})


def input_digest(environ, start_response):
    digest, total, stream = hashlib.sha256(), 0, environ["wsgi.input"]
    while True:
        piece = stream.read(65536)
        if not piece:
            break
        digest.update(piece)
        total += len(piece)
    return _json(start_response, {"sha256": digest.hexdigest(), "length": total})


def write_route(environ, start_response):
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(b"written 1\n")
    write(b"written 2\n")
    return [b"returned\n"]


def stream_route(environ, start_response, with_length=False):
    q = _query(environ)
    n, delay = _int(q, "n", 3), float(q.get("delay", "0.2"))
    chunks = [b"chunk %d\n" % i for i in range(n)]
    headers = [("Content-Type", "text/plain")]
    if with_length:
        headers.append(("Content-Length", str(sum(map(len, chunks)))))
    start_response("200 OK", headers)

    def generate():
        for i, chunk in enumerate(chunks):
            if i:
                time.sleep(delay)
            yield chunk

    return generate()


def big_route(environ, start_response):
    size = _int(_query(environ), "size", 1 << 20)
    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    block = _pattern(65536)

    def generate():
        left = size
        while left > 0:
            piece = block[: min(left, len(block))]
            left -= len(piece)
            yield piece

    return generate()


def file_route(environ, start_response):
    q = _query(environ)
    size, offset = _int(q, "size", 100_000), _int(q, "offset", 0)
    f = tempfile.TemporaryFile()
    f.write(_pattern(size))
    f.seek(offset)
    headers = [("Content-Type", "application/octet-stream")]
    if "cl" in q:
        headers.append(("Content-Length", q["cl"]))
    start_response("200 OK", headers)
    return environ["wsgi.file_wrapper"](f, 8192)


def file_bytesio_route(environ, start_response):
    size = _int(_query(environ), "size", 100_000)
    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    return environ["wsgi.file_wrapper"](io.BytesIO(_pattern(size)), 4096)


def empty_route(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return []


def empty_generator_route(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])

    def generate():
        yield b""
        yield b""

    return generate()


def head_cl_route(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
    return [] if environ["REQUEST_METHOD"] == "HEAD" else [b"hello"]


def status_route(environ, start_response):
    code = int(environ["PATH_INFO"].rsplit("/", 1)[1])
    if code in (204, 304):
        start_response("%d No Body" % code, [])
        return []
    start_response("%d Some Reason" % code, [("Content-Type", "text/plain")])
    return [b"status %d\n" % code]


def exc_info_route(environ, start_response):
    try:
        raise ValueError("caught before the body")
    except ValueError:
        start_response("200 OK", [("Content-Type", "text/plain")])  # headers not sent yet
        start_response(
            "500 Internal Server Error",
            [("Content-Type", "text/plain")],
            sys.exc_info(),
        )
    return [b"custom error page\n"]


def errors_route(environ, start_response):
    errors = environ["wsgi.errors"]
    errors.write("conformance: a line on wsgi.errors\n")
    errors.writelines(["conformance: part one, ", "part two\n"])
    errors.flush()
    return _json(start_response, {"ok": True})


def closing_route(environ, start_response):
    q = _query(environ)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return _Closing(_int(q, "n", 3), float(q.get("delay", "0")))


def close_count_route(environ, start_response):
    return _json(start_response, {"closed": _closed})


def reset_route(environ, start_response):
    global _closed
    with _lock:
        _closed = 0
    return _json(start_response, {"closed": 0})


VALID = {
    "/environ": environ_route,
    "/input/read": input_read,
    "/input/readline": input_readline,
    "/input/readlines": input_readlines,
    "/input/iter": input_iter,
    "/input/digest": input_digest,
    "/write": write_route,
    "/stream": stream_route,
    "/stream-cl": lambda e, s: stream_route(e, s, with_length=True),
    "/big": big_route,
    "/file": file_route,
    "/file-bytesio": file_bytesio_route,
    "/empty": empty_route,
    "/empty-generator": empty_generator_route,
    "/head-cl": head_cl_route,
    "/exc-info": exc_info_route,
    "/errors": errors_route,
    "/closing": closing_route,
    "/close-count": close_count_route,
    "/reset": reset_route,
}

# Routes the validator cannot wrap although they are valid WSGI: read() with no
# argument (the validator insists on one), and the file wrapper (wrapping would
# hide it from the server, which is the point of the route).
UNVALIDATED = {"/input/read", "/file", "/file-bytesio"}

# ---- bad routes ---------------------------------------------------------------


def bad_raise(environ, start_response):
    raise RuntimeError("the app failed on purpose")


def bad_raise_after_start(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    raise RuntimeError("the app failed after start_response, on purpose")


def bad_raise_in_iter(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return _Closing(3, fail_at=0)


def bad_raise_mid_stream(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return _Closing(3, fail_at=1)


def bad_exc_info_after_sent(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])

    def generate():
        yield b"first chunk\n"
        try:
            raise ValueError("failed after the head left")
        except ValueError:
            start_response("500 Oops", [("Content-Type", "text/plain")], sys.exc_info())
        yield b"never sent\n"

    return generate()


def bad_str(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return "a str is not an iterable of bytes"


def bad_bytes(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return b"bytes, not a list of bytes"


def bad_none(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])


def bad_yield_str(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return _Closing(2, item="text")


def bad_twice(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"unreachable"]


def bad_no_start(environ, start_response):
    return [b"no start_response"]


def bad_status(environ, start_response):
    start_response("200", [("Content-Type", "text/plain")])
    return [b"unreachable"]


def bad_header_newline(environ, start_response):
    start_response("200 OK", [("X-Injected", "a\r\nSet-Cookie: evil=1")])
    return [b"unreachable"]


def bad_header_bytes(environ, start_response):
    start_response("200 OK", [("Content-Type", b"text/plain")])
    return [b"unreachable"]


def bad_hop_by_hop(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Connection", "close")])
    return [b"unreachable"]


def bad_length_short(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "10")])
    return _Closing(1, item=b"short")


def bad_length_long(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
    return [b"0123456789"]


BAD = {
    "/bad/raise": bad_raise,
    "/bad/raise-after-start": bad_raise_after_start,
    "/bad/raise-in-iter": bad_raise_in_iter,
    "/bad/raise-mid-stream": bad_raise_mid_stream,
    "/bad/exc-info-after-sent": bad_exc_info_after_sent,
    "/bad/str": bad_str,
    "/bad/bytes": bad_bytes,
    "/bad/none": bad_none,
    "/bad/yield-str": bad_yield_str,
    "/bad/twice": bad_twice,
    "/bad/no-start": bad_no_start,
    "/bad/status": bad_status,
    "/bad/header-newline": bad_header_newline,
    "/bad/header-bytes": bad_header_bytes,
    "/bad/hop-by-hop": bad_hop_by_hop,
    "/bad/length-short": bad_length_short,
    "/bad/length-long": bad_length_long,
}

_ROUTES = {
    path: (view if path in UNVALIDATED else validator(view)) for path, view in VALID.items()
}
_ROUTES.update(BAD)


def not_found(environ, start_response):
    body = b"no route for %s\n" % environ["PATH_INFO"].encode("latin-1")
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [body]


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path.startswith("/status/"):
        return validator(status_route)(environ, start_response)
    if path.startswith("/environ/"):
        return validator(environ_route)(environ, start_response)
    return _ROUTES.get(path, validator(not_found))(environ, start_response)


if __name__ == "__main__":  # a quick look with the stdlib server
    from wsgiref.simple_server import make_server

    port = int(os.environ.get("PORT", "8000"))
    make_server("127.0.0.1", port, app).serve_forever()
