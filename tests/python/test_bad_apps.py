"""Applications that misbehave (issue 3, point 3): each gets a 500, the
traceback goes to the log, and the server goes on serving."""

from __future__ import annotations

import requests


def status(server, path: str) -> int:
    return requests.get(server.url + path, timeout=10).status_code


def test_an_app_that_raises_gets_500_and_the_next_request_succeeds(serve):
    server = serve("plain:raises")
    r = requests.get(server.url + "/boom", timeout=10)
    assert r.status_code == 500
    assert "boom on purpose" not in r.text  # the traceback is for the log, not the client
    server.wait_for("RuntimeError: boom on purpose")
    ok = requests.get(server.url + "/fine", timeout=10)
    assert ok.status_code == 200 and ok.text == "still serving"


def test_raising_in_the_iterable_before_any_byte_gets_500(serve):
    server = serve("plain:raises_after_start")
    assert status(server, "/") == 500
    server.wait_for("boom in the iterable")
    assert status(server, "/again") == 500


def test_returning_a_str_gets_500(serve):
    server = serve("plain:returns_str")
    assert status(server, "/") == 500
    assert status(server, "/again") == 500


def test_calling_start_response_wrongly_gets_500(serve):
    server = serve("plain:bad_start_response")
    for path in ("/status", "/headers", "/twice", "/never"):
        assert status(server, path) == 500, path
        assert status(server, "/ok") == 200, f"after {path}"
