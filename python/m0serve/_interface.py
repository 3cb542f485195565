"""``--interface auto``: WSGI or ASGI, told from the application object
without calling it (uvicorn assumes ASGI; Hypercorn looks, as we do).

- ASGI 3: a coroutine function, or an object whose ``__call__`` is one
  (FastAPI, Starlette, Django's ``ASGIHandler``, Quart, Litestar).
- ASGI 2: a class whose instances are awaited callables (it is instantiated
  with the scope, and the instance called with ``receive`` and ``send``).
- WSGI: any other callable that takes ``(environ, start_response)``
  (Flask, Django's ``WSGIHandler``, a plain function).

A plain callable whose signature takes three positional arguments and not
two is ASGI 3 (a wrapper that returns the coroutine); one that accepts both
two and three (``*args``), a ``functools.partial`` of a plain function, or
one whose signature cannot be read, is taken as WSGI, the historical
default, and the reason says to pass ``--interface``. Nothing here calls
the application.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from typing import Any, Callable, Optional, Tuple

WSGI = "wsgi"
ASGI3 = "asgi3"
ASGI2 = "asgi2"


def _is_coroutine_function(f: Any) -> bool:
    # 3.12+ reads inspect.markcoroutinefunction's mark; before, asgiref and
    # Django mark with asyncio's (which 3.14 deprecates, so only there).
    if inspect.iscoroutinefunction(f):
        return True
    if sys.version_info < (3, 12):
        return asyncio.iscoroutinefunction(f)
    return False


def _name(obj: Any) -> str:
    if inspect.isclass(obj):
        return obj.__qualname__
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        return obj.__qualname__ + "()"
    return type(obj).__qualname__


def _positional_counts(f: Callable[..., Any]) -> Optional[Tuple[bool, bool]]:
    """Whether ``f`` can be called with two positional arguments, and with
    three; None when its signature cannot be read."""
    try:
        signature = inspect.signature(f)
    except (TypeError, ValueError):
        return None

    def takes(n: int) -> bool:
        try:
            signature.bind(*range(n))
        except TypeError:
            return False
        return True

    return takes(2), takes(3)


def detect(app: Any) -> Tuple[str, str]:
    """The interface of ``app`` (``wsgi``, ``asgi3`` or ``asgi2``) and why,
    in words for the startup log. ``app`` is callable (the loader checked)."""
    name = _name(app)
    if inspect.isclass(app):
        call = getattr(app, "__call__", None)
        if call is not None and _is_coroutine_function(call):
            return ASGI2, f"class {name}: its instances' __call__ is a coroutine function (ASGI 2)"
        return WSGI, f"class {name}: called with (environ, start_response), its instances are not awaited"
    if _is_coroutine_function(app):
        return ASGI3, f"{name} is a coroutine function"
    call = getattr(type(app), "__call__", None)
    plain = inspect.isfunction(app) or inspect.ismethod(app) or inspect.isbuiltin(app)
    if not plain and call is not None and _is_coroutine_function(call):
        return ASGI3, f"{name}.__call__ is a coroutine function"
    # A partial hides what it wraps (a sync wrapper may return a coroutine).
    counts = None if isinstance(app, functools.partial) else _positional_counts(app)
    if counts == (True, False):
        return WSGI, f"{name} takes (environ, start_response)"
    if counts == (False, True):
        return ASGI3, f"{name} takes (scope, receive, send) and is not a coroutine function: taken to return one"
    if isinstance(app, functools.partial):
        why = "a functools.partial"
    elif counts is None:
        why = "its signature cannot be read"
    else:
        why = "its signature takes two arguments or three"
    return WSGI, f"{name} could be either ({why}): taken as WSGI; pass --interface asgi if it is ASGI"


def asgi3(app2: Any) -> Callable[..., Any]:
    """An ASGI 2 application as an ASGI 3 one (the executor speaks 3)."""

    async def app(scope, receive, send):
        instance = app2(scope)
        await instance(receive, send)

    return app
