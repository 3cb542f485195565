"""The smallest WSGI application: `m0serve --app-dir examples hello:app`."""


def app(environ, start_response):
    body = b"Hello from m0serve!\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
