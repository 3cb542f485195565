"""Raw ASGI callables for the executor tests: the scope, body streaming,
flow control, disconnects, lifespan, and each way an app can fail."""

import asyncio
import collections.abc
import hashlib
import json
import os
import time
from urllib.parse import parse_qsl

# What the slow-client and disconnect routes saw (read back through /seen).
SEEN = {"sent": 0, "done": False, "disconnected": False, "active": 0, "most_active": 0}


async def _json(send, obj, status=200):
    body = json.dumps(obj).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    })
    await send({"type": "http.response.body", "body": body})


def _query(scope):
    return dict(parse_qsl(scope["query_string"].decode()))


async def _lifespan(scope, receive, send):
    log = os.environ.get("LIFESPAN_LOG")
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            scope["state"]["token"] = "from-lifespan"
            if log:
                with open(log, "a") as f:
                    f.write("startup\n")
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if log:
                with open(log, "a") as f:
                    f.write("shutdown\n")
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return await _lifespan(scope, receive, send)
    path = scope["path"]
    if path.startswith("/scope"):
        log = os.environ.get("LIFESPAN_LOG")
        if log:
            with open(log, "a") as f:
                f.write("request\n")
        await _json(send, {
            "type": scope["type"],
            "asgi": scope["asgi"],
            "http_version": scope["http_version"],
            "method": scope["method"],
            "scheme": scope["scheme"],
            "path": scope["path"],
            "raw_path": scope["raw_path"].decode("latin-1"),
            "query_string": scope["query_string"].decode("latin-1"),
            "root_path": scope["root_path"],
            "headers": [[n.decode("latin-1"), v.decode("latin-1")] for n, v in scope["headers"]],
            "client": list(scope["client"]) if scope["client"] else None,
            "server": list(scope["server"]),
            "state": dict(scope.get("state", {})),
            "bytes_types": [type(scope["raw_path"]).__name__, type(scope["query_string"]).__name__],
        })
    elif path == "/echo":
        digest, size, messages, last = hashlib.sha256(), 0, 0, None
        while True:
            message = await receive()
            assert message["type"] == "http.request", message
            messages += 1
            digest.update(message["body"])
            size += len(message["body"])
            if not message.get("more_body", False):
                break
        await _json(send, {"size": size, "sha256": digest.hexdigest(), "messages": messages})
    elif path == "/awaitables":
        # receive() and send() used the ways coroutines are: as tasks, under
        # wait_for, in gather, stepped by hand. Each call's result must be a
        # coroutine (collections.abc), whether it completed at once or waits.
        def coroutine(awaitable):
            assert isinstance(awaitable, collections.abc.Coroutine), type(awaitable)
            return awaitable

        await asyncio.sleep(0.05)  # the first piece of the body is in: receive() is ready
        message = await asyncio.create_task(coroutine(receive()))
        body = message["body"]
        while message.get("more_body"):
            message = await asyncio.wait_for(coroutine(receive()), 10)
            body += message["body"]
        step = coroutine(send({"type": "http.response.start", "status": 200,
                               "headers": [(b"content-length", str(len(body) * 2).encode())]}))
        try:
            step.send(None)
            raise AssertionError("a completed send() must stop at its first step")
        except StopIteration as stop:
            assert stop.value is None
        await asyncio.gather(coroutine(send({"type": "http.response.body", "body": body, "more_body": True})))
        await asyncio.wait_for(coroutine(send({"type": "http.response.body", "body": body, "more_body": True})), 10)
        # An empty body never waits: the ready kind, as a task.
        await asyncio.create_task(coroutine(send({"type": "http.response.body", "body": b""})))
    elif path == "/stream":
        gate = _query(scope)["gate"]
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"first\n", "more_body": True})
        for _ in range(1000):
            if os.path.exists(gate):
                break
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"second\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"third\n"})
    elif path == "/big":
        total = int(_query(scope)["mib"]) << 20
        SEEN["sent"], SEEN["done"] = 0, False
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(total).encode())]})
        chunk = b"x" * (64 << 10)
        while SEEN["sent"] < total:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            SEEN["sent"] += len(chunk)
        await send({"type": "http.response.body", "body": b""})
        SEEN["done"] = True
    elif path == "/wait-disconnect":
        SEEN["disconnected"] = False
        message = await receive()
        assert message["type"] == "http.request" and not message.get("more_body")
        message = await receive()  # blocks until the client goes
        SEEN["disconnected_at"] = time.monotonic()
        SEEN["disconnected"] = message["type"] == "http.disconnect"
        if message["type"] == "http.disconnect" and "answer" in _query(scope):
            # A half-closed client may still read what is written after.
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"answered after disconnect"})
    elif path == "/slow":
        # How many requests the loop runs at once (the backpressure test).
        SEEN["active"] += 1
        SEEN["most_active"] = max(SEEN["most_active"], SEEN["active"])
        try:
            await asyncio.sleep(float(_query(scope)["s"]))
        finally:
            SEEN["active"] -= 1
        await _json(send, {"slept": True})
    elif path == "/seen":
        await _json(send, SEEN)
    elif path == "/pathsend":
        file = _query(scope)["file"]
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(os.path.getsize(file)).encode())]})
        await send({"type": "http.response.pathsend", "path": file})
    elif path == "/header-shapes":
        # The spec's Iterable[[byte string, byte string]]: lists as it writes
        # them, tuples, a bytearray, a generator for the whole.
        def headers():
            yield [b"x-list", b"1"]
            yield (b"x-tuple", b"2")
            yield [bytearray(b"x-bytearray"), bytearray(b"3")]
            yield (b"content-type", b"text/plain")
        await send({"type": "http.response.start", "status": 200, "headers": headers()})
        await send({"type": "http.response.body", "body": b"shapes"})
    elif path == "/header-str":
        # Not a byte string: refused, the app's error (a 500).
        await send({"type": "http.response.start", "status": 200, "headers": [["x-str", "1"]]})
    elif path == "/raise-before":
        raise RuntimeError("failed before the response start")
    elif path == "/raise-after":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
        raise RuntimeError("failed mid-answer")
    elif path == "/incomplete":
        await send({"type": "http.response.start", "status": 200, "headers": []})
    elif path == "/background":
        # Work after the answer, as Starlette's background tasks do: the
        # call goes on after its connection is done with.
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"answered"})
        mark = _query(scope)["mark"]
        try:
            await asyncio.sleep(float(_query(scope)["s"]))
        except asyncio.CancelledError:
            with open(mark, "w") as f:
                f.write("cancelled")
            raise
        with open(mark, "w") as f:
            f.write("done")
    elif path == "/hang":
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            with open(_query(scope)["mark"], "w") as f:
                f.write("cancelled")
            raise
    else:
        await _json(send, {"error": "not found"}, status=404)


async def failing_startup(scope, receive, send):
    assert scope["type"] == "lifespan"
    await receive()
    await send({"type": "lifespan.startup.failed", "message": "database unreachable"})


async def http_only(scope, receive, send):
    """Raises on the lifespan scope: --lifespan auto serves it, on refuses it."""
    assert scope["type"] == "http", "only HTTP here"
    await _json(send, {"ok": True})


# Tasks made by the task factory the app installs at startup (tracing and
# context tools do this): the server must make request tasks through it.
FACTORY_MADE = set()


async def with_task_factory(scope, receive, send):
    if scope["type"] == "lifespan":
        message = await receive()
        assert message["type"] == "lifespan.startup"

        def factory(loop, coro, **kwargs):
            task = asyncio.Task(coro, loop=loop, **kwargs)
            FACTORY_MADE.add(task)
            task.add_done_callback(FACTORY_MADE.discard)
            return task

        asyncio.get_running_loop().set_task_factory(factory)
        await send({"type": "lifespan.startup.complete"})
        message = await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    await _json(send, {"made_by_factory": asyncio.current_task() in FACTORY_MADE})
