"""m0serve: a thread-per-core Python application server on io_uring, written in Rust.

Serve a WSGI application from the command line::

    m0serve --port 8000 myproject.wsgi:application

or ``python -m m0serve ...`` (the same options; ``m0serve --help`` lists them).
"""

from m0serve._m0serve import __version__

__all__ = ["__version__"]
