"""A Flask application served for real (issue 3, point 5), on each backend,
through requests, httpx, curl and raw sockets."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess

import httpx
import pytest
import requests

from helpers import raw_get

UPLOAD = bytes(range(256)) * 1024 + b"tail"  # 256 KiB + 4: binary, several reads


@pytest.fixture(params=["1", "4", "0"], ids=["threads1", "threads4", "loop-only"])
def flask_server(serve, request):
    """The Flask app on one pool thread, on four (the GIL turn: jobs taken
    under the GIL), and in the loop-only shape."""
    return serve("flask_app:app", f"--blocking-threads={request.param}")


def test_json(flask_server):
    r = requests.get(flask_server.url + "/json", params={"q": "a b", "n": "1"}, timeout=10)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    assert r.json() == {"hello": "world", "args": {"q": "a b", "n": "1"}, "script_name": ""}
    # Keep-alive: a second request on httpx's pooled connection.
    with httpx.Client(base_url=flask_server.url, timeout=10) as client:
        for _ in range(3):
            assert client.get("/json").json()["hello"] == "world"


def test_form_post_with_a_file_upload(flask_server):
    r = requests.post(
        flask_server.url + "/upload",
        data={"name": "Zoë"},
        files={"file": ("data.bin", UPLOAD, "application/octet-stream")},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    assert r.json() == {
        "name": "Zoë",
        "filename": "data.bin",
        "size": len(UPLOAD),
        "sha256": hashlib.sha256(UPLOAD).hexdigest(),
    }


def test_a_chunked_upload_from_requests_reaches_flask(flask_server):
    """A generator body makes requests send `Transfer-Encoding: chunked` with
    no Content-Length; werkzeug reads such a body only when the server says
    `wsgi.input_terminated` (without it, get_data() returns b"")."""
    pieces = [UPLOAD[i:i + 10_000] for i in range(0, len(UPLOAD), 10_000)]
    r = requests.post(flask_server.url + "/raw", data=iter(pieces), timeout=10)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body.pop("server_software").startswith("m0serve/")
    assert body == {"size": len(UPLOAD), "sha256": hashlib.sha256(UPLOAD).hexdigest(), "chunked": True}


def test_upload_with_curl(flask_server, tmp_path):
    path = tmp_path / "upload.bin"
    path.write_bytes(UPLOAD)
    done = subprocess.run(
        ["curl", "-sS", "--max-time", "10", "-F", "name=curl", "-F", f"file=@{path}",
         flask_server.url + "/upload"],
        capture_output=True,
        timeout=20,
    )
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["name"] == "curl" and body["filename"] == "upload.bin"
    assert body["sha256"] == hashlib.sha256(UPLOAD).hexdigest()


def test_redirect(flask_server):
    r = requests.get(flask_server.url + "/redirect", allow_redirects=False, timeout=10)
    assert r.status_code == 302
    assert r.headers["Location"].endswith("/json?from=redirect")
    followed = requests.get(flask_server.url + "/redirect", timeout=10)
    assert followed.status_code == 200 and followed.json()["args"] == {"from": "redirect"}
    done = subprocess.run(
        ["curl", "-sS", "-L", "--max-time", "10", flask_server.url + "/redirect"],
        capture_output=True, timeout=20,
    )
    assert json.loads(done.stdout)["args"] == {"from": "redirect"}


def test_not_found(flask_server):
    r = requests.get(flask_server.url + "/no/such/page", timeout=10)
    assert r.status_code == 404
    assert "Not Found" in r.text
    # The health path is still answered by the server itself.
    assert requests.get(flask_server.url + "/healthz", timeout=10).text == "OK"


def test_a_stream_arrives_as_it_is_produced(serve, tmp_path):
    """The first chunk reaches the client while the generator is still
    waiting (on a file only the test creates after reading that chunk)."""
    server = serve("flask_app:app")
    gate = tmp_path / "gate"
    sock, response = raw_get(server, f"/stream?gate={gate}")
    with sock:
        assert response.status == 200
        assert response.header("Transfer-Encoding") == "chunked"
        assert response.header("Content-Length") is None
        first = response.read_chunk()
        assert first == b"first\n"
        assert not gate.exists()
        gate.touch()
        rest = b""
        while True:
            chunk = response.read_chunk()
            if chunk is None:
                break
            rest += chunk
        assert rest == b"second\nthird\n"


def test_access_log_in_common_log_format(serve):
    server = serve("flask_app:app", "--access-log")
    r = requests.get(server.url + "/json?x=1", timeout=10)
    line = server.wait_for(r'"GET /json\?x=1 HTTP/1.1"').string
    assert line.endswith(f'"GET /json?x=1 HTTP/1.1" 200 {len(r.content)}'), line
    # host ident user [day/Mon/year:HH:MM:SS +0000] "request" status bytes
    assert " 127.0.0.1 - - [" in line, line
    assert re.search(r"\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d \+0000\] ", line), line
    requests.get(server.url + "/missing", timeout=10)
    assert server.wait_for(r'"GET /missing HTTP/1.1" 404 \d+$')


def test_no_access_log_unless_asked(serve):
    server = serve("flask_app:app")
    assert requests.get(server.url + "/json", timeout=10).status_code == 200
    # Everything it would log is out once it has exited.
    assert server.stop() == 0
    assert "GET /json" not in server.output, server.output


def test_root_path_is_the_script_name(serve):
    server = serve("flask_app:app", "--root-path=/api")
    r = requests.get(server.url + "/api/json", timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["script_name"] == "/api"
