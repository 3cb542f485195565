"""Answers of a chosen size, for the large-answer benchmark (bench/answers.sh).

GET /bytes?kb=N answers N KiB of application/octet-stream, one body piece,
the same bytes object every time (the app's own cost stays out of the way).
`wsgi` and `asgi` serve the same answers.
"""

_bodies = {}


def _body(query: bytes) -> bytes:
    kb = 1
    for pair in query.split(b"&"):
        if pair.startswith(b"kb="):
            kb = int(pair[3:])
    body = _bodies.get(kb)
    if body is None:
        body = _bodies[kb] = b"x" * (kb * 1024)
    return body


def wsgi(environ, start_response):
    body = _body(environ.get("QUERY_STRING", "").encode("latin-1"))
    start_response("200 OK", [("Content-Type", "application/octet-stream"),
                              ("Content-Length", str(len(body)))])
    return [body]


async def asgi(scope, receive, send):
    if scope["type"] != "http":
        return
    body = _body(scope["query_string"])
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/octet-stream"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
