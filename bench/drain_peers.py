"""Drains side by side (issue 33, points 1 and 2), m0serve against the peers
of shared/bench-peers.txt.

Rolls: eight http.client threads (half on one keep-alive connection each, a
new one only after `Connection: close`; half on a new connection per
request; none retrying: tests/python/test_drain_loses_nothing.py's shape)
GET / while the server, two workers, is rolled with SIGHUP three times,
ROLL_GAP seconds apart; the requests lost (any error) and the non-2xx are
counted. WSGI (tests/python/apps/workers_app.py) on m0serve, gunicorn's
gthread workers and Granian; ASGI (tests/python/apps/streams.py) on m0serve
and uvicorn.

Streams: one client reads the server-sent events of streams.py's /sse (an
app that ends its stream when receive() says http.disconnect, as
sse-starlette's do) with a 60 s timeout; SIGTERM a second in; the time to
the server's exit and how the client's stream ended (clean: the chunked
terminator; cut: the connection closed mid-stream; open: still streaming at
the exit or at the 60 s cap).

    bench/.venv/bin/python bench/drain_peers.py   # REPEATS (2), ROLL_GAP (3)

Writes bench/results/drain-peers.md and its JSON. Servers on CPU 0, the
clients on CPU 1. The counts, not the timings, are the measurement."""

from __future__ import annotations

import datetime
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ROOT / "tests" / "python" / "apps"
BIN = Path(sys.executable).parent
REPEATS = int(os.environ.get("REPEATS", "2"))
ROLL_GAP = float(os.environ.get("ROLL_GAP", "3"))
CLIENTS = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def roll_servers(port: int) -> dict:
    m0 = [str(BIN / "m0serve"), "--workers=2", f"--port={port}", "--app-dir", str(APPS), "--log-level=warn"]
    return {
        "m0serve (WSGI)": m0 + ["workers_app:app"],
        "m0serve (ASGI)": m0 + ["streams:app"],
        "gunicorn gthread": [str(BIN / "gunicorn"), "-w", "2", "-k", "gthread", "--threads", "4", "-b",
                             f"127.0.0.1:{port}", "--chdir", str(APPS), "--log-level", "warning", "workers_app:app"],
        "granian (WSGI)": [str(BIN / "granian"), "--interface", "wsgi", "--workers", "2", "--port", str(port),
                           "--working-dir", str(APPS), "--log-level", "warning", "workers_app:app"],
        "uvicorn (ASGI)": [str(BIN / "uvicorn"), "--workers", "2", "--port", str(port), "--app-dir", str(APPS),
                           "--log-level", "warning", "streams:app"],
    }


def stream_servers(port: int) -> dict:
    m0 = [str(BIN / "m0serve"), f"--port={port}", "--app-dir", str(APPS), "--log-level=warn"]
    return {
        "m0serve --stream-drain-timeout 0": m0 + ["--stream-drain-timeout=0", "streams:app"],
        "m0serve (default: told at 29 s)": m0 + ["streams:app"],
        "uvicorn": [str(BIN / "uvicorn"), "--port", str(port), "--app-dir", str(APPS), "--log-level", "warning",
                    "streams:app"],
        "granian": [str(BIN / "granian"), "--interface", "asgi", "--port", str(port), "--working-dir", str(APPS),
                    "--log-level", "warning", "streams:app"],
        "hypercorn": [str(BIN / "hypercorn"), "-b", f"127.0.0.1:{port}", "--log-level", "warning",
                      "streams:app"],
    }


