"""A Starlette app: JSON, a gated stream, a streamed upload, a file, lifespan state,
WebSocket routes (ws_routes.py)."""

import asyncio
import contextlib
import hashlib
import os

from starlette.applications import Starlette
from starlette.responses import FileResponse, JSONResponse, StreamingResponse
from starlette.routing import Route, WebSocketRoute

import ws_routes


@contextlib.asynccontextmanager
async def lifespan(app):
    yield {"greeting": "hello from lifespan"}


async def json_route(request):
    return JSONResponse({"hello": "starlette", "query": dict(request.query_params),
                         "greeting": request.state.greeting})


async def stream(request):
    gate = request.query_params["gate"]

    async def chunks():
        yield b"first\n"
        for _ in range(1000):
            if os.path.exists(gate):
                break
            await asyncio.sleep(0.01)
        yield b"second\n"
        yield b"third\n"

    return StreamingResponse(chunks(), media_type="text/plain")


async def upload(request):
    digest, size, chunks = hashlib.sha256(), 0, 0
    async for chunk in request.stream():
        if chunk:
            chunks += 1
        digest.update(chunk)
        size += len(chunk)
    return JSONResponse({"size": size, "sha256": digest.hexdigest(), "chunks": chunks})


async def file(request):
    return FileResponse(request.query_params["path"])


app = Starlette(
    routes=[
        Route("/json", json_route),
        Route("/stream", stream),
        Route("/upload", upload, methods=["POST"]),
        Route("/file", file),
        WebSocketRoute("/ws/echo", ws_routes.echo),
        WebSocketRoute("/ws/reject", ws_routes.reject),
        WebSocketRoute("/ws/deny", ws_routes.deny),
    ],
    lifespan=lifespan,
)
