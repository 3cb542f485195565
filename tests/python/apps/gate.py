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


def first_or_wait(directory: str) -> bool:
    """Across processes: the first caller for `directory` passes at once
    (True); every later one waits until `directory/open` exists (WAIT
    seconds at most; whether it appeared). One worker ready, its siblings not."""
    try:
        os.close(os.open(os.path.join(directory, "first"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return wait_for_file(os.path.join(directory, "open"))


async def first_or_wait_async(directory: str) -> bool:
    """first_or_wait, sleeping on the event loop (an ASGI lifespan startup)."""
    try:
        os.close(os.open(os.path.join(directory, "first"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        pass
    import asyncio

    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if os.path.exists(os.path.join(directory, "open")):
            return True
        await asyncio.sleep(0.01)
    return False
