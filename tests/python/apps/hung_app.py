"""test_worker_timeout.py's and test_request_timeout.py's apps: each answer
names the worker process that served it. /spin spins in C with the GIL held (a regular expression's
catastrophic backtracking: `re` never lets the GIL go), which stops every
view of its worker; `asgi_app`'s /block makes a blocking call in a
coroutine, which stops the event loop with the GIL free."""

import os
import re
import time


def spin_in_c():
    re.match(r"(a+)+$", "a" * 64 + "b")


def app(environ, start_response):
    if environ["PATH_INFO"] == "/spin":
        spin_in_c()
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def block_the_loop():
    time.sleep(3600)


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/block":
        block_the_loop()
    body = str(os.getpid()).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def sleep_for_an_hour():
    time.sleep(3600)


def wsgi_timed(environ, start_response):
    """/sleep sleeps an hour (the GIL free: the pool's other threads serve)."""
    if environ["PATH_INFO"] == "/sleep":
        sleep_for_an_hour()
    return app(environ, start_response)


async def await_for_an_hour():
    import asyncio

    await asyncio.sleep(3600)


async def asgi_timed(scope, receive, send):
    """/sleep awaits an hour (the loop free: other requests are served)."""
    if scope["type"] == "http" and scope["path"] == "/sleep":
        await await_for_an_hour()
    await asgi_app(scope, receive, send)
