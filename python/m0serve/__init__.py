"""m0serve: a thread-per-core Python application server on io_uring, written in Rust.

Serve a WSGI or ASGI application from the command line::

    m0serve --port 8000 myproject.asgi:application

or ``python -m m0serve ...`` (the same options; ``m0serve --help`` lists
them), or from Python, with every flag as a keyword::

    import m0serve

    if __name__ == "__main__":
        m0serve.run("main:app", port=8000, workers=2)
"""

from m0serve._api import Server, run
from m0serve._m0serve import __version__

__all__ = ["Server", "__version__", "run"]
