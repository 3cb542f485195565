#!/usr/bin/env python3
"""Side-by-side wrk comparison of servers, arms alternating round by round.

    python bench/compare.py SPEC.json

SPEC (JSON): {
  "name": "wsgi-hello",                 # results go to bench/results/NAME-<stamp>.json and NAME.md
  "title": "GET / of probe_app:wsgi",
  "path": "/", "connections": 64, "threads": 2, "duration": "5s", "rounds": 3,
  "baseline": "granian",                # ratios are to this arm's median req/s
  "arms": [{"name": "...", "cmd": ["...", "{port}", ...], "env": {...}, "cwd": "..."}, ...],
  "targets": {"arm": 1.3, ...},         # optional: ratio to the baseline an arm must reach
                                        # (judged on the per-round ratio's median)
  "cpus": {"server": "0", "client": "1"},  # optional taskset pinning
  "scheme": "https",                    # optional (default http): wrk speaks TLS to every arm
  "wrk_args": ["-H", "Connection: close"],  # optional: more wrk flags (here: a new connection per request)
  "client": "h2load",                   # optional (default wrk): nghttp2's h2load, HTTP/2 (ALPN h2 over
                                        # https, prior knowledge over http); "streams": 10 is its -m (default 1),
                                        # "client_args" more of its flags; p50/p99/max from its per-request log
  "noise": 1,                           # optional: processes spinning a CPU each, unpinned, for the whole run
  "sched": true,                        # optional: columns for the server's CPU migrations and involuntary
                                        # context switches per 1,000 requests (/proc/PID/task/TID/sched)
  "autogroup": false                    # optional (default false; BENCH_AUTOGROUP=1 too): leave the kernel's
                                        # session autogrouping on rather than turn it off for the run
}

Every server is started once, on a free loopback port ("{port}" in its
command), waited for, and stopped with SIGTERM at the end. Each round runs wrk
against every arm in turn; the table gives medians (req/s, p50, p99, max) and
the ratio of each arm's median req/s to the baseline's, the median of each
round's ratio to the baseline's run beside it (what a target is judged on:
drift between rounds falls out), the server's CPU time per request (its
session's processes, user + system, over wrk's count of requests) and wrk's
own: where wrk shares the server's CPUs, what it spends per request bounds
how far a cheaper server can pull ahead.

Each server runs in a session of its own (so its whole tree is stopped and
measured). Where the kernel autogroups sessions for the scheduler
(kernel.sched_autogroup_enabled=1, a desktop default), CPU is then shared
between the server's session and wrk's rather than between threads, which
starves pinned workers (--workers 2 measured 30k req/s instead of 71k): run
as root, the comparison turns autogrouping off for its run and restores it
after; the setup line says which held.
"""
import json
import os
import platform
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def ms(value):
    n, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", value).groups()
    return float(n) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def parse_wrk(text):
    lat = re.search(r"Latency\s+\S+\s+\S+\s+(\S+)", text)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)),
        "requests": int(re.search(r"(\d+) requests in", text).group(1)),
        "p50_ms": ms(re.search(r"^\s+50%\s+(\S+)", text, re.M).group(1)),
        "p99_ms": ms(re.search(r"^\s+99%\s+(\S+)", text, re.M).group(1)),
        "max_ms": ms(lat.group(1)) if lat else None,
        "non_2xx": int((re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text) or [0, 0])[1]),
        "socket_errors": (re.search(r"Socket errors:.*", text) or [None])[0],
    }


def parse_h2load(text, log):
    """h2load's summary, and the percentiles of its per-request log
    (--log-file: start, status, duration in µs a line)."""
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", text)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
    lat = sorted(int(line.split("\t")[2]) for line in open(log) if line.count("\t") == 2)
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1000.0 if lat else None
    return {
        "rps": float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", text).group(1)),
        "requests": int(done.group(1)),
        "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": lat[-1] / 1000.0 if lat else None,
        "non_2xx": int(codes.group(3)) + int(codes.group(4)) + int(done.group(3)) + int(done.group(4)),
        "socket_errors": None,
    }


