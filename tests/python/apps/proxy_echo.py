"""Echo what the server says about the client and the URL (proxy headers,
the PROXY protocol): a WSGI app and an ASGI app answering the same JSON."""

import json


def _reply(start_response, facts):
    body = json.dumps(facts).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def wsgi(environ, start_response):
    return _reply(start_response, {
        "client": [environ["REMOTE_ADDR"], int(environ.get("REMOTE_PORT", "-1"))],
        "scheme": environ["wsgi.url_scheme"],
        "host": environ.get("HTTP_HOST"),
        "server": [environ["SERVER_NAME"], int(environ["SERVER_PORT"])],
    })


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    headers = dict(scope["headers"])
    body = json.dumps({
        "client": list(scope["client"]) if scope["client"] else None,
        "scheme": scope["scheme"],
        "host": headers.get(b"host", b"").decode("latin-1") or None,
        "server": list(scope["server"]),
    }).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
