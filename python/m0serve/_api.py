"""The Python API: ``m0serve.run(app, **options)`` and ``m0serve.Server``.

Every keyword is a long flag's name with underscores (``port=8000``,
``blocking_threads=2``, ``static_path_mount=[...]``) and takes what the flag
takes: the keywords become a command line, parsed by the same parser as
``m0serve``'s, so they rank with the command line above the ``M0SERVE_*``
variables and the defaults. An unknown keyword is a ``TypeError``, a bad
value a ``ValueError``, both before anything listens.

``app`` is an import string (``"main:app"``), served as the command line
serves it (a supervisor and its workers), or the application object itself,
served in this process by one worker without reload.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from m0serve import _m0serve

__all__ = ["Server", "run"]


def _flag_kinds() -> Dict[str, str]:
    return {name.replace("-", "_"): kind for name, kind in _m0serve.flags()}


def _command_line(options: Dict[str, Any]) -> List[str]:
    kinds = _flag_kinds()
    argv = ["m0serve"]
    for key, value in options.items():
        kind = kinds.get(key)
        if kind is None:
            raise TypeError(f"m0serve: unknown option {key!r} (m0serve --help lists the flags; use underscores for dashes)")
        if value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if kind in ("switch", "toggle"):
            if not isinstance(value, bool):
                raise TypeError(f"m0serve: option {key!r} takes True or False, not {type(value).__name__}")
            if kind == "toggle":
                argv.append(f"{flag}={'true' if value else 'false'}")
            elif value:
                argv.append(flag)
            continue
        values = [value]
        if kind == "list" and not isinstance(value, (str, bytes, os.PathLike)):
            try:
                values = list(value)
            except TypeError:
                raise TypeError(f"m0serve: option {key!r} takes a value or a list of them") from None
        for one in values:
            argv.append(f"{flag}={_text(key, one)}")
    return argv


def _text(key: str, value: Any) -> str:
    if isinstance(value, bool) or isinstance(value, (list, tuple, set, dict)):
        raise TypeError(f"m0serve: option {key!r} takes one value, not {type(value).__name__}")
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def _name(app: Any) -> str:
    """How an application object is named in messages and the log."""
    qualname = getattr(app, "__qualname__", None)
    if isinstance(qualname, str) and hasattr(app, "__module__"):
        return f"{app.__module__}:{qualname}"
    return f"<{type(app).__qualname__} object>"


class Server:
    """One m0serve server: ``serve()`` blocks until it is shut down,
    ``shutdown()`` (from another thread) drains it as SIGTERM would.

    ``url`` is where it listens once it is ready (``wait_ready()`` waits for
    that); a server serves once.
    """

    def __init__(self, app: Any, **options: Any) -> None:
        argv = _command_line(options)
        if isinstance(app, str):
            self._server = _m0serve.Server(argv + [app])
        elif callable(app):
            self._server = _m0serve.Server(argv, app, _name(app))
        else:
            raise TypeError(f"m0serve: app must be an import string or a callable, not {type(app).__name__}")

    def serve(self) -> None:
        """Serve until SIGINT, SIGTERM or ``shutdown()``; return after the
        graceful shutdown. ``RuntimeError`` when the server failed (its log
        says why)."""
        status = self._server.serve()
        if status != 0:
            raise RuntimeError(f"m0serve stopped with exit status {status} (the log above says why)")

    def shutdown(self) -> None:
        """Stop serving gracefully; safe from any thread, before or while it serves."""
        self._server.shutdown()

    @property
    def url(self) -> Optional[str]:
        """``http://HOST:PORT`` (or the socket's), while it is ready to serve."""
        return self._server.url

    def wait_ready(self, timeout: float = 30.0) -> Optional[str]:
        """Wait until it serves (its ``url``); None if it was shut down or
        ``timeout`` seconds passed first."""
        return self._server.wait_ready(timeout)


def run(app: Any, **options: Any) -> None:
    """Serve ``app`` until SIGINT or SIGTERM; return after the graceful
    shutdown. See ``Server`` for ``app`` and the keywords."""
    Server(app, **options).serve()
