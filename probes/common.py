"""Shared pieces of the probes: start m0serve on a free port, find the probe app,
and a small non-blocking HTTP/1.1 client that time-stamps every answer.

Stdlib only; loopback only; every wait is bounded.
"""
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LISTENING = re.compile(r"listening on http://([0-9.]+):(\d+)")


def probe_app_dir():
    """The folder holding shared/probe_app.py (beside the checkout, or inside it)."""
    for d in (os.path.join(REPO, "..", "shared"), os.path.join(REPO, "shared")):
        if os.path.exists(os.path.join(d, "probe_app.py")):
            return os.path.abspath(d)
    sys.exit("probe: cannot find shared/probe_app.py beside the checkout")


class Server:
    """m0serve serving `app` (default probe_app:wsgi, from `app_dir`, default
    the shared folder), stopped with SIGTERM on exit."""

    def __init__(self, m0serve, args, env=None, start_timeout=20.0, app="probe_app:wsgi", app_dir=None):
        full_env = dict(os.environ)
        full_env.update(env or {})
        cmd = [m0serve, "--port", "0", "--app-dir", app_dir or probe_app_dir()] + args + [app]
        self.cmd = cmd
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=full_env, text=True
        )
        self.stderr = []
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.stderr.append(line)
            m = LISTENING.search(line)
            if m:
                self.addr = (m.group(1), int(m.group(2)))
                return
        self.stop()
        sys.exit("probe: m0serve did not start: %s\n%s" % (" ".join(cmd), "".join(self.stderr)))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rest = self.proc.stderr.read() if self.proc.stderr else ""
        self.stderr.append(rest or "")
        return "".join(self.stderr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def request(path, close=False):
    return ("GET %s HTTP/1.1\r\nHost: probe\r\n%s\r\n" % (path, "Connection: close\r\n" if close else "")).encode()


class Conn:
    """One keep-alive connection; parses Content-Length answers out of its buffer."""

    def __init__(self, addr, blocking_connect=True):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if blocking_connect:
            self.sock.settimeout(10)
            self.sock.connect(addr)
            self.sock.setblocking(False)
        else:
            self.sock.setblocking(False)
            self.sock.connect_ex(addr)
        self.buf = b""

    def send(self, data):
        self.sock.setblocking(True)
        self.sock.settimeout(10)
        self.sock.sendall(data)
        self.sock.setblocking(False)

    def take(self):
        """Answers complete in the buffer, as status codes, after reading what is there."""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                self.buf += chunk
        except (BlockingIOError, InterruptedError):
            pass
        out = []
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return out
            head = self.buf[:end].decode("latin-1")
            m = re.search(r"(?im)^content-length:\s*(\d+)", head)
            length = int(m.group(1)) if m else 0
            if len(self.buf) < end + 4 + length:
                return out
            out.append(int(head.split(" ", 2)[1]))
            self.buf = self.buf[end + 4 + length:]

    def close(self):
        self.sock.close()


def wait_answers(conns, want, timeout):
    """Wait until `want[c]` answers arrived on each conn; returns {conn: [(status, t)]}."""
    sel = selectors.DefaultSelector()
    got = {c: [] for c in conns}
    for c in conns:
        sel.register(c.sock, selectors.EVENT_READ, c)
    deadline = time.monotonic() + timeout
    try:
        while any(len(got[c]) < want[c] for c in conns):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _ in sel.select(min(left, 0.5)):
                c = key.data
                now = time.monotonic()
                for status in c.take():
                    got[c].append((status, now))
    finally:
        sel.close()
    return got


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]
