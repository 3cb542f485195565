"""PEP 3333 conformance (issue 3, point 3) through the installed m0serve:
tests/apps/wsgi_conformance.py (its valid routes wrapped in
wsgiref.validate.validator) driven by each check of
tests/apps/check_conformance.py, on each backend, with a pool thread, in the
loop-only shape, and mounted under --root-path."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

from helpers import Server, start_server, stop_cleanly

CONFORMANCE = Path(__file__).resolve().parent.parent / "apps"
sys.path.insert(0, str(CONFORMANCE))
import check_conformance  # noqa: E402

SHAPES = {
    "threads": ["--blocking-threads=2"],
    "loop-only": ["--blocking-threads=0"],
    "root-path": ["--blocking-threads=1", "--root-path=/mnt"],
}


@pytest.fixture(scope="module", params=list(SHAPES))
def shape(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def conformance_server(backend: str, shape: str) -> Iterator[Server]:
    """One server per backend and shape, for all the checks."""
    server = start_server(backend, "wsgi_conformance:app", *SHAPES[shape], app_dir=CONFORMANCE)
    yield server
    stop_cleanly(server)


@pytest.mark.parametrize("check", check_conformance.CHECKS, ids=lambda c: c.__name__[len("check_"):])
def test_pep3333(conformance_server: Server, shape: str, check, monkeypatch) -> None:
    if shape == "loop-only" and check is check_conformance.check_stream_first_chunk_early:
        pytest.skip("loop-only: the core thread cannot write while the view runs")
    monkeypatch.setattr(check_conformance, "ROOT", "/mnt" if shape == "root-path" else "")
    check(conformance_server.address)
