"""Plain WSGI callables: well-behaved ones and each way an app can misbehave."""

import os


def _text(start_response, body, status="200 OK"):
    data = body.encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(data)))])
    return [data]


def hello(environ, start_response):
    return _text(start_response, "hello from " + environ["PATH_INFO"])


def sleepy(environ, start_response):
    """`/sleep?s=N` sleeps N seconds (a view waiting on a database); anything
    else answers at once."""
    import time
    from urllib.parse import parse_qs

    if environ["PATH_INFO"] == "/sleep":
        time.sleep(float(parse_qs(environ["QUERY_STRING"])["s"][0]))
        return _text(start_response, "slept")
    return _text(start_response, "fast")


class holder:
    """`plain:holder.inner.app`: dotted attributes."""

    class inner:
        app = staticmethod(hello)


def make_hello():
    """A factory (`--factory plain:make_hello`)."""
    return hello


def failing_factory():
    raise RuntimeError("the factory failed on purpose")


not_callable = "I am a string, not an application"


def cwd(environ, start_response):
    """The working directory and a file read relative to it (--working-dir)."""
    with open("marker.txt") as f:
        marker = f.read().strip()
    return _text(start_response, os.getcwd() + "\n" + marker)


def raises(environ, start_response):
    """/boom raises before start_response; anything else is fine."""
    if environ["PATH_INFO"] == "/boom":
        raise RuntimeError("boom on purpose")
    return _text(start_response, "still serving")


def raises_after_start(environ, start_response):
    """Raises in the body iterable, after start_response but before any byte."""
    start_response("200 OK", [("Content-Type", "text/plain")])

    def body():
        raise RuntimeError("boom in the iterable")
        yield b"never"

    return body()


def returns_str(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return "a str, not an iterable of bytes"


def bad_start_response(environ, start_response):
    """Each path calls start_response wrongly in its own way."""
    path = environ["PATH_INFO"]
    if path == "/status":
        start_response("OK", [])  # no status code
    elif path == "/headers":
        start_response("200 OK", {"Content-Type": "text/plain"})  # a dict, not a list
    elif path == "/twice":
        start_response("200 OK", [])
        start_response("500 Oops", [])  # a second call without exc_info
    elif path == "/never":
        pass  # never called
    elif path == "/ok":
        return _text(start_response, "fine")
    return [b"body"]


def listen_env(environ, start_response):
    """The socket-activation variables this worker's process sees (`-` when unset)."""
    seen = [os.environ.get(name, "-") for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")]
    return _text(start_response, " ".join(seen))


def server_address(environ, start_response):
    """Where the request came in, as the app is told: SERVER_NAME SERVER_PORT."""
    return _text(start_response, f"{environ['SERVER_NAME']} {environ['SERVER_PORT']}")
