"""The ASGI executor's Python side: one thread running an asyncio loop.

The Rust side (``m0serve._m0serve``, ``src/asgi/``) queues requests and wakes
this loop through one file descriptor; its ``on_wake`` (the fd's reader
callback) resolves the futures of woken requests and starts a task per new
request, running ``serve`` below. The app's ``receive``/``send`` are the
channel's own: they complete at once when they can, and only when they must
wait do they return the coroutines ``wait_receive``/``wait_send``, which await
a future the channel resolves on a wake and then try again.

Where Python has eager tasks (3.12+), a request's task runs its first step at
once, inside ``on_wake``: an app that answers without waiting never goes
through the loop's queue at all.

Lifespan (``--lifespan auto|on|off``, as uvicorn has it) runs on the same
loop: startup before the server accepts, shutdown after it has drained.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import threading
import traceback
from typing import Any, Dict, Optional

from m0serve import _interface

# Seconds request tasks cancelled at shutdown have for their cleanup.
CANCELLED_GRACE = 2.0


def new_loop(kind: str):
    """The event loop ``--loop`` asks for, and its name."""
    if kind in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                raise RuntimeError("--loop uvloop: uvloop is not installed (pip install uvloop)")
        else:
            return uvloop.new_event_loop(), "uvloop"
    return asyncio.new_event_loop(), "asyncio"


async def serve(app, scope, receive, send, channel) -> None:
    """Run the app for one request and end its channel, whatever it does."""
    try:
        await app(scope, receive, send)
    except asyncio.CancelledError:
        channel.abort("the ASGI request task was cancelled")
    except BaseException:  # noqa: BLE001 - an app's failure must not stop the loop
        channel.abort("the ASGI application failed\n" + traceback.format_exc())
    else:
        channel.finish()


async def wait_send(channel, message: Dict[str, Any], future) -> None:
    """``send(message)`` found the answer full: wait for room, then send."""
    while future is not None:
        await future
        future = channel.send_or_wait(message)


async def wait_receive(channel, future) -> Dict[str, Any]:
    """``receive()`` found nothing yet: wait for a message."""
    while True:
        await future
        message, future = channel.receive_or_wait()
        if future is None:
            return message


def awaiting_stack(task) -> str:
    """Where `task` awaits, outermost first, down the chain of coroutines it
    awaits (Task.print_stack shows only the outermost: m0serve's own)."""
    lines = []
    coro = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        lines.extend(traceback.format_stack(frame, limit=1))
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return "".join(lines)


def eager_task(loop):
    """Makes an eager task where Python has them (3.12+), else None (the
    executor then uses ``loop.create_task``, as it does whenever the app has
    set a task factory)."""
    if sys.version_info >= (3, 12):
        return functools.partial(asyncio.Task, loop=loop, eager_start=True)
    return None


class Runner:
    """The executor thread, its loop and the lifespan."""

    def __init__(self, app, executor, loop_kind: str, lifespan: str, version: str = "3.0") -> None:
        if version == "2.0":
            app = _interface.asgi3(app)
        self.app = app
        self.executor = executor
        self.loop, self.loop_name = new_loop(loop_kind)
        self.lifespan: Optional[Lifespan] = None
        if lifespan != "off":
            self.lifespan = Lifespan(app, executor, lifespan == "on", version)
        self.thread: Optional[threading.Thread] = None

    def start(self) -> Optional[str]:
        """Start the loop thread and run lifespan startup; the reason it
        failed, or None."""
        # Bound here, before the loop runs: a failure stops the start.
        self.executor.bind(self.loop, self.app, eager_task(self.loop), sys.modules[__name__])
        self.thread = threading.Thread(target=self._run, name="m0serve-asgi", daemon=True)
        self.thread.start()
        if self.lifespan is None:
            return None
        return asyncio.run_coroutine_threadsafe(self.lifespan.startup(), self.loop).result()

    def _run(self) -> None:
        self.executor.enter_loop_thread()
        loop = self.loop
        asyncio.set_event_loop(loop)
        executor = self.executor
        fd = executor.fd()
        loop.add_reader(fd, executor.on_wake)
        try:
            loop.run_forever()
        finally:
            loop.remove_reader(fd)
            executor.release_wakes()
            loop.close()

    def stop(self, left: float, timeout: float) -> None:
        """Let the request tasks still running finish within `left`, cancel
        the rest, run lifespan shutdown (bounded by `timeout`), stop the
        loop, join the thread."""
        if self.thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(left, timeout), self.loop)
        try:
            future.result(left + CANCELLED_GRACE + timeout + 5)
        except Exception as e:  # noqa: BLE001 - logged, the loop is stopped anyway
            self.executor.log("error", f"ASGI shutdown failed: {e!r}")
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.thread = None

    async def _shutdown(self, left: float, timeout: float) -> None:
        tasks = [t for t in self.executor.running_tasks() if not t.done()]
        if tasks and left > 0:
            # Calls that outlived their connections (work after the answer).
            _, pending = await asyncio.wait(tasks, timeout=left)
            tasks = list(pending)
        if tasks:
            self.executor.log("warning", f"cancelling {len(tasks)} ASGI request task(s) still running at shutdown")
            for task in tasks:
                task.cancel()
            # Their cleanup is short: the graceful timeout is spent by now,
            # and lifespan shutdown must fit before the supervisor's kill.
            await asyncio.wait(tasks, timeout=CANCELLED_GRACE)
        # A task cancelled before its first step never ended its request.
        self.executor.abort_running("the server shut down before the ASGI request task ran")
        if self.lifespan is not None:
            try:
                await asyncio.wait_for(self.lifespan.shutdown(), timeout)
            except asyncio.TimeoutError:
                self.executor.log("error", f"lifespan shutdown did not complete within {timeout}s")


