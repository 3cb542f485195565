#!/usr/bin/env python3
"""WebSocket echo round trips, side by side, arms alternating round by round.

    python bench/ws_echo.py SPEC.json

SPEC (JSON): {
  "name": "ws-echo", "title": "...", "path": "/",
  "client": "target/release/examples/ws_bench",   # the load client (examples/ws_bench.rs)
  "connections": 16, "seconds": 5, "message_bytes": 64, "rounds": 3,
  "message_kind": "text",                        # optional: or "binary"
  "baselines": ["granian", "uvicorn"],           # ratios are to these arms' median msgs/s
  "arms": [...]                                  # as in compare.py
}

Servers are started and stopped by compare.py's start_servers/stop_servers.
Each round runs ws_bench against every arm in turn; the table gives medians
(msgs/s, the server's CPU time per message, p50, p99, max) and the ratios of
each arm's median msgs/s.
"""
import json
import os
import platform
import subprocess
import sys

from compare import (alternate, children_cpu, medians, save_results, session_cpu_seconds,  # noqa: E402
                     start_servers, stop_servers)


def ws_bench(spec, port, connections, seconds):
    """One ws_bench run's JSON line (its errors listed if it failed), with
    client_cpu: the client's CPU seconds per second of the run, to show it
    was not the bottleneck on a machine it shares with the server."""
    url = "ws://127.0.0.1:%d%s" % (port, spec["path"])
    cpu = children_cpu()
    out = subprocess.run([spec["client"], url, str(connections), str(seconds), str(spec["message_bytes"]),
                          spec.get("message_kind", "text")], capture_output=True, text=True)
    cpu = children_cpu() - cpu
    try:
        r = json.loads(out.stdout)
    except ValueError:
        r = {"msgs_per_sec": 0.0, "p50_ms": None, "p99_ms": None, "max_ms": None, "seconds": seconds,
             "errors": ["ws_bench exited %d: %s" % (out.returncode, out.stderr.strip()[-300:])]}
    r["client_cpu"] = round(cpu / max(r["seconds"], 1e-9), 3)
    return r


def main():
    spec = json.load(open(sys.argv[1]))
    servers = start_servers(spec, lambda port: ws_bench(spec, port, 4, 1))
    sessions = {port: proc.pid for proc, port in servers.values()}

    def measured(port):
        """A run, with the server's CPU time per echoed message (its session's
        processes, as compare.py counts them)."""
        before = session_cpu_seconds(sessions[port])
        r = ws_bench(spec, port, spec["connections"], spec["seconds"])
        spent = session_cpu_seconds(sessions[port]) - before
        r["cpu_us"] = spent * 1e6 / r["messages"] if r.get("messages") else None
        return r
    try:
        runs = alternate(spec, servers, measured)
    finally:
        stop_servers(servers)

    summary = medians(spec, runs, ("msgs_per_sec", "p50_ms", "p99_ms", "max_ms", "client_cpu", "cpu_us"))
    for arm in spec["arms"]:
        summary[arm["name"]]["errors"] = sum(len(r["errors"]) for r in runs if r["arm"] == arm["name"])
    for s in summary.values():
        s["ratios"] = {b: s["msgs_per_sec"] / summary[b]["msgs_per_sec"] for b in spec["baselines"]}
    rows = ["| server | median msgs/s | %s | CPU per message | p50 | p99 | max | client CPU | errors |" % " | ".join(
                "ratio to %s" % b for b in spec["baselines"]),
            "|---|---:|%s---:|---:|---:|---:|---:|---:|" % ("---:|" * len(spec["baselines"]))]
    for arm in spec["arms"]:
        s = summary[arm["name"]]
        rows.append("| %s | %s | %s | %.1f µs | %.3f ms | %.3f ms | %.1f ms | %.2f | %d |" % (
            arm.get("label", arm["name"]), format(round(s["msgs_per_sec"]), ","),
            " | ".join("%.2fx" % s["ratios"][b] for b in spec["baselines"]),
            s["cpu_us"], s["p50_ms"], s["p99_ms"], s["max_ms"], s["client_cpu"], s["errors"]))
    setup = ("ws_bench (examples/ws_bench.rs), %d connections, %d-byte %s messages, %ss runs, "
             "%d alternating rounds per arm, no pinning (%d CPUs, Linux %s). Messages per second are echo "
             "round trips per second over all connections; client CPU is ws_bench's CPU seconds per second "
             "(of %d CPUs).") % (
        spec["connections"], spec["message_bytes"], spec.get("message_kind", "text"), spec["seconds"], spec["rounds"],
        os.cpu_count(), platform.release(), os.cpu_count())
    save_results(spec, runs, summary, setup, rows)

if __name__ == "__main__":
    main()
