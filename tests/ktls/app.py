"""The guest test's app: a small answer at /hello, and the length of what
is posted to /upload."""


def app(environ, start_response):
    if environ["PATH_INFO"] == "/upload":
        body = str(len(environ["wsgi.input"].read())).encode()
    else:
        body = b"hello\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
