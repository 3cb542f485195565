"""A Django project (DEBUG off) served for real (issue 3, point 5), on each
backend, through httpx, requests, curl and raw sockets."""

from __future__ import annotations

import hashlib
import json
import subprocess

import httpx
import pytest
import requests

from helpers import APPS, raw_get

PROJECT = APPS / "django_project"
UPLOAD = b"\x00\xffdjango upload\r\n" * 20000  # ~340 KiB: above the in-memory limit


@pytest.fixture
def django_server(serve):
    # The views share gate.py with the Flask app: it lives one directory up.
    return serve("djproject.wsgi:application", app_dir=PROJECT, env={"PYTHONPATH": str(APPS)})


def test_json(django_server):
    with httpx.Client(base_url=django_server.url, timeout=10) as client:
        r = client.get("/json/", params={"a": "1", "b": "x y"})
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/json"
        assert r.json() == {
            "hello": "django",
            "method": "GET",
            "query": {"a": "1", "b": "x y"},
            "script_name": "",
            "path": "/json/",
        }
        # CommonMiddleware's APPEND_SLASH: /json -> /json/.
        r = client.get("/json")
        assert r.status_code == 301 and r.headers["location"] == "/json/"


def uploaded(name):
    """What /upload/ answers for UPLOAD sent as "blob.bin" with field `name`."""
    return {"name": name, "filename": "blob.bin", "size": len(UPLOAD), "sha256": hashlib.sha256(UPLOAD).hexdigest()}


def test_form_post_with_a_file_upload(django_server):
    r = httpx.post(
        django_server.url + "/upload/",
        data={"name": "django"},
        files={"file": ("blob.bin", UPLOAD, "application/octet-stream")},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    assert r.json() == uploaded("django")


def test_a_chunked_upload_reaches_the_view(django_server):
    """Django reads CONTENT_LENGTH bytes of the body: a chunked upload, which
    has no Content-Length, gets its de-chunked length (before, the view saw
    an empty body and no file)."""
    form = httpx.Request(
        "POST", django_server.url + "/upload/", data={"name": "chunked"},
        files={"file": ("blob.bin", UPLOAD, "application/octet-stream")},
    )
    body = form.read()
    r = httpx.post(
        django_server.url + "/upload/",
        content=iter([body[:1000], body[1000:]]),
        headers={"Content-Type": form.headers["Content-Type"]},
        timeout=10,
    )
    assert r.request.headers.get("transfer-encoding") == "chunked"
    assert r.status_code == 200, r.text
    assert r.json() == uploaded("chunked")


def test_upload_with_curl(django_server, tmp_path):
    path = tmp_path / "page.txt"
    path.write_bytes(b"hello from curl\n")
    done = subprocess.run(
        ["curl", "-sS", "--max-time", "10", "-F", "name=c", "-F", f"file=@{path}",
         django_server.url + "/upload/"],
        capture_output=True, timeout=20,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["size"] == len(b"hello from curl\n")


def test_csrf_is_enforced_without_the_exemption(django_server):
    r = requests.post(django_server.url + "/protected/", data={"x": "1"}, timeout=10)
    assert r.status_code == 403


def test_redirect(django_server):
    r = requests.get(django_server.url + "/redirect/", allow_redirects=False, timeout=10)
    assert r.status_code == 302 and r.headers["Location"] == "/json/?from=redirect"
    assert requests.get(django_server.url + "/redirect/", timeout=10).json()["query"] == {"from": "redirect"}


def test_not_found(django_server):
    r = httpx.get(django_server.url + "/nope/", timeout=10)
    assert r.status_code == 404
    assert "Not Found" in r.text
    assert "Traceback" not in r.text  # DEBUG is off


def test_a_stream_arrives_as_it_is_produced(django_server, tmp_path):
    gate = tmp_path / "gate"
    sock, response = raw_get(django_server, f"/stream/?gate={gate}")
    with sock:
        assert response.status == 200
        assert response.header("Transfer-Encoding") == "chunked"
        assert response.read_chunk() == b"first\n"
        assert not gate.exists()
        gate.touch()
        rest = b""
        while True:
            chunk = response.read_chunk()
            if chunk is None:
                break
            rest += chunk
        assert rest == b"second\nthird\n"
