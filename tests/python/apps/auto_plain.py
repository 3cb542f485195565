"""Applications with no framework, for --interface auto
(tests/python/test_interface.py): each answers with what it is and the
scope's ASGI version."""

import functools


async def bare(scope, receive, send):
    """A bare ASGI 3 coroutine function."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": ("asgi %s" % scope["asgi"]["version"]).encode()})


def make_bare():
    """A factory whose result is ASGI 3."""
    return bare


class Asgi2:
    """An ASGI 2 application: made with the scope, then awaited with the channels."""

    def __init__(self, scope):
        self.scope = scope

    async def __call__(self, receive, send):
        await bare(self.scope, receive, send)


def _wsgi(environ, start_response, name):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [name.encode()]


#: Could be either: taken as WSGI, with a line naming --interface.
partial_wsgi = functools.partial(_wsgi, name="partial")

#: Not callable: the one thing auto refuses.
not_an_app = 42
