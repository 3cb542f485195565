#!/usr/bin/env python3
"""probes/pool_fairness.py — does the pool share the GIL fairly?

Four pool threads, sixteen keep-alive connections against /busy?ms=0.3 of
shared/probe_app.py (a view that holds the GIL), three arms:

  fair     the default (hand-off barrier + keep rule)          must be IN order
  convoy   M0_POOL_TURN=0 (no barrier, no keep rule)           must be OUT of order
  nokeep   M0_POOL_TURN_KEEP=0 (barrier, a drop every job)     printed, not judged

Judged by ORDER, which a noisy machine does not blur: every request gets a
global sequence number as it is sent; a request is *overtaken* by each request
sent after it that is answered before it. A fair pool answers roughly in the
order it was asked (overtaken by at most a few slices' worth of jobs); a convoy
starves a thread that already took its job while the others serve hundreds of
later requests. The verdict compares the worst overtaking with a bound in
*connections* (16 in flight at any time), not milliseconds. Latency (p50, p99,
max) and requests per second are printed beside it.

The convoy arm starves in every run measured here (overtaken by 2300 to 9400,
max latency 0.8 to 3 s); it gets up to three runs all the same. The fair arm
must be in order (worst measured in quiet runs: 45 to 59 against the bound of
64; one run in about fifteen stalled for hundreds of milliseconds, so it gets
a second run). The keep-off arm is printed but NOT judged: on this 2-core box
with this client its starvation comes in episodes (runs of 5-8 s measured 51,
52, 56, 63, 75, 82, 113, 137, 364, 418, 4504, 7950) at every load tried (0.1
to 1 ms views, 8 to 32 connections), so no bound separates it from the fair
arm; the keep rule is held by the pool's unit tests instead (kept jobs > 0
with it, 0 without).

    python probes/pool_fairness.py [--m0serve PATH] [--backend uring|portable]
           [--seconds S] [--arms fair,convoy,nokeep]

Exit 0 when every arm's verdict holds, 1 otherwise.
"""
import argparse
import bisect
import itertools
import selectors
import sys
import time

from common import Conn, Server, percentile, request

CONNECTIONS = 16
THREADS = 4
PATH = "/busy?ms=0.3"

# A fair pool is overtaken by at most a few slices of jobs: four threads each
# taking ~3 jobs of 0.3 ms per 1 ms slice ahead of a request, plus the sixteen
# in flight. Four times the connections leaves room for scheduling noise; the
# convoy measured here overtakes by hundreds.
FAIR_BOUND = 4 * CONNECTIONS

ARMS = {
    "fair": ({}, "in order"),
    "convoy": ({"M0_POOL_TURN": "0"}, "out of order"),
    # Measured and printed, not judged: see the module doc.
    "nokeep": ({"M0_POOL_TURN_KEEP": "0"}, "reported"),
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
    off must be out of order; its starvation comes in episodes, so it gets up
    to `--attempts` runs to show one. Every run is printed."""
    expect = ARMS[name][1]
    if expect == "reported":
        _, line = measure(args, name)
        print("%s | (not judged)" % line, flush=True)
        return True
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
    p.add_argument("--ms", type=float, default=0.3, help="the view's GIL-holding time")
    p.add_argument("--connections", type=int, default=CONNECTIONS)
    p.add_argument("--attempts", type=int, default=3, help="runs an arm with a rule off gets to starve")
    args = p.parse_args()
    PATH = "/busy?ms=%g" % args.ms
    CONNECTIONS = args.connections
    FAIR_BOUND = 4 * CONNECTIONS
    results = [run_arm(args, a.strip()) for a in args.arms.split(",")]
    print("pool-fairness: %s" % ("all verdicts hold" if all(results) else "A VERDICT FAILED"))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
