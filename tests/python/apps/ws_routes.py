"""The WebSocket routes of the Starlette and FastAPI apps, written once against
Starlette's ``WebSocket`` (FastAPI's is the same class): the same behaviour as
asgi_ws_raw.py (see there)."""

import json
import os

from starlette.responses import PlainTextResponse
from starlette.websockets import WebSocket, WebSocketDisconnect


def record(websocket: WebSocket, code: int, reason) -> None:
    path = websocket.query_params.get("record")
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump({"code": code, "reason": reason or ""}, f)
        os.replace(path + ".tmp", path)


async def echo(websocket: WebSocket) -> None:
    subprotocol = "chat.v2" if "chat.v2" in websocket.scope["subprotocols"] else None
    await websocket.accept(subprotocol=subprotocol, headers=[(b"x-echo", b"yes")])
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                record(websocket, message["code"], message.get("reason"))
                return
            text = message.get("text")
            if text is not None and text.startswith("close:"):
                _, code, reason = text.split(":", 2)
                await websocket.close(int(code), reason)
                message = await websocket.receive()
                record(websocket, message["code"], message.get("reason"))
                return
            if text is not None:
                await websocket.send_text(text)
            else:
                await websocket.send_bytes(message["bytes"])
    except WebSocketDisconnect as e:  # a send after the client left
        record(websocket, e.code, e.reason)


async def reject(websocket: WebSocket) -> None:
    await websocket.close()


async def deny(websocket: WebSocket) -> None:
    await websocket.send_denial_response(PlainTextResponse("denied", status_code=401))
