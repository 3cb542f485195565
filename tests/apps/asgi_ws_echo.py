"""A raw ASGI WebSocket echo app, for the Autobahn|Testsuite fuzzer
(tests/autobahn.sh): every text and binary message is sent back as it came.
Plain HTTP requests get a 404; lifespan is answered."""


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body"})
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is not None:
            await send({"type": "websocket.send", "text": text})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})