def start(argv: list, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(["taskset", "-c", "0"] + argv, cwd=APPS, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/")
            if conn.getresponse().status == 200:
                conn.close()
                time.sleep(1)  # every worker up
                return proc
        except OSError:
            time.sleep(0.1)
    stop(proc)
    raise RuntimeError(f"{argv[0]} did not start")


def stop(proc: subprocess.Popen, sig=signal.SIGTERM, wait: float = 70) -> float:
    """Signal the server (its session: the peers' workers too); seconds to its exit."""
    t0 = time.monotonic()
    try:
        os.killpg(proc.pid, sig)
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
    return time.monotonic() - t0


class Clients:
    def __init__(self, port: int) -> None:
        self.port, self.ok, self.non2xx, self.lost = port, 0, 0, 0
        self.lock, self.halt = threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i < CLIENTS // 2,)) for i in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def run(self, keep: bool) -> None:
        conn = None
        while not self.halt.is_set():
            conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            try:
                conn.request("GET", "/", headers={} if keep else {"Connection": "close"})
                r = conn.getresponse()
                r.read()
                closing = (r.getheader("Connection") or "").lower() == "close"
                with self.lock:
                    self.ok += 200 <= r.status < 300
                    self.non2xx += not 200 <= r.status < 300
            except (OSError, http.client.HTTPException):
                with self.lock:
                    self.lost += 1
                closing = True
            if closing or not keep:
                conn.close()
                conn = None

    def finish(self) -> dict:
        self.halt.set()
        for t in self.threads:
            t.join(20)
        return {"answered": self.ok, "non_2xx": self.non2xx, "lost": self.lost}


def rolls(name: str, argv: list, port: int) -> dict:
    proc = start(argv, port)
    try:
        clients = Clients(port)
        time.sleep(1)
        for _ in range(3):
            os.kill(proc.pid, signal.SIGHUP)
            time.sleep(ROLL_GAP)
        counts = clients.finish()
    finally:
        stop(proc)
    print(f"rolls  {name}: {counts}", flush=True)
    return counts


def sse(name: str, argv: list, port: int) -> dict:
    proc = start(argv, port)
    outcome = {}

    def read() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("GET", "/sse")
            body = conn.getresponse().read()  # to the terminator, or IncompleteRead
            outcome["end"] = "clean" if body.endswith(b"data: told\n\n") else "clean (no goodbye)"
        except http.client.IncompleteRead:
            outcome["end"] = "cut"
        except (OSError, http.client.HTTPException) as e:
            outcome["end"] = f"cut ({type(e).__name__})"
        outcome["client_s"] = time.monotonic() - signalled

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(1)
    signalled = time.monotonic()
    exit_s = stop(proc, wait=62)
    reader.join(5)
    result = {"exit_s": round(exit_s, 2), "stream": outcome.get("end", "open at the exit"),
              "client_s": round(outcome.get("client_s", float("nan")), 2)}
    print(f"stream {name}: {result}", flush=True)
    return result


def main() -> None:
    os.sched_setaffinity(0, {1})
    port = free_port()
    out = {"rolls": {}, "streams": {}}
    for _ in range(REPEATS):
        for name, argv in roll_servers(port).items():
            out["rolls"].setdefault(name, []).append(rolls(name, argv, port))
    for name, argv in stream_servers(port).items():
        out["streams"][name] = sse(name, argv, port)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    results = ROOT / "bench" / "results"
    build = (BIN.parent / "m0serve-build")
    out["m0serve_build"] = build.read_text().strip() if build.exists() else "?"
    (results / f"drain-peers-{stamp}.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = [
        "# Drains side by side: rolls under clients that never retry, and a server-sent-events stream at SIGTERM\n",
        f"{stamp}, m0serve {out['m0serve_build']}, peers as in shared/bench-peers.txt, {os.uname().release}; "
        f"servers on CPU 0, clients on CPU 1. Raw: [drain-peers-{stamp}.json](drain-peers-{stamp}.json). "
        "Made by bench/drain_peers.py.\n",
        f"## Three SIGHUP rolls of two workers, {ROLL_GAP:g} s apart, under 8 clients (4 kept alive), each run\n",
        "| server | lost | non-2xx | answered |", "|---|---|---|---|",
    ]
    for name, runs in out["rolls"].items():
        lines.append(f"| {name} | {', '.join(str(r['lost']) for r in runs)} | "
                     f"{', '.join(str(r['non_2xx']) for r in runs)} | {', '.join(str(r['answered']) for r in runs)} |")
    lines += ["", "## An endless SSE stream (ends on http.disconnect) at SIGTERM; the client waits 60 s\n",
              "| server | exit after SIGTERM | the stream |", "|---|---|---|"]
    for name, r in out["streams"].items():
        capped = " (still serving it: killed at the 62 s cap)" if r["exit_s"] >= 62 else ""
        lines.append(f"| {name} | {r['exit_s']} s{capped} | {r['stream']} |")
    (results / "drain-peers.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
