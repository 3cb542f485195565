"""What the HTTP/2 tests ask of an app, as WSGI (`wsgi`) and ASGI (`asgi`):
`/echo` answers what it was told (the protocol, Host, Cookie, the body's
length and digest), `/hop` sets the HTTP/1.1 connection fields HTTP/2 must
drop, `/stream` streams 2 MB in 1,000 pieces, `/slow` answers after 0.3 s;
ASGI's `/trailers` sends two trailer fields in two messages, where the
scope advertises the extension, and `/trailers-early` sends them before
its body is complete (an error the server must refuse)."""

import hashlib
import json
import time


def _facts(version, host, cookie, body, client=None):
    return json.dumps({"version": version, "host": host, "cookie": cookie, "client": client,
                       "length": len(body), "sha256": hashlib.sha256(body).hexdigest()}).encode()


HOP = [("Connection", "keep-alive"), ("Keep-Alive", "timeout=5"), ("Upgrade", "h2c"), ("X-Kept", "yes")]
PIECE = b"x" * 2000


def wsgi(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return (PIECE for _ in range(1000))
    if path == "/hop":
        start_response("200 OK", HOP + [("Content-Length", "2")])
        return [b"ok"]
    if path == "/slow":
        time.sleep(0.3)
    body = environ["wsgi.input"].read()
    data = _facts(environ["SERVER_PROTOCOL"], environ.get("HTTP_HOST"), environ.get("HTTP_COOKIE"), body,
                  environ.get("REMOTE_ADDR"))
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    path = scope["path"]
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(1000):
            await send({"type": "http.response.body", "body": PIECE, "more_body": True})
        await send({"type": "http.response.body"})
        return
    if path in ("/trailers", "/trailers-early"):
        assert "http.response.trailers" in scope["extensions"]
        await send({"type": "http.response.start", "status": 200, "trailers": True,
                    "headers": [(b"trailer", b"x-digest, x-count")]})
        more = path == "/trailers-early"
        await send({"type": "http.response.body", "body": b"abc", "more_body": more})
        try:
            await send({"type": "http.response.trailers", "headers": [(b"x-digest", b"ba7816bf")],
                        "more_trailers": True})
        except RuntimeError as e:
            await send({"type": "http.response.body", "body": str(e).encode()})
            await send({"type": "http.response.trailers", "headers": [(b"x-refused", b"yes")]})
            return
        await send({"type": "http.response.trailers", "headers": [(b"x-count", b"3")]})
        return
    if path == "/hop":
        headers = [(n.lower().encode(), v.encode()) for n, v in HOP]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    if path == "/slow":
        import asyncio
        await asyncio.sleep(0.3)
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = dict((k.decode(), v.decode()) for k, v in scope["headers"])
    data = _facts(scope["http_version"], headers.get("host"), headers.get("cookie"), body,
                  (scope.get("client") or [None])[0])
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": data})
