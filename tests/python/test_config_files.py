"""--config and --env-file (issue 33, point 5) against the installed server:
a TOML file's settings served, below the command line; an env file's
variables seen by the application and never over the real environment; a
SIGHUP roll serving what the files say then, and a config file that no longer
parses leaving the old worker serving, with the file and line in the log.
(The precedence rules and messages are unit-tested in src/cli/tests.rs.)"""

from __future__ import annotations

import http.client
import signal
import time
from pathlib import Path

from helpers import run_m0serve, start_server, stop_cleanly

APP = """\
import os

def app(environ, start_response):
    body = "{}|{}".format(os.environ.get("GREETING", "-"), os.environ.get("KEPT", "-")).encode()
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]
"""


def get(address) -> tuple[int, str, dict]:
    conn = http.client.HTTPConnection(*address, timeout=10)
    try:
        conn.request("GET", "/", headers={"Connection": "close"})
        response = conn.getresponse()
        return response.status, response.read().decode(), dict(response.getheaders())
    finally:
        conn.close()


def wait_for_count(server, text: str, n: int, timeout: float = 20.0) -> None:
    give_up = time.monotonic() + timeout
    while server.output.count(text) < n:
        assert time.monotonic() < give_up, f"{text!r} not seen {n} time(s)\n{server.output}"
        time.sleep(0.05)


def test_the_files_settings_and_variables_are_served_and_a_roll_reads_them_again(backend: str, tmp_path: Path):
    (tmp_path / "envapp.py").write_text(APP)
    config = tmp_path / "m0serve.toml"
    config.write_text("app = 'envapp:app'\nworkers = 1\nheader = ['X-From: file']\n")
    env_file = tmp_path / ".env"
    env_file.write_text("GREETING=hello\nKEPT=from-file\n")
    server = start_server(
        backend, None, f"--config={config}", f"--env-file={env_file}", app_dir=tmp_path, env={"KEPT": "real"}
    )
    try:
        server.wait_for(r"1 worker\(s\) ready", 20)
        status, body, headers = get(server.address)
        assert (status, body) == (200, "hello|real"), body
        assert headers.get("X-From") == "file", headers

        env_file.write_text("GREETING=bonjour\n")
        server.proc.send_signal(signal.SIGHUP)
        wait_for_count(server, "rolling restart done", 1)
        assert get(server.address)[1] == "bonjour|real"

        # A file that no longer parses: the replacement fails, the old worker serves on.
        config.write_text("app = 'envapp:app'\nworkers = 1\nheader = ['X-From: file'\n")
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for(r"failed before it was ready .*the old one keeps serving", 20)
        assert f"{config}:3" in server.output, server.output
        assert get(server.address)[1] == "bonjour|real"
    finally:
        stop_cleanly(server)


def test_print_config_shows_each_value_and_its_source(tmp_path: Path):
    config = tmp_path / "pyproject.toml"
    config.write_text("[project]\nname = 'x'\n\n[tool.m0serve]\nport = 9001\n")
    done = run_m0serve(f"--config={config}", "--print-config", "--cores=3", env={"M0SERVE_HOST": "::1"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f'port = "9001"  # {config}:5' in lines, done.stdout
    assert 'host = "::1"  # M0SERVE_HOST' in lines, done.stdout
    assert 'cores = "3"  # command line' in lines, done.stdout


def test_a_key_that_is_no_setting_stops_the_start_naming_file_line_and_key(tmp_path: Path):
    config = tmp_path / "m0serve.toml"
    config.write_text("port = 8000\nwrokers = 2\n")
    done = run_m0serve(f"--config={config}", "app:app")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"m0serve: error: {config}:2: wrokers: not a setting (a long flag's name, e.g. port)"
    ], done.stderr
