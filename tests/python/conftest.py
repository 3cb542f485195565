"""The end-to-end harness (see helpers.py for the pieces).

- ``serve(APP, *flags)`` starts the installed m0serve on a free port with
  ``--app-dir tests/python/apps`` on the backend under test, waits for its
  ``listening on http://HOST:PORT`` line, and returns a ``helpers.Server``
  (``.url``, ``.output``); at teardown it sends SIGTERM and asserts a
  graceful exit 0.
- ``backend`` is parametrized over ``--backends`` or ``M0_TEST_BACKENDS``,
  default ``uring,portable``.
"""

from __future__ import annotations

import os
from typing import Iterator, List, Optional

import pytest

from helpers import Server, start_server, stop_cleanly


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backends",
        default=None,
        help="comma-separated m0serve backends to run on "
        "(default: $M0_TEST_BACKENDS or uring,portable)",
    )


def backends(config: pytest.Config) -> List[str]:
    chosen = config.getoption("--backends") or os.environ.get("M0_TEST_BACKENDS") or "uring,portable"
    return [b.strip() for b in chosen.split(",") if b.strip()]


def pytest_configure(config: pytest.Config) -> None:
    # tests/run.sh runs the suite on two pytest-xdist workers, then the
    # `serial` tests alone: each asserts a latency bound or a share of the
    # CPU, which a neighbouring test's server would skew.
    config.addinivalue_line("markers", "serial: asserts a latency or CPU share; run apart from the parallel batch")
    # Without xdist (a plain `pytest`) the group mark is inert; registered so
    # that it is not an unknown mark.
    config.addinivalue_line("markers", "xdist_group(name): tests pytest-xdist keeps on one worker (--dist loadgroup)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        # Module scope, so a module may keep one server per backend for many tests.
        metafunc.parametrize("backend", backends(metafunc.config), scope="module")


@pytest.fixture
def serve(backend: str) -> Iterator:
    """Start m0serve on `backend`: serve(APP, *flags, cwd=None, env=None, app_dir=APPS)
    (see helpers.start_server); each is stopped, and must exit 0, at teardown."""
    started: List[Server] = []

    def start(app: Optional[str], *flags: str, **kw) -> Server:
        server = start_server(backend, app, *flags, **kw)
        started.append(server)
        return server

    yield start
    for server in started:
        stop_cleanly(server)
