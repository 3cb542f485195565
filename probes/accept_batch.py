#!/usr/bin/env python3
"""probes/accept_batch.py — do new connections wait for the ones already held?

The seed's shape, on the loop-only pool (--blocking-threads 0: the core thread
runs the view itself, so admitting a connection with its eager read IS serving
its request). One core:

  1. the cost of one /slow?ms=10 request is measured first, on this box;
  2. a keep-alive connection K is established (and answered once);
  3. K holds the core for 100 ms (/slow?ms=100) while a NEW connection sends
     /slow?ms=600, so that the blocker is admitted out of the backlog with its
     request already there: its admission (the eager read) parks the core;
  4. meanwhile 120 new connections queue, each with /slow?ms=10;
  5. then K sends /fast.

Verdicts (both backends):
  - /fast is answered within one and a half batches of the blocker's answer,
    in the measured cost of a request (the burst is taken in batches of 16,
    after the pass's other events, so K's request does not wait for it);
  - all 120 are answered (a batch stranded behind an edge-triggered listener
    would time out instead);
  - no two of their answers are more than 500 ms apart (a wait that blocked
    between owed batches would open such gaps);
and the negative arm, M0_ACCEPT_BATCH=0 (drain everything in one pass): at
least two thirds of the burst comes before /fast, or the probe cannot see the
drain it guards against.

    python probes/accept_batch.py [--m0serve PATH] [--backend uring|portable] [--arms batch,drain]

Exit 0 when every verdict holds, 1 otherwise.
"""
import argparse
import statistics
import sys
import time

from common import Conn, Server, request, wait_answers

BURST = 120
BATCH = 16
BLOCKER_MS = 600
SLOW_MS = 10
HOLD_MS = 100
MAX_GAP_S = 0.5


def cost_of_one(addr):
    c = Conn(addr)
    times = []
    for _ in range(12):
        t = time.monotonic()
        c.send(request("/slow?ms=%d" % SLOW_MS))
        got = wait_answers([c], {c: 1}, 10)[c]
        if not got:
            sys.exit("probe: no answer while measuring the cost of a request")
        times.append(got[0][1] - t)
    c.close()
    return statistics.median(times[2:])


def run_arm(args, name):
    env = {"M0_ACCEPT_BATCH": "0"} if name == "drain" else {}
    server_args = ["--cores", "1", "--blocking-threads", "0", "--backend", args.backend]
    with Server(args.m0serve, server_args, env=env) as server:
        cost = cost_of_one(server.addr)
        keep = Conn(server.addr)
        keep.send(request("/fast"))
        if not wait_answers([keep], {keep: 1}, 10)[keep]:
            sys.exit("probe: the keep-alive connection was not answered")
        # The blocker must be admitted inside a listen batch with its request
        # already there for the eager read, as a connection out of a backlog
        # is: K first holds the core for a moment, and the blocker queues
        # behind it.
        keep.send(request("/slow?ms=%d" % HOLD_MS))
        time.sleep(0.02)
        blocker = Conn(server.addr)
        blocker.send(request("/slow?ms=%d" % BLOCKER_MS))
        if not wait_answers([keep], {keep: 1}, 10)[keep]:
            sys.exit("probe: the keep-alive connection's hold was not answered")
        time.sleep(0.1)  # the core is inside the blocker now
        burst = []
        for _ in range(BURST):
            c = Conn(server.addr)  # completes in the kernel's backlog
            c.send(request("/slow?ms=%d" % SLOW_MS))
            burst.append(c)
        time.sleep(0.05)
        keep.send(request("/fast"))
        conns = [blocker, keep] + burst
        budget = 15 + BURST * cost * 4
        got = wait_answers(conns, {c: 1 for c in conns}, budget)
        for c in conns:
            c.close()
    t_block = got[blocker][0][1] if got[blocker] else None
    t_fast = got[keep][0][1] if got[keep] else None
    answered = sorted(a[0][1] for c in burst for a in [got[c]] if a)
    if t_block is None or t_fast is None:
        print("%-6s FAIL: blocker answered %s, /fast answered %s" % (name, t_block is not None, t_fast is not None))
        return False
    fast_after = t_fast - t_block
    before_fast = sum(1 for t in answered if t < t_fast)
    marks = [t_block] + answered
    widest = max((b - a for a, b in zip(marks, marks[1:])), default=0.0)
    last = (answered[-1] - t_block) if answered else float("nan")
    bound = 1.5 * BATCH * cost
    line = (
        "%-6s cost %.1f ms | /fast %.0f ms after the blocker (bound %.0f) | burst: %d/%d answered, "
        "%d before /fast, last %.0f ms after the blocker, widest gap %.0f ms"
        % (name, cost * 1000, fast_after * 1000, bound * 1000, len(answered), BURST, before_fast, last * 1000, widest * 1000)
    )
    if name == "batch":
        checks = [
            (fast_after <= bound, "/fast within 1.5 batches"),
            (len(answered) == BURST, "all %d answered" % BURST),
            (widest <= MAX_GAP_S, "no gap over %.0f ms" % (MAX_GAP_S * 1000)),
        ]
    else:
        checks = [(before_fast >= 2 * BURST / 3, "at least two thirds of the burst before /fast (negative arm)")]
    failed = [why for ok, why in checks if not ok]
    print(line + (" | PASS" if not failed else " | FAIL: " + "; ".join(failed)))
    return not failed


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--m0serve", default="m0serve")
    p.add_argument("--backend", default="uring")
    p.add_argument("--arms", default="batch,drain")
    args = p.parse_args()
    results = [run_arm(args, a.strip()) for a in args.arms.split(",")]
    print("accept-batch (%s): %s" % (args.backend, "all verdicts hold" if all(results) else "A VERDICT FAILED"))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
