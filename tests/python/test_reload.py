"""--reload (issue 9, point 8): an edit to the app is served within 2 s; an
edit that breaks the import leaves the old code serving and says why, and
the next good edit is served; files the filter ignores change nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from helpers import stop_cleanly
from test_workers import get, started

APP = (
    "def app(environ, start_response):\n"
    "    start_response('200 OK', [('Content-Length', str(len({body!r})))])\n"
    "    return [{body!r}]\n"
)


def write_app(path: Path, body: str) -> None:
    path.write_text(APP.format(body=body.encode()))


def served_within(server, body: str, timeout: float) -> float:
    """Seconds until `body` is served (failing after `timeout`)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if get(server.address, "/")[1] == body:
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"{body!r} not served within {timeout}s\n{server.output}")


def rolls_done(server, n: int, timeout: float) -> None:
    """Wait until `n` rolls have finished (wait_for would find the first again)."""
    deadline = time.monotonic() + timeout
    while server.output.count("rolling restart done") < n:
        assert time.monotonic() < deadline, f"not {n} rolls done within {timeout}s\n{server.output}"
        time.sleep(0.05)


@pytest.mark.serial
def test_reload_serves_an_edit_survives_a_broken_one_and_serves_the_fix(tmp_path: Path):
    app = tmp_path / "edited.py"
    write_app(app, "v1")
    # No bytecode cache: an edit of the same size within the same second
    # would otherwise be shadowed by the first import's .pyc.
    server = started(
        "portable", "edited:app", 2, "--reload", app_dir=tmp_path, env={"PYTHONDONTWRITEBYTECODE": "1"}
    )
    try:
        server.wait_for(r"--reload: watching ", 1)
        assert get(server.address, "/")[1] == "v1"

        # Files the filter does not count change nothing.
        (tmp_path / "notes.txt").write_text("not python\n")
        (tmp_path / "__pycache__").mkdir()
        (tmp_path / "__pycache__" / "stale.py").write_text("x = 1\n")
        time.sleep(1.0)
        assert "changed: rolling" not in server.output, server.output

        write_app(app, "v2")
        took = served_within(server, "v2", 2.0)
        rolls_done(server, 1, 10)

        app.write_text("def app(environ, start_response:\n")  # a syntax error
        server.wait_for(r"reload stopped: the new worker \d+ \(pid \d+\) failed before it was ready", 10)
        assert "SyntaxError" in server.output, server.output
        for _ in range(10):
            assert get(server.address, "/") == (200, "v2")

        write_app(app, "v3")
        served_within(server, "v3", 5.0)
        rolls_done(server, 2, 10)
        after = {get(server.address, "/")[1] for _ in range(10)}
    finally:
        stop_cleanly(server)
    assert took < 2.0
    assert after == {"v3"}, f"both workers must serve the fix: {after}\n{server.output}"
