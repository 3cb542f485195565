"""The gap a drain must cover: how long after the last byte of an answer a
keep-alive client that sends back to back has its next request on the wire.
Eight http.client threads (the shape of tests/python/test_drain_loses_nothing.py)
GET / of tests/python/apps/workers_app.py on m0serve (--workers 2), the server
pinned to CPU 0 and this client to CPU 1; each thread notes, per request,
the time from reading its answer's last byte to its next request written
(the request's own write included).
The drain holds an idle keep-alive connection M0_DRAIN_IDLE_MS (1 s by
default) past its last answer: that must dwarf this gap plus a round trip.

    bench/.venv/bin/python bench/drain_gap.py   # SECONDS (5)

Writes bench/results/drain-idle-gap.md and its JSON."""

from __future__ import annotations

import datetime
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECONDS = float(os.environ.get("SECONDS_", os.environ.get("SECONDS", "5")))
THREADS = 8


def main() -> None:
    os.sched_setaffinity(0, {1})
    m0serve = Path(sys.executable).parent / "m0serve"
    server = subprocess.Popen(
        ["taskset", "-c", "0", str(m0serve), "--workers=2", "--port=0", "--app-dir", "tests/python/apps",
         "workers_app:app"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True,
    )
    try:
        port = None
        for line in server.stderr:
            m = re.search(r"ready on http://127.0.0.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        assert port, "m0serve did not start"
        gaps: list[float] = []
        lock = threading.Lock()
        end = time.monotonic() + SECONDS

        def client() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            mine = []
            answered = None
            while time.monotonic() < end:
                conn.request("GET", "/")  # written to the socket on return
                if answered is not None:
                    mine.append(time.perf_counter() - answered)
                conn.getresponse().read()
                answered = time.perf_counter()
            conn.close()
            with lock:
                gaps.extend(mine)

        threads = [threading.Thread(target=client) for _ in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        server.terminate()
        server.wait(30)
    gaps.sort()
    us = lambda q: gaps[min(len(gaps) - 1, int(q * len(gaps)))] * 1e6
    row = {"requests": len(gaps), "p50_us": us(0.5), "p99_us": us(0.99), "p999_us": us(0.999), "max_us": gaps[-1] * 1e6,
           "mean_us": statistics.mean(gaps) * 1e6}
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    results = ROOT / "bench" / "results"
    (results / f"drain-idle-gap-{stamp}.json").write_text(json.dumps(row, indent=1) + "\n")
    (results / "drain-idle-gap.md").write_text(
        "# The gap a drain's hold must cover: an answer's last byte to the next request, back to back\n\n"
        f"{stamp}: {THREADS} http.client threads on kept-alive connections, GET / of workers_app "
        f"(m0serve --workers 2 on CPU 0, the client on CPU 1), {SECONDS:g} s, {os.uname().release}.\n"
        f"Raw: [drain-idle-gap-{stamp}.json](drain-idle-gap-{stamp}.json).\n\n"
        "| gaps | p50 | p99 | p99.9 | max |\n|---:|---:|---:|---:|---:|\n"
        f"| {row['requests']} | {row['p50_us']:.1f} µs | {row['p99_us']:.1f} µs | {row['p999_us']:.1f} µs | {row['max_us'] / 1000:.2f} ms |\n\n"
        "The client's side alone; a network adds one round trip. The drain holds an idle keep-alive "
        "connection 1 s past its last answer (M0_DRAIN_IDLE_MS), orders of magnitude above the tail here.\n"
    )
    print(json.dumps(row))


if __name__ == "__main__":
    main()
