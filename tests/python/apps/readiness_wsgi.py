"""test_readiness.py's WSGI app: with $M0_TEST_GATE (a directory), the
first worker to import this passes, and the others (replacements included)
wait in the import until the test creates GATE/open. Each response names
the worker's pid; /slow?s=SECONDS sleeps first (a request in flight)."""

import os
import time
from urllib.parse import parse_qs

from gate import first_or_wait

if os.environ.get("M0_TEST_GATE"):
    first_or_wait(os.environ["M0_TEST_GATE"])


def app(environ, start_response):
    if environ["PATH_INFO"] == "/slow":
        time.sleep(float(parse_qs(environ["QUERY_STRING"])["s"][0]))
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