def load(spec, url, duration):
    """Runs the spec's load generator against `url` for `duration` ("5s"),
    pinned to the client CPUs; gives its parsed result."""
    cpus = spec.get("cpus", {})
    if spec.get("client", "wrk") == "h2load":
        log = "/tmp/bench-%s-h2load.log" % spec["name"]
        if os.path.exists(log):
            os.unlink(log)  # h2load appends to it
        cmd = ["h2load", "-t%d" % spec["threads"], "-c%d" % spec["connections"], "-m%d" % spec.get("streams", 1),
               "-D", duration.rstrip("s"), "--log-file", log, *spec.get("client_args", []), url]
        text = subprocess.run(taskset(cpus.get("client"), cmd), capture_output=True, text=True).stdout
        return parse_h2load(text, log)
    cmd = ["wrk", "-t%d" % spec["threads"], "-c%d" % spec["connections"], "-d" + duration,
           "--latency", *spec.get("wrk_args", []), url]
    return parse_wrk(subprocess.run(taskset(cpus.get("client"), cmd), capture_output=True, text=True).stdout)


def session_processes(sid):
    """(pid, the fields of /proc/PID/stat after the name) of each live
    process of session `sid`: a server with its workers (each arm runs in a
    session of its own)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = open("/proc/%s/stat" % entry).read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid:
            yield entry, fields


def session_cpu_seconds(sid):
    """CPU time (user + system) of session `sid`'s processes and their threads."""
    total = sum(int(f[11]) + int(f[12]) for _, f in session_processes(sid))
    return total / os.sysconf("SC_CLK_TCK")


def session_sched(sid):
    """Migrations and involuntary context switches, summed over the threads
    of session `sid`'s processes (the kernel's per-task sched stats)."""
    moved = preempted = 0
    for pid, _ in session_processes(sid):
        try:
            tids = os.listdir("/proc/%s/task" % pid)
        except OSError:
            continue
        for tid in tids:
            try:
                text = open("/proc/%s/task/%s/sched" % (pid, tid)).read()
            except OSError:
                continue
            m = re.search(r"^se\.nr_migrations\s*:\s*(\d+)", text, re.M)
            n = re.search(r"^nr_involuntary_switches\s*:\s*(\d+)", text, re.M)
            moved += int(m.group(1)) if m else 0
            preempted += int(n.group(1)) if n else 0
    return moved, preempted


def spinners(count):
    """`count` processes that each spin a CPU, unpinned: a noisy neighbour."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def children_cpu():
    """CPU seconds of the waited-for children: the servers are reaped only at
    the end, so the difference around a run is the load client's own."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def taskset(cpus, cmd):
    return ["taskset", "-c", cpus] + cmd if cpus else cmd


