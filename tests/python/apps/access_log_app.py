"""Apps for the access log's tests: the same answers over WSGI and ASGI.

`/sleep?ms=N` answers after N ms; `/big?mib=N` answers N MiB; anything
else answers `hello`. Every answer carries `X-Served: yes`."""

import asyncio
import time
from urllib.parse import parse_qs


def _answer(path, query):
    args = {k: v[0] for k, v in parse_qs(query).items()}
    if path == "/big":
        return b"x" * (int(args["mib"]) << 20), 0.0
    if path == "/sleep":
        return b"slept", int(args["ms"]) / 1000
    return b"hello", 0.0


def wsgi(environ, start_response):
    body, delay = _answer(environ["PATH_INFO"], environ["QUERY_STRING"])
    time.sleep(delay)
    start_response("200 OK", [("Content-Length", str(len(body))), ("X-Served", "yes")])
    return [body]


async def asgi(scope, receive, send):
    if scope["type"] != "http":
        return
    body, delay = _answer(scope["path"], scope["query_string"].decode())
    await asyncio.sleep(delay)
    headers = [(b"content-length", str(len(body)).encode()), (b"x-served", b"yes")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
