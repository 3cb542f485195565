"""What m0serve does with no flags but the app (issue 11, point 8)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest


@pytest.mark.serial
def test_with_the_default_threads_a_sleeping_view_delays_nobody(serve):
    """Views that wait on a database are the common case: with the default
    --blocking-threads, one sleeping 2 s must not hold up another client."""
    server = serve("plain:sleepy")
    slow = {}

    def sleeper():
        slow["answer"] = httpx.get(server.url + "/sleep?s=2", timeout=10).text

    t = threading.Thread(target=sleeper)
    t.start()
    time.sleep(0.3)  # the sleeper's request is in its view now
    started = time.monotonic()
    fast = httpx.get(server.url + "/fast", timeout=10)
    took = time.monotonic() - started
    t.join()
    assert fast.text == "fast" and slow["answer"] == "slept"
    assert took < 1.0, f"the fast request waited {took:.2f} s behind the sleeping view"
