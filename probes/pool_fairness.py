#!/usr/bin/env python3
"""probes/pool_fairness.py — does the pool share the GIL fairly?

Four pool threads, sixteen keep-alive connections against /busy?ms=0.3 of
shared/probe_app.py (a view that holds the GIL), three arms:

  fair     the default (hand-off barrier + keep rule)          must be IN order
  convoy   M0_POOL_TURN=0 (no barrier, no keep rule)           must be OUT of order
  nokeep   M0_POOL_TURN_KEEP=0 (barrier; each thread pops its  must be OUT of order
           job before it attaches, drops the GIL every job)

Judged by ORDER, which a noisy machine does not blur: every request gets a
global sequence number as it is sent; a request is *overtaken* by each request
sent after it that is answered before it. With the keep rule a job is taken
only by the thread holding the GIL, so the pool answers in the order the
requests were read: the fair arm measured overtaken 0 in every run on a quiet
machine. Without it, a thread pops its job and then waits for the GIL while
the holder serves later ones. The verdict compares the worst overtaking with a
bound, not milliseconds; latency (p50, p99, max) and requests per second are
printed beside it. The bound is two terms:

  one round of the connections in flight (16): the order the core reads a
      pass's requests in may differ from the order they were sent;
  the jobs of one CPython switch interval (5 ms / 0.3 ms = 17): a GIL holder
      the OS deschedules mid-job (a busy 2-CPU VM) lets a waiter's 5 ms
      timer force the GIL off it; the waiter then serves a switch interval of
      later jobs before the holder gets it back and finishes its own. CPython
      does that to any thread; the pool cannot prevent it. Measured with a
      CPU spinner beside the probe, 8 runs: the fair arm 0 to 18, single
      requests only (p99 0); CI saw 17 once. A rule off overtakes far more
      (below).

Measured here (2 CPUs, 5 s runs): fair 0 to 4 on a quiet machine (11 once);
nokeep 47 to 55 in the runs that first set a bound of 16, and 110 to 9352 in
six single runs against today's bound of 33 (p99 20 to 48); convoy 2300 to
13780, max latency 0.8 to 4.4 s (5219 and 9190 today). An arm with a rule off
gets up to three runs to show itself out of order; the fair arm gets a second
run in case a stall of the whole VM hits its first.

    python probes/pool_fairness.py [--m0serve PATH] [--backend uring|portable]
           [--seconds S] [--arms fair,convoy,nokeep]

Exit 0 when every arm's verdict holds, 1 otherwise.
"""
import argparse
import bisect
import itertools
import math
import selectors
import sys
import time

from common import Conn, Server, percentile, request

CONNECTIONS = 16
THREADS = 4
# The view's GIL-holding time (--ms).
MS = 0.3
PATH = "/busy?ms=%g" % MS

# CPython's switch interval (sys.getswitchinterval(), 5 ms by default): the
# longest a waiter lets one thread hold the GIL before forcing it off.
SWITCH_INTERVAL_MS = 5.0


def fair_bound(connections, ms):
    """One round of the connections in flight (read order) plus the jobs of
    one forced GIL switch (see the module's doc)."""
    return connections + math.ceil(SWITCH_INTERVAL_MS / ms)


FAIR_BOUND = fair_bound(CONNECTIONS, MS)

ARMS = {
    "fair": ({}, "in order"),
    "convoy": ({"M0_POOL_TURN": "0"}, "out of order"),
    "nokeep": ({"M0_POOL_TURN_KEEP": "0"}, "out of order"),
}


def drive(addr, seconds):
    """Keep one request in flight per connection for `seconds`; returns
    [(seq, sent, answered)] for every answered request."""
    conns = [Conn(addr) for _ in range(CONNECTIONS)]
    seq = itertools.count()
    inflight = {}
    done = []
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c.sock, selectors.EVENT_READ, c)
        inflight[c] = (next(seq), time.monotonic())
        c.send(request(PATH))
    end = time.monotonic() + seconds
    try:
        while inflight and time.monotonic() < end + 10:
            for key, _ in sel.select(0.5):
                c = key.data
                now = time.monotonic()
                for status in c.take():
                    if status != 200:
                        sys.exit("probe: answer %d" % status)
                    s, sent = inflight.pop(c)
                    done.append((s, sent, now))
                    if now < end:
                        inflight[c] = (next(seq), time.monotonic())
                        c.send(request(PATH))
    finally:
        sel.close()
        for c in conns:
            c.close()
    return done


def overtaking(done):
    """For each request, how many requests sent after it were answered before it."""
    by_answer = sorted(done, key=lambda r: r[2])
    # Walk answers in order; a request is overtaken by every later-sent request
    # already answered, i.e. answered seqs greater than its own.
    seen = []
    out = []
    for s, _, _ in by_answer:
        out.append(len(seen) - bisect.bisect_right(seen, s))
        bisect.insort(seen, s)
    return out


def measure(args, name):
    """One run of an arm: (in order?, the printed line)."""
    env, expect = ARMS[name]
    server_args = ["--cores", "1", "--blocking-threads", str(THREADS), "--backend", args.backend]
    with Server(args.m0serve, server_args, env=env) as server:
        # Warm up: the first requests import and compile.
        warm = Conn(server.addr)
        for _ in range(20):
            warm.send(request(PATH))
            t = time.monotonic()
            while not warm.take() and time.monotonic() - t < 5:
                time.sleep(0.001)
        warm.close()
        done = drive(server.addr, args.seconds)
    lat = [(a - s) * 1000 for _, s, a in done]
    over = overtaking(done)
    worst = max(over) if over else 0
    span = max(a for _, _, a in done) - min(s for _, s, _ in done)
    line = "%-7s %-14s overtaken max %5d p99 %4d (bound %d) | latency p50 %6.2f p99 %7.2f max %7.2f ms | %6.0f req/s" % (
        name,
        "(" + expect + ")",
        worst,
        percentile(over, 99),
        FAIR_BOUND,
        percentile(lat, 50),
        percentile(lat, 99),
        max(lat),
        len(done) / span,
    )
    return worst <= FAIR_BOUND, line


def run_arm(args, name):
    """The fair arm must be in order (in one of two runs). An arm with a rule
    off must be out of order; it gets up to `--attempts` runs to show it.
    Every run is printed."""
    expect = ARMS[name][1]
    expect_order = expect == "in order"
    # A stall of the whole VM (steal) can hit any run: the fair arm gets a
    # second run if its first shows one.
    attempts = 2 if expect_order else args.attempts
    for i in range(attempts):
        in_order, line = measure(args, name)
        ok = in_order == expect_order
        print("%s | %s" % (line, "PASS" if ok else ("FAIL" if i + 1 == attempts else "again")), flush=True)
        if ok:
            return True
    return False


def main():
    global PATH, CONNECTIONS, FAIR_BOUND
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--m0serve", default="m0serve")
    p.add_argument("--backend", default="uring")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--arms", default="fair,convoy,nokeep")
    p.add_argument("--ms", type=float, default=MS, help="the view's GIL-holding time")
    p.add_argument("--connections", type=int, default=CONNECTIONS)
    p.add_argument("--attempts", type=int, default=3, help="runs an arm with a rule off gets to starve")
    args = p.parse_args()
    PATH = "/busy?ms=%g" % args.ms
    CONNECTIONS = args.connections
    FAIR_BOUND = fair_bound(CONNECTIONS, args.ms)
    results = [run_arm(args, a.strip()) for a in args.arms.split(",")]
    print("pool-fairness: %s" % ("all verdicts hold" if all(results) else "A VERDICT FAILED"))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
