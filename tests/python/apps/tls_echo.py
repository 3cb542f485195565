"""What the TLS tests ask of an app: the scheme and the TLS facts it was
told, an upload's length and digest, a streamed answer, and (ASGI) a
WebSocket echo. The same routes as WSGI (`wsgi`) and ASGI (`asgi`)."""

import hashlib
import json
import os


def _facts(path, scheme, client, tls, body):
    if path == "/upload":
        return {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    return {"scheme": scheme, "client": client, "tls": tls, "pid": os.getpid()}


def wsgi(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return (b"%06d\n" % i for i in range(20000))
    body = environ["wsgi.input"].read()
    client = [environ["REMOTE_ADDR"], int(environ["REMOTE_PORT"])]
    data = json.dumps(_facts(path, environ["wsgi.url_scheme"], client, None, body)).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": json.dumps({
            "scheme": scope["scheme"], "tls": scope["extensions"].get("tls")})})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": message.get("text"), "bytes": message.get("bytes")})
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for i in range(0, 20000, 1000):
            chunk = b"".join(b"%06d\n" % j for j in range(i, i + 1000))
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    client = list(scope["client"])
    data = json.dumps(_facts(scope["path"], scope["scheme"], client, scope["extensions"].get("tls"), body)).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
