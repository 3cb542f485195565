"""The supervisor's tests (test_workers.py, test_workers_spread.py,
test_recycling.py): each response names the worker process that served it;
/slow?s=SECONDS sleeps first, and notes its start in $M0_TEST_STARTS (one pid
a line) so a test knows which workers hold one; /busy?ms=MS spins holding the
GIL (a CPU-bound view); /grow?mb=N keeps N MiB more for good (a leak), and
/spike?mb=N&s=SECONDS holds N MiB for that long, then frees it (a burst);
/exit ends the process (os._exit(3)), /segv crashes it with SIGSEGV, and
/threads names each thread's allowed CPUs, /policies each thread's name and
scheduling policy (the pool's SCHED_BATCH). Importing it appends this pid
to $M0_TEST_IMPORTS when set (who imported the app)."""

import os
import time
from urllib.parse import parse_qs

_hoard = []

if os.environ.get("M0_TEST_IMPORTS"):
    with open(os.environ["M0_TEST_IMPORTS"], "a") as _f:
        _f.write(f"{os.getpid()}\n")


def app(environ, start_response):
    query = parse_qs(environ["QUERY_STRING"])
    path = environ["PATH_INFO"]
    if path == "/slow":
        starts = os.environ.get("M0_TEST_STARTS")
        if starts:
            with open(starts, "a") as f:
                f.write(f"{os.getpid()}\n")
        time.sleep(float(query.get("s", ["1"])[0]))
    elif path == "/busy":
        end = time.perf_counter() + float(query.get("ms", ["1"])[0]) / 1000
        while time.perf_counter() < end:
            pass
    elif path == "/grow":
        # Written, not just reserved, so it is resident.
        _hoard.append(b"x" * (int(query["mb"][0]) << 20))
    elif path == "/exit":
        os._exit(3)  # a view that ends its process: only its worker goes
    elif path == "/segv":
        import ctypes

        ctypes.string_at(0)  # a crash in C: SIGSEGV
    elif path == "/threads":
        # Every thread of this worker and the CPUs it may run on.
        import json

        body = json.dumps({
            task: open(f"/proc/self/task/{task}/status").read().split("Cpus_allowed_list:")[1].split()[0]
            for task in os.listdir("/proc/self/task")
        }).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
    elif path == "/policies":
        import json

        names = {os.SCHED_OTHER: "other", os.SCHED_BATCH: "batch"}
        body = json.dumps({
            task: [open(f"/proc/self/task/{task}/comm").read().strip(),
                   names.get(os.sched_getscheduler(int(task)), "other policy")]
            for task in os.listdir("/proc/self/task")
        }).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
    elif path == "/spike":
        burst = b"x" * (int(query["mb"][0]) << 20)
        time.sleep(float(query["s"][0]))
        del burst
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
