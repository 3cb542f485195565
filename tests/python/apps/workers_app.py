"""The supervisor's tests (test_workers.py): each response names the worker
process that served it; /slow?s=SECONDS sleeps first, and notes its start in
$M0_TEST_STARTS (one pid a line) so a test knows which workers hold one;
/busy?ms=MS spins holding the GIL (a CPU-bound view)."""

import os
import time
from urllib.parse import parse_qs


def app(environ, start_response):
    if environ["PATH_INFO"] == "/slow":
        starts = os.environ.get("M0_TEST_STARTS")
        if starts:
            with open(starts, "a") as f:
                f.write(f"{os.getpid()}\n")
        time.sleep(float(parse_qs(environ["QUERY_STRING"]).get("s", ["1"])[0]))
    elif environ["PATH_INFO"] == "/busy":
        end = time.perf_counter() + float(parse_qs(environ["QUERY_STRING"]).get("ms", ["1"])[0]) / 1000
        while time.perf_counter() < end:
            pass
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