def start_servers(spec, warm):
    """Starts every arm on a free port (logs in /tmp), waits for it to listen
    and calls warm(port) once; gives {arm name: (process, port)}. On a failure
    the servers already started are stopped."""
    cpus = spec.get("cpus", {})
    servers = {}
    try:
        for arm in spec["arms"]:
            port = free_port()
            cmd = [c.replace("{port}", str(port)) for c in arm["cmd"]]
            env = dict(os.environ, **arm.get("env", {}))
            log = open("/tmp/bench-%s-%s.log" % (spec["name"], arm["name"]), "w")
            proc = subprocess.Popen(taskset(cpus.get("server"), cmd), env=env, cwd=arm.get("cwd", ROOT),
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            servers[arm["name"]] = (proc, port)
            if not wait_port(port, proc):
                sys.exit("bench: %s did not start (%s); log: %s" % (arm["name"], " ".join(cmd), log.name))
            # Warm up (imports, caches) outside the measured rounds.
            warm(port)
    except BaseException:
        stop_servers(servers)
        raise
    return servers


def stop_servers(servers):
    """SIGTERM to each server's process group, SIGKILL past 20 s."""
    for proc, _ in servers.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc, _ in servers.values():
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def alternate(spec, servers, measure):
    """Each round measures every arm in turn (`measure(port)` -> dict), so
    drift on the machine falls on every arm alike, and the arm that starts a
    round moves on by one each round, so an arm is not always measured first
    (the first of a round measured slower on portable ASGI: bench/HISTORY.md,
    ab-ws-binary-64k-portable); prints each run."""
    runs = []
    arms = spec["arms"]
    for rnd in range(1, spec["rounds"] + 1):
        first = (rnd - 1) % len(arms)
        for arm in arms[first:] + arms[:first]:
            _, port = servers[arm["name"]]
            r = dict(measure(port), round=rnd, arm=arm["name"])
            runs.append(r)
            print(json.dumps(r), flush=True)
    return runs


def medians(spec, runs, keys):
    """Per arm, the median of each of `keys` over its runs (missing values skipped)."""
    summary = {}
    for arm in spec["arms"]:
        mine = [r for r in runs if r["arm"] == arm["name"]]
        summary[arm["name"]] = {k: statistics.median([r[k] for r in mine if r[k] is not None] or [0.0])
                                for k in keys}
    return summary


AUTOGROUP = "/proc/sys/kernel/sched_autogroup_enabled"


def autogroup(want_on):
    """Set session autogrouping for the run where the kernel has it and we may
    write it; gives (the value to restore or None, a phrase for the setup line)."""
    try:
        before = open(AUTOGROUP).read().strip()
    except OSError:
        return None, "no autogroup"
    want = "1" if want_on else "0"
    if before == want:
        return None, "autogroup %s" % ("on" if want_on else "off")
    try:
        open(AUTOGROUP, "w").write(want)
    except OSError:
        return None, "autogroup %s (not ours to change)" % ("on" if before == "1" else "off")
    return before, "autogroup %s for the run" % ("on" if want_on else "off")


def main():
    spec = json.load(open(sys.argv[1]))
    restore, grouping = autogroup(spec.get("autogroup", os.environ.get("BENCH_AUTOGROUP") == "1"))
    try:
        run(spec, grouping)
    finally:
        if restore is not None:
            open(AUTOGROUP, "w").write(restore)


def run(spec, grouping):
    cpus = spec.get("cpus", {})
    scheme = spec.get("scheme", "http")
    extra = spec.get("wrk_args", [])
    url = lambda port: "%s://127.0.0.1:%d%s" % (scheme, port, spec["path"])
    servers = start_servers(spec, lambda port: load(dict(spec, connections=4, threads=1), url(port), "1s"))
    noise = spinners(spec.get("noise", 0))
    try:
        sessions = {port: proc.pid for proc, port in servers.values()}

        def wrk(port):
            sched_before = session_sched(sessions[port]) if spec.get("sched") else None
            before = session_cpu_seconds(sessions[port])
            client_before = children_cpu()
            r = load(spec, url(port), spec["duration"])
            # The server's CPU per request: what a result on a client-bound
            # machine still compares (clock ticks, so ~10 ms resolution a run).
            r["cpu_us"] = (session_cpu_seconds(sessions[port]) - before) * 1e6 / max(r["requests"], 1)
            r["client_cpu_us"] = (children_cpu() - client_before) * 1e6 / max(r["requests"], 1)
            if sched_before:
                after = session_sched(sessions[port])
                per_k = 1000.0 / max(r["requests"], 1)
                r["migrations_per_k"] = (after[0] - sched_before[0]) * per_k
                r["preempted_per_k"] = (after[1] - sched_before[1]) * per_k
            return r
        runs = alternate(spec, servers, wrk)
    finally:
        for p in noise:
            p.kill()
            p.wait()
        stop_servers(servers)

    sched = ("migrations_per_k", "preempted_per_k") if spec.get("sched") else ()
    summary = medians(spec, runs, ("rps", "p50_ms", "p99_ms", "max_ms", "cpu_us", "client_cpu_us") + sched)
    for arm in spec["arms"]:
        summary[arm["name"]]["non_2xx"] = sum(r["non_2xx"] for r in runs if r["arm"] == arm["name"])
    base = summary[spec["baseline"]]["rps"]
    for s in summary.values():
        s["ratio"] = s["rps"] / base
    # Each round's ratio to the baseline's run beside it, then their median:
    # drift between rounds falls out.
    baseline_by_round = {r["round"]: r["rps"] for r in runs if r["arm"] == spec["baseline"]}
    for arm in spec["arms"]:
        paired = [r["rps"] / baseline_by_round[r["round"]] for r in runs if r["arm"] == arm["name"]]
        summary[arm["name"]]["paired_ratio"] = statistics.median(paired)
    targets = spec.get("targets", {})
    rows = ["| server | median req/s | ratio to %s | per-round ratio | target | CPU per request | client's CPU per request | p50 | p99 | max | non-2xx |%s"
            % (spec["baseline"], " migrations per 1k requests | involuntary switches per 1k requests |" if sched else ""),
            "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|%s" % ("---:|---:|" if sched else "")]
    for arm in spec["arms"]:
        s = summary[arm["name"]]
        t = targets.get(arm["name"])
        verdict = "" if t is None else ">= %.2fx: %s" % (t, "met" if s["paired_ratio"] >= t else "MISSED")
        rows.append("| %s | %s | %.2fx | %.3fx | %s | %.1f µs | %.1f µs | %.2f ms | %.2f ms | %.1f ms | %d |" % (
            arm.get("label", arm["name"]), format(round(s["rps"]), ","), s["ratio"], s["paired_ratio"], verdict,
            s["cpu_us"], s["client_cpu_us"], s["p50_ms"], s["p99_ms"], s["max_ms"], s["non_2xx"])
            + (" %.1f | %.1f |" % (s["migrations_per_k"], s["preempted_per_k"]) if sched else ""))
    client = ("h2load -t%d -c%d -m%d -D %s%s" % (spec["threads"], spec["connections"], spec.get("streams", 1),
                                                  spec["duration"], "".join(" " + repr(a) for a in spec.get("client_args", [])))
              if spec.get("client") == "h2load" else
              "wrk -t%d -c%d -d%s%s" % (spec["threads"], spec["connections"], spec["duration"],
                                        "".join(" " + repr(a) for a in extra)))
    setup = "%s, %s, %d alternating rounds per arm%s, %s, %s (%d CPUs, Linux %s)." % (
        client,
        spec.get("scheme", "http"), spec["rounds"],
        ", %d process(es) spinning a CPU beside them" % spec["noise"] if spec.get("noise") else "",
        "servers on CPUs %s, the client on %s" % (cpus.get("server"), cpus.get("client")) if cpus else "no pinning",
        grouping, os.cpu_count(), platform.release())
    save_results(spec, runs, summary, setup, rows)


def versions():
    """What was measured: this interpreter, the servers installed beside it,
    and the commit m0serve was built from (bench/venv.sh records it beside
    the build, dirty when the source had uncommitted changes); without that
    record, the checkout's commit, marked as such."""
    from importlib import metadata
    found = {"python": platform.python_version()}
    for pkg in ("m0serve", "granian", "uvicorn", "gunicorn", "uvloop"):
        try:
            found[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    if "m0serve" not in found:
        return found
    try:
        found["m0serve"] += " @ %s" % open(os.path.join(sys.prefix, "m0serve-build")).read().strip()
    except OSError:
        git = lambda *a: subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True).stdout.strip()
        commit = git("rev-parse", "--short", "HEAD")
        if commit:
            found["m0serve"] += " @ %s%s (the checkout; the build's commit was not recorded)" % (
                commit, "-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    return found


def save_results(spec, runs, summary, setup, rows):
    """Write the raw runs (bench/results/NAME-STAMP.json) and the table
    (bench/results/NAME.md: the title, when and how (`setup`), a link to the
    raw runs, the `rows`), and print the table."""
    stamp = time.strftime("%Y-%m-%dT%H%M%SZ", time.gmtime())
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    json_name = "%s-%s.json" % (spec["name"], stamp)
    doc = {"date": stamp, "spec": spec, "machine": {"cpus": os.cpu_count(), "kernel": platform.release()},
           "versions": versions(), "runs": runs, "summary": summary}
    json.dump(doc, open(os.path.join(ROOT, "bench/results", json_name), "w"), indent=2)
    md = "# %s\n\n%s: %s\nRaw runs: [%s](%s).\n\n%s\n" % (
        spec["title"], stamp, setup, json_name, json_name, "\n".join(rows))
    open(os.path.join(ROOT, "bench/results", spec["name"] + ".md"), "w").write(md)
    print(md)

if __name__ == "__main__":
    main()
