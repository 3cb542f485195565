"""The Python API: ``m0serve.run(app, **options)`` and ``m0serve.Server``,
with keywords that are the flags' names, checked before anything listens;
an application object served in this process (the pytest fixture shape
below), an import string served as the command line serves it."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
from typing import Iterator

import pytest
import requests

import m0serve
from conftest import backends
from helpers import APPS, START_TIMEOUT, Server as Process, child_env


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello from " + environ["PATH_INFO"].encode()]


async def hello_asgi(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"asgi " + scope["path"].encode()})


@pytest.fixture(scope="module")
def backend_once(request) -> str:
    return backends(request.config)[0]


class Running:
    """A Server serving on a thread of this process."""

    def __init__(self, app, **options) -> None:
        self.server = m0serve.Server(app, **options)
        self.failure = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        self.url = self.server.wait_ready(START_TIMEOUT)
        assert self.url, f"not ready: {self.failure!r}"

    def _serve(self) -> None:
        try:
            self.server.serve()
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.failure = e

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(15)
        assert not self.thread.is_alive(), "serve() did not return after shutdown()"
        assert self.failure is None, self.failure
        assert self.server.url is None


# The shape a user's tests take: a server started and stopped in-process.
@pytest.fixture
def hello_server(backend_once) -> Iterator[str]:
    running = Running(hello, port=0, cores=1, backend=backend_once)
    yield running.url
    running.stop()


def test_a_fixture_serves_an_object_in_process(hello_server):
    r = requests.get(hello_server + "/fixture", timeout=10)
    assert (r.status_code, r.text) == (200, "hello from /fixture")


def test_an_asgi_object_in_process_and_keywords_as_flags(backend_once):
    running = Running(hello_asgi, port=0, cores=1, backend=backend_once, health_path="/up",
                      header=["x-one: 1", "x-two: 2"], access_log=False)
    try:
        r = requests.get(running.url + "/path", timeout=10)
        assert (r.status_code, r.text) == (200, "asgi /path")
        assert (r.headers["x-one"], r.headers["x-two"]) == ("1", "2")
        assert requests.get(running.url + "/up", timeout=10).text != "asgi /up"
    finally:
        running.stop()


def test_keywords_rank_above_the_variables(backend_once, monkeypatch):
    monkeypatch.setenv("M0SERVE_HEALTH_PATH", "/from-env")
    monkeypatch.setenv("M0SERVE_ROOT_PATH", "/env")
    running = Running(hello, port=0, cores=1, backend=backend_once, health_path="/from-keyword")
    try:
        assert requests.get(running.url + "/from-keyword", timeout=10).text != "hello from /from-keyword"
        # The variable the keyword displaced no longer names the health path...
        assert requests.get(running.url + "/env/from-env", timeout=10).text == "hello from /from-env"
    finally:
        running.stop()


def test_shutdown_before_serve_makes_serve_return_at_once():
    server = m0serve.Server(hello, port=0, cores=1)
    server.shutdown()
    done = threading.Thread(target=server.serve, daemon=True)
    done.start()
    done.join(15)
    assert not done.is_alive()
    assert server.wait_ready(0.1) is None
    with pytest.raises(RuntimeError, match="served already"):
        server.serve()


@pytest.mark.parametrize(
    "options, error, words",
    [
        ({"no_such_option": 1}, TypeError, "'no_such_option'"),
        ({"port": "eighty"}, ValueError, "--port"),
        ({"access_log": "yes"}, TypeError, "True or False"),
        ({"port": [1, 2]}, TypeError, "one value"),
        ({"blocking_threads": True}, TypeError, "one value"),
        ({"interface": "cgi"}, ValueError, "cgi"),
        ({"workers": 2}, ValueError, "--workers"),
        ({"reload": True}, ValueError, "--reload"),
        ({"workers_max_requests": 10}, ValueError, "--workers-max-requests"),
    ],
)
def test_bad_keywords_are_refused_before_anything_listens(options, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(")):
        m0serve.Server(hello, **{"port": 0, **options})


def test_what_is_not_an_app_is_refused():
    with pytest.raises(TypeError, match="import string or a callable"):
        m0serve.Server(42)
    with pytest.raises(ValueError, match="module:attribute"):
        m0serve.Server("plain")


SCRIPT = textwrap.dedent(
    """
    import sys
    import m0serve

    if __name__ == "__main__":
        m0serve.run("plain:hello", port=0, cores=1, backend=sys.argv[1], app_dir=sys.argv[2],
                    workers=2, graceful_timeout=5)
        print("run() returned", flush=True)
    """
)


def test_run_serves_an_import_string_with_workers_and_returns_after_sigterm(backend_once, tmp_path):
    script = tmp_path / "serve_it.py"
    script.write_text(SCRIPT)
    proc = Process([sys.executable, str(script), backend_once, str(APPS)], tmp_path, child_env(),
                   listening=r"2 worker\(s\) ready on (http://[^\s]+)")
    try:
        r = requests.get(proc.url + "/via-run", timeout=10)
        assert (r.status_code, r.text) == (200, "hello from /via-run")
    finally:
        status = proc.stop(signal.SIGTERM)
    assert status == 0, proc.output
    assert "run() returned" in proc.output, proc.output
    assert "Traceback" not in proc.output, proc.output


def test_run_returns_after_sigint_without_a_traceback(backend_once, tmp_path):
    script = tmp_path / "serve_object.py"
    script.write_text(textwrap.dedent(
        """
        import sys
        import m0serve

        def app(environ, start_response):
            start_response("200 OK", [])
            return [b"ok"]

        m0serve.run(app, port=0, cores=1, backend=sys.argv[1])
        print("run() returned", flush=True)
        """
    ))
    proc = Process([sys.executable, str(script), backend_once], tmp_path, child_env())
    try:
        assert requests.get(proc.url + "/", timeout=10).text == "ok"
    finally:
        status = proc.stop(signal.SIGINT)
    assert status == 0, proc.output
    assert "run() returned" in proc.output and "Traceback" not in proc.output, proc.output


def test_the_import_string_path_reports_a_bad_app_as_a_failed_serve(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import m0serve; m0serve.run('m0serve_no_such_module:app', port=0)"],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "no module named 'm0serve_no_such_module'" in done.stderr
    assert "RuntimeError: m0serve stopped with exit status 2" in done.stderr
