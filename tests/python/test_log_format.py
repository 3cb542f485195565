"""Logging (issue 33, point 4): --log-format json, every line the server
writes one JSON object naming its level, logger and worker (a JSON access
line keeps the access log's fields); --log-config, Python's logging
configured before the import, and the server's lines handed to the
m0serve.error and m0serve.access loggers when the file configures them,
and only then."""

from __future__ import annotations

import http.client
import json
import time

from helpers import start_server, stop_cleanly


def test_every_server_line_is_a_json_object_and_an_access_line_keeps_its_fields(backend: str):
    server = start_server(backend, "workers_app:app", "--log-format=json", "--access-log-format=json")
    conn = http.client.HTTPConnection(*server.address, timeout=10)
    conn.request("GET", "/?x=1")
    assert conn.getresponse().status == 200
    conn.close()
    access = server.wait_for(r'"logger":"m0serve\.access"', 10).string
    stop_cleanly(server)
    lines = [l for l in server.output.splitlines() if l.strip()]
    objects = [json.loads(l) for l in lines]  # every line parses
    access = json.loads(access)
    assert access["logger"] == "m0serve.access" and access["level"] == "INFO"
    assert (access["method"], access["path"], access["query"], access["status"]) == ("GET", "/", "x=1", 200)
    assert isinstance(access["worker"], int) and "time" in access
    listening = [o for o in objects if "listening on" in o.get("message", "")]
    assert listening and listening[0]["logger"] == "m0serve.error", objects
    assert all({"level", "logger"} <= o.keys() for o in objects), objects


def log_config(tmp_path, loggers: dict) -> str:
    path = tmp_path / "logging.json"
    path.write_text(json.dumps({
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(name)s %(levelname)s %(message)s"}},
        "handlers": {
            name: {"class": "logging.FileHandler", "filename": str(tmp_path / f"{name}.log"), "formatter": "plain"}
            for name in loggers
        },
        "loggers": {name: {"handlers": [name], "level": level, "propagate": False} for name, level in loggers.items()},
    }))
    return str(path)


def test_log_config_hands_the_configured_loggers_the_servers_lines(backend: str, tmp_path):
    config = log_config(tmp_path, {"m0serve.access": "INFO", "m0serve.error": "INFO"})
    # The worker's `listening on` line goes to Python's handler: the
    # supervisor's (its own process, no --log-config) says where.
    server = start_server(
        backend, "workers_app:app", f"--log-config={config}", "--access-log", listening=r"ready on (https?://[^\s]+)"
    )
    try:
        conn = http.client.HTTPConnection(*server.address, timeout=10)
        conn.request("GET", "/logged")
        assert conn.getresponse().status == 200
        conn.close()
        access = tmp_path / "m0serve.access.log"
        give_up = time.monotonic() + 10
        while "GET /logged" not in (access.read_text() if access.exists() else ""):
            assert time.monotonic() < give_up, f"no access line in Python's handler\n{server.output}"
            time.sleep(0.05)
    finally:
        stop_cleanly(server)
    line = [l for l in access.read_text().splitlines() if "GET /logged" in l][0]
    assert line.startswith("m0serve.access INFO "), line
    assert "GET /logged" not in server.output, "a bridged access line was written to stderr too"
    errors = (tmp_path / "m0serve.error.log").read_text()
    assert "m0serve.error INFO listening on" in errors, errors
    assert "listening on" not in server.output, "a bridged server line was written to stderr too"


def test_a_log_config_that_leaves_the_servers_loggers_alone_leaves_their_lines_on_stderr(backend: str, tmp_path):
    config = log_config(tmp_path, {"myapp": "INFO"})
    server = start_server(backend, "workers_app:app", f"--log-config={config}", "--access-log")
    try:
        conn = http.client.HTTPConnection(*server.address, timeout=10)
        conn.request("GET", "/unbridged")
        assert conn.getresponse().status == 200
        conn.close()
        server.wait_for("GET /unbridged", 10)
    finally:
        stop_cleanly(server)
