#!/usr/bin/env python3
"""Memory per idle keep-alive connection, side by side.

    python bench/idle.py SPEC.json

SPEC is compare.py's (name, title, arms, "rounds"), plus "idle": how many
connections to hold (10000 by default) and "path". Each round starts every
server afresh (freed memory stays in a server's allocator, so a second round
on the same process would measure reuse), then, for every arm in turn: the
server's resident memory (every process of its session, from
/proc/PID/status VmRSS) is read, `idle` connections are opened, each sends one
keep-alive request and reads its whole answer, then they sit idle for a
second and the memory is read again; the connections are closed and the next
arm goes. The table gives each arm's median of (after - before) / idle in KiB.
The first request on each connection is what a real keep-alive client leaves
behind: whatever a server keeps per connection between requests.
"""
import json
import os
import re
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import save_results, session_processes, start_servers, stop_servers  # noqa: E402


def session_rss_kib(sid):
    """Resident memory (KiB) of session `sid`'s processes."""
    total = 0
    for pid, _ in session_processes(sid):
        try:
            status = open("/proc/%s/status" % pid).read()
        except OSError:
            continue
        m = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        total += int(m.group(1)) if m else 0
    return total


def one_request(port, path):
    """A connection that has been answered once and is left open."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: bench\r\n\r\n" % path.encode())
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(65536)
        if not chunk:
            raise OSError("closed before the answer")
        got += chunk
    head, body = got.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
    while len(body) < length:
        body += s.recv(65536)
    return s


def hold(port, sid, count, path):
    """Open `count` answered keep-alive connections to `port` and measure the
    growth of session `sid`'s memory, then close them."""
    time.sleep(0.5)
    before = session_rss_kib(sid)
    conns, failed = [], 0
    for _ in range(count):
        try:
            conns.append(one_request(port, path))
        except OSError:
            failed += 1
    time.sleep(1.0)
    after = session_rss_kib(sid)
    for c in conns:
        c.close()
    return {"before_kib": before, "after_kib": after, "held": len(conns), "failed": failed,
            "kib_per_conn": (after - before) / max(len(conns), 1)}


def main():
    spec = json.load(open(sys.argv[1]))
    count, path = spec.get("idle", 10000), spec.get("path", "/")
    # Fresh servers every round: memory a server freed stays in its
    # allocator, so a second round on the same process would measure reuse.
    runs = []
    for rnd in range(1, spec["rounds"] + 1):
        servers = start_servers(spec, lambda port: one_request(port, path).close())
        try:
            sessions = {port: proc.pid for proc, port in servers.values()}
            for arm in spec["arms"]:
                _, port = servers[arm["name"]]
                r = dict(hold(port, sessions[port], count, path), round=rnd, arm=arm["name"])
                runs.append(r)
                print(json.dumps(r), flush=True)
        finally:
            stop_servers(servers)

    summary = {}
    for arm in spec["arms"]:
        mine = [r for r in runs if r["arm"] == arm["name"]]
        summary[arm["name"]] = {
            "kib_per_conn": statistics.median(r["kib_per_conn"] for r in mine),
            "before_mib": statistics.median(r["before_kib"] for r in mine) / 1024,
            "after_mib": statistics.median(r["after_kib"] for r in mine) / 1024,
            "failed": sum(r["failed"] for r in mine),
        }
    targets = spec.get("targets", {})
    rows = ["| server | KiB per idle connection | target | RSS before | RSS with them open | failed |",
            "|---|---:|---|---:|---:|---:|"]
    for arm in spec["arms"]:
        s, t = summary[arm["name"]], targets.get(arm["name"])
        verdict = "" if t is None else "<= %g KiB: %s" % (t, "met" if s["kib_per_conn"] <= t else "MISSED")
        rows.append("| %s | %.1f | %s | %.1f MiB | %.1f MiB | %d |" % (
            arm.get("label", arm["name"]), s["kib_per_conn"], verdict, s["before_mib"], s["after_mib"],
            s["failed"]))
    setup = "%d keep-alive connections answered once (GET %s) and held idle, %d alternating rounds, %d CPUs, Linux %s." % (
        count, path, spec["rounds"], os.cpu_count(), os.uname().release)
    save_results(spec, runs, summary, setup, rows)


if __name__ == "__main__":
    main()
