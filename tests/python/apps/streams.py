"""Streams for the drain tests (test_stream_drain.py): server-sent events
that end when `receive()` says the client has gone (as sse-starlette's
do), a finite stream that listens the same way, a slow plain answer, and a
WebSocket echo."""

import asyncio


async def _watch(receive, gone: asyncio.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def _stream(receive, send, seconds) -> None:
    """An event every 50 ms until the client has gone (or `seconds` have
    passed), then the stream's clean end."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    gone = asyncio.Event()
    watcher = asyncio.ensure_future(_watch(receive, gone))
    loop = asyncio.get_running_loop()
    end = None if seconds is None else loop.time() + seconds
    n = 0
    while not gone.is_set() and (end is None or loop.time() < end):
        await send({"type": "http.response.body", "body": f"data: {n}\n\n".encode(), "more_body": True})
        n += 1
        try:
            await asyncio.wait_for(gone.wait(), 0.05)
        except asyncio.TimeoutError:
            pass
    watcher.cancel()
    last = b"event: end\ndata: told\n\n" if gone.is_set() else b"event: end\ndata: done\n\n"
    await send({"type": "http.response.body", "body": last, "more_body": False})


async def _echo(receive, send) -> None:
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        await send({"type": "websocket.send", "text": message.get("text") or ""})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    if scope["type"] == "websocket":
        return await _echo(receive, send)
    path = scope["path"]
    if path == "/sse":
        return await _stream(receive, send, None)
    if path == "/finite":
        return await _stream(receive, send, 5.0)
    if path == "/slow":
        await asyncio.sleep(2)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})
