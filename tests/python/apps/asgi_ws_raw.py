"""A raw ASGI WebSocket app (no framework), the same routes as ws_routes.py:

- ``/ws/echo``: accepts (choosing ``chat.v2`` when offered, with its own
  ``x-echo`` field and two of the handshake's, which the server drops), echoes text and
  binary messages; the text ``close:CODE:REASON`` makes it close with that
  code and reason. ``?record=PATH``: the disconnect it received is written
  there as JSON (``{"code": ..., "reason": ...}``).
- ``/ws/reject``: closes before accepting (the client sees 403).
- ``/ws/protocol-field?choose=P``: accepts with ``P`` in a
  ``Sec-WebSocket-Protocol`` field of its headers, no ``subprotocol`` (a
  field per ``choose``), then closes; what ``send`` raised, if it did, is
  written to ``?record=PATH``.
- ``/ws/deny``: a denial response (401, ``denied``) through the
  ``websocket.http.response`` extension.
- ``/ws/flood?mib=N&record=PATH``: sends N binary messages of 1 MiB, writing
  how many ``send()`` took so far to PATH after each (flow control).
- a plain HTTP request (an upgrade under ``--no-ws``): 426 ``http scope``.
- anything else: the scope, as JSON text, then closes.
"""

import json
import os
from urllib.parse import parse_qs


def query(scope, name):
    return parse_qs(scope["query_string"].decode()).get(name, [None])[0]


def write(path, value):
    with open(path + ".tmp", "w") as f:
        json.dump(value, f)
    os.replace(path + ".tmp", path)


def record(scope, message):
    path = query(scope, "record")
    if path:
        write(path, {"code": message["code"], "reason": message.get("reason", "")})


async def flood(scope, receive, send):
    await send({"type": "websocket.accept"})
    mib, path = int(query(scope, "mib")), query(scope, "record")
    chunk = b"x" * (1 << 20)
    for sent in range(1, mib + 1):
        await send({"type": "websocket.send", "bytes": chunk})
        write(path, sent)
    await send({"type": "websocket.close", "code": 1000})


async def echo(scope, receive, send):
    subprotocol = "chat.v2" if "chat.v2" in scope["subprotocols"] else None
    # Besides its own field, the fields the handshake owns, which the server
    # must drop: a second Sec-WebSocket-Accept fails the client's handshake,
    # and an extension the server did not agree to breaks its framing.
    forged = [[b"sec-websocket-accept", b"forged"], [b"Sec-WebSocket-Extensions", b"permessage-deflate"]]
    await send({"type": "websocket.accept", "subprotocol": subprotocol, "headers": [[b"x-echo", b"yes"], *forged]})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            record(scope, message)
            return
        text = message.get("text")
        if text is not None and text.startswith("close:"):
            _, code, reason = text.split(":", 2)
            await send({"type": "websocket.close", "code": int(code), "reason": reason})
            record(scope, await receive())
            return
        if text is not None:
            await send({"type": "websocket.send", "text": text})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})


async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 426,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"10")]})
        await send({"type": "http.response.body", "body": b"http scope"})
        return
    if scope["type"] != "websocket":
        return
    assert (await receive())["type"] == "websocket.connect"
    path = scope["path"]
    if path == "/ws/echo":
        await echo(scope, receive, send)
    elif path == "/ws/flood":
        await flood(scope, receive, send)
    elif path == "/ws/protocol-field":
        chosen = parse_qs(scope["query_string"].decode(), keep_blank_values=True)["choose"]
        fields = [[b"sec-websocket-protocol", p.encode()] for p in chosen]
        try:
            await send({"type": "websocket.accept", "headers": fields})
        except ValueError as e:
            write(query(scope, "record"), str(e))
            raise
        await send({"type": "websocket.close", "code": 1000})
    elif path == "/ws/reject":
        await send({"type": "websocket.close"})
    elif path == "/ws/deny":
        await send({"type": "websocket.http.response.start", "status": 401,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"6")]})
        await send({"type": "websocket.http.response.body", "body": b"denied"})
    else:
        await send({"type": "websocket.accept"})
        shown = {k: v for k, v in scope.items() if k not in ("state",)}
        shown["headers"] = [[k.decode(), v.decode()] for k, v in scope["headers"]]
        shown["raw_path"] = scope["raw_path"].decode()
        shown["query_string"] = scope["query_string"].decode()
        shown["state"] = dict(scope["state"])
        await send({"type": "websocket.send", "text": json.dumps(shown)})
        await send({"type": "websocket.close", "code": 1000})
