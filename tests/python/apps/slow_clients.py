"""Views for the slow-client tests (WSGI `wsgi`, ASGI `asgi`).

/upload  reads the whole body; answers when the view started and finished
         (time.time()), the body's length and sha256
/big     streams 64 KiB pieces (up to 1 GiB) until a write fails; what
         happened is kept for /status
/status  JSON of /big's record: when it started, when its write failed,
         whether close() was called (WSGI) or what receive() said after (ASGI)
/fast    "fast"
"""
import hashlib
import json
import threading
import time

PIECE = b"x" * 65536
PIECES = 16384  # 1 GiB: no kernel buffer holds it
record = {}
lock = threading.Lock()


def _json(start_response, obj, status="200 OK"):
    body = json.dumps(obj).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


class Big:
    """The /big answer: counts what it yielded, notes close()."""

    def __init__(self):
        self.sent = 0
        with lock:
            record.clear()
            record["started"] = time.time()

    def __iter__(self):
        return self

    def __next__(self):
        if self.sent >= PIECES:
            raise StopIteration
        self.sent += 1
        with lock:
            record["last_write"] = time.time()
        return PIECE

    def close(self):
        with lock:
            record["closed"] = time.time()
            record["complete"] = self.sent >= PIECES


def wsgi(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    if path == "/upload":
        started = time.time()
        digest = hashlib.sha256()
        length = 0
        stream = environ["wsgi.input"]
        while True:
            piece = stream.read(65536)
            if not piece:
                break
            length += len(piece)
            digest.update(piece)
        return _json(start_response, {"started": started, "finished": time.time(),
                                      "length": length, "sha256": digest.hexdigest()})
    if path == "/big":
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return Big()
    if path == "/status":
        with lock:
            return _json(start_response, dict(record))
    return _json(start_response, "fast")


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"]
    if path == "/big":
        with lock:
            record.clear()
            record["started"] = time.time()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        try:
            for _ in range(PIECES):
                await send({"type": "http.response.body", "body": PIECE, "more_body": True})
                record["last_write"] = time.time()
        except OSError as err:
            record["failed"] = time.time()
            record["error"] = type(err).__name__
            record["after"] = (await receive())["type"]
            return
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/status":
        body = json.dumps(dict(record)).encode()
    else:
        body = b'"fast"'
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