class Lifespan:
    """The lifespan protocol: the app's lifespan call runs for the server's life."""

    def __init__(self, app, executor, required: bool, version: str = "3.0") -> None:
        self.app = app
        self.version = version
        self.executor = executor
        self.required = required
        self.task: Optional[asyncio.Task] = None
        self.unsupported = False
        self.startup_failed: Optional[str] = None
        self.shutdown_failed: Optional[str] = None

    async def startup(self) -> Optional[str]:
        # Made here, on the loop (Python 3.9's primitives bind the current loop).
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._main())
        await self.inbox.put({"type": "lifespan.startup"})
        await self.started.wait()
        if self.startup_failed is not None:
            return f"application startup failed: {self.startup_failed}"
        return None

    async def shutdown(self) -> None:
        if self.unsupported or self.task is None or self.task.done():
            return
        await self.inbox.put({"type": "lifespan.shutdown"})
        await self.stopped.wait()
        if self.shutdown_failed is not None:
            self.executor.log("error", f"application shutdown failed: {self.shutdown_failed}")

    async def _main(self) -> None:
        scope = {
            "type": "lifespan",
            "asgi": {"version": self.version, "spec_version": "2.0"},
            "state": self.executor.state,
        }
        try:
            await self.app(scope, self.inbox.get, self._send)
        except BaseException as e:  # noqa: BLE001
            if not self.started.is_set():
                if self.required:
                    self.executor.log("error", "the lifespan protocol failed\n" + traceback.format_exc())
                    self.startup_failed = f"the application raised {e!r}"
                else:
                    self.unsupported = True
                    self.executor.log("info", "ASGI 'lifespan' protocol appears unsupported.")
            elif self.startup_failed is None and not self.stopped.is_set():
                self.executor.log("error", "the lifespan protocol failed\n" + traceback.format_exc())
        finally:
            self.started.set()
            self.stopped.set()

    async def _send(self, message: Dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "lifespan.startup.complete":
            self.started.set()
        elif kind == "lifespan.startup.failed":
            self.startup_failed = message.get("message", "") or "(no message)"
            self.started.set()
        elif kind == "lifespan.shutdown.complete":
            self.stopped.set()
        elif kind == "lifespan.shutdown.failed":
            self.shutdown_failed = message.get("message", "") or "(no message)"
            self.stopped.set()
        else:
            raise RuntimeError(f"unexpected ASGI lifespan message type {kind!r}")
