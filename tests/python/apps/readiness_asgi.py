"""test_readiness.py's ASGI app: with $M0_TEST_GATE (a directory), the
first worker's lifespan startup completes at once, and the others' wait
until the test creates GATE/open. Each response names the worker's pid."""

import os

from gate import first_or_wait_async


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if os.environ.get("M0_TEST_GATE"):
                    await first_or_wait_async(os.environ["M0_TEST_GATE"])
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = str(os.getpid()).encode()
    await send({
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())],
    })
    await send({"type": "http.response.body", "body": body})
