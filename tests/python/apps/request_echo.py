"""An ASGI app that answers any HTTP request with what it was given, as JSON:
the method, the target (raw path and query), the version, the header fields
in order as received, and the body (test_gunicorn_corpus.py)."""

import json


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    seen = {
        "method": scope["method"],
        "raw_path": scope["raw_path"].decode("latin-1"),
        "query": scope["query_string"].decode("latin-1"),
        "version": scope["http_version"],
        "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]],
        "body": body.decode("latin-1"),
        "client": scope["client"][0] if scope.get("client") else None,
    }
    data = json.dumps(seen).encode()
    await send({
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
    })
    await send({"type": "http.response.body", "body": data})
