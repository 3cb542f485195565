"""--log-format json (issue 33, point 4): every line the server writes is
one JSON object naming its level, logger and worker; a JSON access line
keeps the access log's fields."""

from __future__ import annotations

import http.client
import json

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
