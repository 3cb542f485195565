#!/usr/bin/env python3
"""A metrics scrape under load (issue 12, point 4): m0serve --workers 2
--cores 1 on GET / of shared/probe_app.py:wsgi, wrk -t1 -c64 for DURATION
seconds, and a scrape of --metrics-address every 100 ms meanwhile. Reports
the scrapes' latency (median, p99, max) and compares the requests counter
(summed over both workers' series, less what it read before the load) with
wrk's count of requests. Target: every scrape under 50 ms, and the counter
equal to wrk's count within the requests answered while the last scrape ran.

    bench/.venv/bin/python bench/scrape.py   # DURATION (10)

Writes bench/results/scrape-<date>.json and bench/results/scrape.md."""
import json
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "bench", ".venv", "bin")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def requests_total(url):
    """The sum of m0serve_requests_total over every series, and the scrape's time."""
    t0 = time.perf_counter()
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    took = time.perf_counter() - t0
    total = sum(float(m.group(1)) for m in re.finditer(r"^m0serve_requests_total\{[^}]*\} (\S+)$", text, re.M))
    workers = set(re.findall(r'^m0serve_requests_total\{[^}]*worker="(\d+)"', text, re.M))
    return total, took, workers


def main():
    duration = int(os.environ.get("DURATION", "10"))
    shared = next(os.path.abspath(d) for d in ("../shared", "shared") if os.path.exists(os.path.join(d, "probe_app.py")))
    port, mport = free_port(), free_port()
    cmd = [os.path.join(VENV, "m0serve"), "--workers", "2", "--cores", "1", "--port", str(port),
           "--metrics-address", f"127.0.0.1:{mport}", "--log-level", "warn", "--app-dir", shared, "probe_app:wsgi"]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{mport}/metrics"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).read()
                requests_total(url)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit("bench: the server did not come up")
                time.sleep(0.1)
        before, _, _ = requests_total(url)
        wrk = subprocess.Popen(["wrk", "-t1", "-c64", f"-d{duration}s", f"http://127.0.0.1:{port}/"],
                               stdout=subprocess.PIPE, text=True)
        scrapes = []
        while wrk.poll() is None:
            _, took, _ = requests_total(url)
            scrapes.append(took * 1000)
            time.sleep(0.1)
        out = wrk.stdout.read()
        after, last_took, workers = requests_total(url)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    sent = int(re.search(r"(\d+) requests in", out).group(1))
    counted = int(after - before)
    s = sorted(scrapes)
    summary = {
        "scrapes": len(s), "median_ms": statistics.median(s), "p99_ms": s[min(len(s) - 1, int(len(s) * 0.99))],
        "max_ms": s[-1], "wrk_requests": sent, "counted": counted, "difference": counted - sent,
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), "workers_seen": sorted(workers),
    }
    stamp = time.strftime("%Y-%m-%dT%H%M%SZ", time.gmtime())
    doc = {"date": stamp, "machine": {"cpus": os.cpu_count(), "kernel": platform.release()},
           "config": {"cmd": " ".join(cmd[1:]), "wrk": f"-t1 -c64 -d{duration}s"}, "scrape_ms": scrapes,
           "summary": summary}
    results = os.path.join(ROOT, "bench", "results")
    with open(os.path.join(results, f"scrape-{stamp}.json"), "w") as f:
        json.dump(doc, f, indent=2)
    verdict = "met" if summary["max_ms"] < 50 else "MISSED"
    md = f"""# A metrics scrape under load

{stamp}: `m0serve {doc['config']['cmd']}` under `wrk {doc['config']['wrk']}`
({summary['rps']:,.0f} req/s), a scrape every 100 ms ({os.cpu_count()} CPUs, Linux {platform.release()}).
Raw: [scrape-{stamp}.json](scrape-{stamp}.json).

| scrapes | median | p99 | max | target: every scrape < 50 ms | wrk's requests | counted (both workers) | difference |
|---:|---:|---:|---:|---|---:|---:|---:|
| {summary['scrapes']} | {summary['median_ms']:.2f} ms | {summary['p99_ms']:.2f} ms | {summary['max_ms']:.2f} ms | {verdict} | {sent:,} | {counted:,} | {counted - sent:+d} |

The counter counts a request once its answer's last byte is written; wrk
counts it once the answer is read, so the two agree exactly once the load has
stopped (the final scrape is taken after wrk exits). Series seen for workers
{', '.join(summary['workers_seen'])}.
"""
    with open(os.path.join(results, "scrape.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
