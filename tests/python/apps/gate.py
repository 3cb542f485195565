"""A cross-process gate for streaming tests: the app waits until the test
creates a file, so the test can see what arrived before the generator ended."""

import os
import time

WAIT = 10.0


def wait_for_file(path: str) -> bool:
    """Whether `path` appeared within WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.01)
    return False


def gated_chunks(path: str):
    """b"first\\n"; then, once `path` exists, b"second\\n" and b"third\\n"."""
    yield b"first\n"
    if not wait_for_file(path):
        yield b"gate timed out\n"
        return
    yield b"second\n"
    yield b"third\n"
