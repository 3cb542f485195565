"""Apps for the access log's tests: the same answers over WSGI and ASGI.

`/sleep?ms=N` answers after N ms; `/big?mib=N` answers N MiB; `/linger?ms=N`
sends all of `lingered` at once, then ends the answer N ms later (its last
event carries no bytes); anything else answers `hello`. Every answer carries `X-Served: yes`."""

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


def _linger(seconds):
    yield b"lingered"
    time.sleep(seconds)


def wsgi(environ, start_response):
    if environ["PATH_INFO"] == "/linger":
        ms = int(parse_qs(environ["QUERY_STRING"])["ms"][0])
        start_response("200 OK", [("Content-Length", "8"), ("X-Served", "yes")])
        return _linger(ms / 1000)
    body, delay = _answer(environ["PATH_INFO"], environ["QUERY_STRING"])
    time.sleep(delay)
    start_response("200 OK", [("Content-Length", str(len(body))), ("X-Served", "yes")])
    return [body]


async def asgi(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/linger":
        ms = int(parse_qs(scope["query_string"].decode())["ms"][0])
        headers = [(b"content-length", b"8"), (b"x-served", b"yes")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"lingered", "more_body": True})
        await asyncio.sleep(ms / 1000)
        await send({"type": "http.response.body", "body": b""})
        return
    body, delay = _answer(scope["path"], scope["query_string"].decode())
    await asyncio.sleep(delay)
    headers = [(b"content-length", str(len(body)).encode()), (b"x-served", b"yes")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
