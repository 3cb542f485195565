"""The slow-client probe's app: /upload reads its whole body through
wsgi.input (what ties a pool thread to a trickling client when the body is
streamed), /fast answers at once. (shared/probe_app.py has no body route.)"""


def wsgi(environ, start_response):
    if environ.get("PATH_INFO") == "/upload":
        body = environ["wsgi.input"].read()
        answer = b"%d" % len(body)
    else:
        answer = b"fast"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(answer)))])
    return [answer]
