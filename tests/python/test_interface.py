"""``--interface auto``, the default: ASGI 3, ASGI 2 or WSGI told from the
application object without calling it (``m0serve._interface``), first with
objects alone, then with each framework served with no flag."""

from __future__ import annotations

import functools
import inspect
import sys

import pytest
import requests

from conftest import backends
from helpers import APPS, start_server, stop_cleanly
from m0serve._interface import ASGI2, ASGI3, WSGI, detect

# ---------------------------------------------------------------------------
# The rule, with objects alone
# ---------------------------------------------------------------------------


def kind(app) -> str:
    return detect(app)[0]


def test_the_frameworks_asgi_objects_are_asgi3():
    from django.core.handlers.asgi import ASGIHandler
    from fastapi import FastAPI
    from litestar import Litestar
    from quart import Quart
    from starlette.applications import Starlette

    assert kind(FastAPI()) == ASGI3
    assert kind(Starlette()) == ASGI3
    assert kind(Litestar(route_handlers=[])) == ASGI3
    assert kind(Quart(__name__)) == ASGI3
    # Made without __init__ (which needs settings): only the type is read.
    assert kind(object.__new__(ASGIHandler)) == ASGI3


def test_the_frameworks_wsgi_objects_are_wsgi():
    from django.core.handlers.wsgi import WSGIHandler
    from flask import Flask

    kind_of_flask, why = detect(Flask(__name__))
    assert kind_of_flask == WSGI
    assert "environ, start_response" in why
    assert kind(object.__new__(WSGIHandler)) == WSGI


async def bare(scope, receive, send):
    pass


def test_a_coroutine_function_and_an_async_method_are_asgi3():
    assert detect(bare) == (ASGI3, "bare() is a coroutine function")

    class Holder:
        async def handle(self, scope, receive, send):
            pass

    assert kind(Holder().handle) == ASGI3


def test_an_object_whose_call_is_a_coroutine_function_is_asgi3_inherited_too():
    class Base:
        async def __call__(self, scope, receive, send):
            pass

    class Derived(Base):
        pass

    found, why = detect(Derived())
    assert found == ASGI3 and "__call__ is a coroutine function" in why


def test_a_class_with_an_async_call_is_asgi2():
    class App:
        def __init__(self, scope):
            self.scope = scope

        async def __call__(self, receive, send):
            pass

    found, why = detect(App)
    assert found == ASGI2 and "ASGI 2" in why


def test_a_pep3333_class_is_wsgi():
    class App:
        def __init__(self, environ, start_response):
            self.environ = environ

        def __iter__(self):
            yield b""

    assert kind(App) == WSGI


def test_plain_callables_by_their_signature():
    def wsgi(environ, start_response):
        return []

    def returns_a_coroutine(scope, receive, send):
        return bare(scope, receive, send)

    class Sync:
        def __call__(self, environ, start_response):
            return []

    assert detect(wsgi)[0] == WSGI and "could be either" not in detect(wsgi)[1]
    assert kind(lambda environ, start_response: []) == WSGI
    assert kind(Sync()) == WSGI
    found, why = detect(returns_a_coroutine)
    assert found == ASGI3 and "not a coroutine function" in why


def test_what_could_be_either_is_wsgi_and_names_the_flag():
    def anything(*args):
        return []

    def three_with_a_default(a, b, c=None):
        return []

    for app in (anything, three_with_a_default, functools.partial(anything, 1), print):
        found, why = detect(app)
        assert found == WSGI, app
        assert "could be either" in why and "--interface asgi" in why, why
    def wsgi(environ, start_response):
        return []

    # A partial hides what it wraps, whatever its signature says.
    found, why = detect(functools.partial(wsgi))
    assert found == WSGI and "functools.partial" in why and "--interface asgi" in why


@pytest.mark.skipif(sys.version_info < (3, 12), reason="inspect.markcoroutinefunction is 3.12's")
def test_a_function_marked_as_a_coroutine_function_is_asgi3():
    def wrapper(*args):
        return bare(*args)

    assert kind(wrapper) == WSGI  # two or three arguments: could be either
    assert kind(inspect.markcoroutinefunction(wrapper)) == ASGI3


def test_the_application_is_never_called():
    class Trap:
        def __call__(self, *args):
            raise AssertionError("detect called the application")

        def __getattr__(self, name):
            raise AttributeError(name)

    assert kind(Trap()) == WSGI


# ---------------------------------------------------------------------------
# Served with no flag
# ---------------------------------------------------------------------------

DJANGO = APPS / "django_project"

SERVED = {
    # target: (extra flags, path, the interface in the log, a word of the answer)
    "fastapi_app:app": ((), "/items/7?q=x", "ASGI 3", '"item_id":7'),
    "starlette_app:app": ((), "/json", "ASGI 3", '"hello":"starlette"'),
    "flask_app:app": ((), "/json", "WSGI", '"hello":"world"'),
    "djproject.wsgi:application": ((), "/json/", "WSGI", "django"),
    "djproject.asgi:application": ((), "/json/", "ASGI 3", "django"),
    "auto_litestar:app": ((), "/", "ASGI 3", "litestar"),
    "auto_quart:app": ((), "/", "ASGI 3", "quart"),
    "auto_plain:bare": ((), "/", "ASGI 3", "asgi 3.0"),
    "auto_plain:Asgi2": ((), "/", "ASGI 2", "asgi 2.0"),
    "auto_plain:make_bare": (("--factory",), "/", "ASGI 3", "asgi 3.0"),
    "auto_plain:partial_wsgi": ((), "/", "WSGI", "partial"),
}


@pytest.fixture(scope="module")
def backend_once(request) -> str:
    # The interface is the Python side's; one backend tells as much as two.
    return backends(request.config)[0]


@pytest.mark.parametrize("target", list(SERVED))
def test_each_framework_is_served_with_no_flag(backend_once, target):
    flags, path, interface, answer = SERVED[target]
    app_dir = DJANGO if target.startswith("djproject.") else APPS
    server = start_server(backend_once, target, *flags, app_dir=app_dir, env={"PYTHONPATH": str(APPS)})
    try:
        line = server.wait_for(rf"serving {target} \(({interface}), .*\): .+").group(0)
        r = requests.get(server.url + path, timeout=10)
        assert r.status_code == 200, (r.status_code, r.text, server.output)
        assert answer in r.text.replace(" ", "") or answer in r.text, r.text
        if target == "auto_plain:partial_wsgi":
            assert "--interface asgi" in line, line
    finally:
        stop_cleanly(server)


def test_the_flag_still_forces_an_interface(backend_once):
    server = start_server(backend_once, "fastapi_app:app", "--interface=wsgi")
    try:
        server.wait_for(r"serving fastapi_app:app \(WSGI, .*\): --interface wsgi")
        # FastAPI called as WSGI fails in the app, as the user asked for.
        assert requests.get(server.url + "/items/7", timeout=10).status_code == 500
    finally:
        stop_cleanly(server)
