"""The probes' app (../shared/probe_app.py, the routes every probe and
benchmark drives), served as WSGI and as ASGI with no --interface: each
route answers what the probes expect of it."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
SHARED = next((d for d in (REPO.parent / "shared", REPO / "shared") if (d / "probe_app.py").exists()), None)

pytestmark = pytest.mark.skipif(SHARED is None, reason="no shared/probe_app.py beside the checkout")

ROUTES = {"/": "Hello, World!", "/fast": "fast", "/busy?ms=1": "busy", "/slow?ms=1": "slow"}


@pytest.mark.parametrize("app, interface", [("probe_app:wsgi", "WSGI"), ("probe_app:asgi", "ASGI 3")])
def test_every_route_answers(serve, app, interface):
    server = serve(app, app_dir=SHARED)
    server.wait_for(rf"serving {app} \({interface}, ")
    for path, body in ROUTES.items():
        r = requests.get(server.url + path, timeout=10)
        assert (r.status_code, r.text) == (200, body), path
