#!/usr/bin/env python3
"""The seed's Django mixed workload, side by side.

A Django project (bench/apps/mixedsite) with a fast view and a 200 ms slow
view that releases the GIL (a database wait). Four pool threads each:
m0serve --cores 1 --blocking-threads 4 against Granian (--workers 1
--blocking-threads 4). For each slow level 0, 1, 2, that many slow requests
are held in flight (each re-sent as soon as it is answered) while wrk drives
the fast route at 16 keep-alive connections. Servers alternate round by round.
Reports the fast route's requests per second, p99 and max.

    python bench/django_mixed.py VENV_BIN    # ROUNDS (3), DURATION (6s) from the environment

Writes bench/results/django-mixed-<date>.json and django-mixed.md.
"""
import http.client
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import ROOT, free_port, parse_wrk, wait_port  # noqa: E402

SITE = os.path.join(ROOT, "bench", "apps", "mixedsite")
LEVELS = (0, 1, 2)


def servers(venv):
    return {
        "m0serve": [os.path.join(venv, "m0serve"), "--cores", "1", "--blocking-threads", "4",
                    "--port", "{port}", "--log-level", "warn", "--app-dir", SITE, "wsgi:application"],
        "granian": [os.path.join(venv, "granian"), "--interface", "wsgi", "--workers", "1",
                    "--blocking-threads", "4", "--host", "127.0.0.1", "--port", "{port}",
                    "--working-dir", SITE, "wsgi:application"],
    }


def hold_slow(port, stop, answered):
    """Keep one slow request in flight until `stop` is set."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    while not stop.is_set():
        conn.request("GET", "/slow")
        conn.getresponse().read()
        answered.append(1)
    conn.close()


def main():
    venv = sys.argv[1]
    rounds = int(os.environ.get("ROUNDS", "3"))
    duration = os.environ.get("DURATION", "6s")
    procs, ports = {}, {}
    runs = []
    try:
        for name, cmd in servers(venv).items():
            port = free_port()
            cmd = [c.replace("{port}", str(port)) for c in cmd]
            log = open("/tmp/bench-django-mixed-%s.log" % name, "w")
            procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=SITE,
                                           start_new_session=True)
            ports[name] = port
            if not wait_port(port, procs[name]):
                sys.exit("bench: %s did not start; see %s" % (name, log.name))
            subprocess.run(["wrk", "-t1", "-c4", "-d1s", "http://127.0.0.1:%d/fast" % port], capture_output=True)
        for rnd in range(1, rounds + 1):
            for level in LEVELS:
                for name in procs:
                    stop, answered = threading.Event(), []
                    holders = [threading.Thread(target=hold_slow, args=(ports[name], stop, answered))
                               for _ in range(level)]
                    for t in holders:
                        t.start()
                    time.sleep(0.3 if level else 0)
                    out = subprocess.run(["wrk", "--latency", "-t1", "-c16", "-d" + duration,
                                          "http://127.0.0.1:%d/fast" % ports[name]],
                                         capture_output=True, text=True).stdout
                    stop.set()
                    for t in holders:
                        t.join(timeout=5)
                    r = dict(parse_wrk(out), round=rnd, server=name, slow=level, slow_answered=len(answered))
                    runs.append(r)
                    print(json.dumps(r), flush=True)
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)

    rows = ["| slow in flight | server | fast req/s | p50 | p99 | max | slow answered |",
            "|---:|---|---:|---:|---:|---:|---:|"]
    summary = {}
    for level in LEVELS:
        for name in procs:
            mine = [r for r in runs if r["server"] == name and r["slow"] == level]
            s = {k: statistics.median(r[k] for r in mine) for k in ("rps", "p50_ms", "p99_ms", "max_ms")}
            s["slow_answered"] = sum(r["slow_answered"] for r in mine)
            summary["%s/slow=%d" % (name, level)] = s
            rows.append("| %d | %s | %s | %.2f ms | %.2f ms | %.1f ms | %d |" % (
                level, name, format(round(s["rps"]), ","), s["p50_ms"], s["p99_ms"], s["max_ms"],
                s["slow_answered"]))
    stamp = time.strftime("%Y-%m-%dT%H%M%SZ", time.gmtime())
    name = "django-mixed-%s.json" % stamp
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    json.dump({"date": stamp, "rounds": rounds, "duration": duration, "runs": runs, "summary": summary,
               "machine": {"cpus": os.cpu_count(), "kernel": platform.release()}},
              open(os.path.join(ROOT, "bench/results", name), "w"), indent=2)
    md = ("# Django mixed workload: fast route at 16 connections, 0/1/2 slow (200 ms) requests in flight\n\n"
          "%s: four pool threads each, wrk -t1 -c16 -d%s, %d alternating rounds (medians), no pinning "
          "(%d CPUs, Linux %s).\nRaw runs: [%s](%s).\n\n%s\n" % (
              stamp, duration, rounds, os.cpu_count(), platform.release(), name, name, "\n".join(rows)))
    open(os.path.join(ROOT, "bench/results/django-mixed.md"), "w").write(md)
    print(md)


if __name__ == "__main__":
    main()
