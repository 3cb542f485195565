"""The ASGI executor's Python side: one thread running an asyncio loop.

The Rust side (``m0serve._m0serve``, ``src/asgi/``) queues requests and wakes
this loop through one file descriptor; ``Runner._on_wake`` drains the queues:
new requests become tasks, woken request ids resolve the futures their
``receive``/``send`` await. Both awaitables try the non-blocking channel call
first and wait only when it found nothing to do; that failed call armed the
request's waker, and the wake is handled on this same thread, so it cannot
slip in between the try and the wait.

Lifespan (``--lifespan auto|on|off``, as uvicorn has it) runs on the same
loop: startup before the server accepts, shutdown after it has drained.
"""

from __future__ import annotations

import asyncio
import threading
import traceback
from typing import Any, Dict, List, Optional


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


class Runner:
    """The executor thread, its loop, the request tasks and the lifespan."""

    def __init__(self, app, executor, loop_kind: str, lifespan: str) -> None:
        self.app = app
        self.executor = executor
        self.loop, self.loop_name = new_loop(loop_kind)
        self.lifespan: Optional[Lifespan] = None
        if lifespan != "off":
            self.lifespan = Lifespan(app, executor, lifespan == "on")
        self.thread: Optional[threading.Thread] = None
        # Request id -> the futures its receive/send await (while any waits).
        self.waiting: Dict[int, List[asyncio.Future]] = {}
        # The request tasks (not the app's own tasks): cancelled at shutdown.
        self.tasks: set = set()

    def start(self) -> Optional[str]:
        """Start the loop thread and run lifespan startup; the reason it
        failed, or None."""
        self.thread = threading.Thread(target=self._run, name="m0serve-asgi", daemon=True)
        self.thread.start()
        if self.lifespan is None:
            return None
        return asyncio.run_coroutine_threadsafe(self.lifespan.startup(), self.loop).result()

    def _run(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        fd = self.executor.fd()
        loop.add_reader(fd, self._on_wake)
        try:
            loop.run_forever()
        finally:
            loop.remove_reader(fd)
            loop.close()

    def stop(self, timeout: float) -> None:
        """Cancel the request tasks still running, run lifespan shutdown
        (bounded by `timeout`), stop the loop, join the thread."""
        if self.thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(timeout), self.loop)
        try:
            future.result(timeout + 5)
        except Exception as e:  # noqa: BLE001 - logged, the loop is stopped anyway
            self.executor.log("error", f"ASGI shutdown failed: {e!r}")
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.thread = None

    async def _shutdown(self, timeout: float) -> None:
        tasks = [t for t in self.tasks if not t.done()]
        if tasks:
            self.executor.log("warning", f"cancelling {len(tasks)} ASGI request task(s) still running at shutdown")
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=timeout)
        if self.lifespan is not None:
            try:
                await asyncio.wait_for(self.lifespan.shutdown(), timeout)
            except asyncio.TimeoutError:
                self.executor.log("error", f"lifespan shutdown did not complete within {timeout}s")

    def _on_wake(self) -> None:
        new, woken = self.executor.drain()
        if new:
            create_task, tasks = self.loop.create_task, self.tasks
            for channel in new:
                task = create_task(self._serve(channel))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        if woken:
            waiting = self.waiting
            for rid in woken:
                futures = waiting.get(rid)
                if futures:
                    for future in futures:
                        if not future.done():
                            future.set_result(None)
                    futures.clear()

    async def _serve(self, channel) -> None:
        rid = channel.id
        waiting = self.waiting
        futures: List[asyncio.Future] = []
        create_future = self.loop.create_future

        async def wait() -> None:
            future = create_future()
            if not futures:
                waiting[rid] = futures
            futures.append(future)
            await future

        async def receive() -> Dict[str, Any]:
            message = channel.try_receive()
            while message is None:
                await wait()
                message = channel.try_receive()
            return message

        async def send(message: Dict[str, Any]) -> None:
            while not channel.try_send(message):
                await wait()

        try:
            await self.app(channel.scope, receive, send)
        except asyncio.CancelledError:
            channel.abort("the ASGI request task was cancelled")
        except BaseException:  # noqa: BLE001 - an app's failure must not stop the loop
            channel.abort("the ASGI application failed\n" + traceback.format_exc())
        else:
            channel.finish()
        finally:
            waiting.pop(rid, None)


class Lifespan:
    """The lifespan protocol: the app's lifespan call runs for the server's life."""

    def __init__(self, app, executor, required: bool) -> None:
        self.app = app
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
            "asgi": {"version": "3.0", "spec_version": "2.0"},
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
