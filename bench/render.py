#!/usr/bin/env python3
"""Render bench/README.md and bench/HISTORY.md from bench/results/: every
benchmark's latest table, with plots beside it, and every experiment's.

    bench/.venv/bin/python bench/render.py

For each bench/results/NAME.md (the table the benchmark wrote last) the page
gets that table under a heading NAME (so #NAME links to it), the script that
re-runs it, the machine and versions its figures came from (from the newest
NAME-<stamp>.json), and a figure bench/results/plots/NAME.png drawn from that
JSON: throughput per server, and latency percentiles per server (on a log
scale where they span more than a decade: the fairness and mixed-traffic
tails). A result named in BENCHMARKS (m0serve against its peers, what a user
compares) goes to bench/README.md; any other is an experiment (an A/B of
builds or knobs, a repeat) and goes to bench/HISTORY.md, out of the way. The
prose above the tables is bench/README.head.md and bench/HISTORY.head.md,
kept by hand.
"""
import glob
import json
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BENCH = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(BENCH, "results")
PLOTS = os.path.join(RESULTS, "plots")
THROUGHPUT = (("rps", "requests/s"), ("msgs_per_sec", "messages/s"), ("median_rps", "requests/s"))
LATENCIES = (("p50_ms", "p50"), ("p99_ms", "p99"), ("median_p99_ms", "p99"), ("max_ms", "max"))
# The results the benchmark scripts of bench/README.md write (a -pyX.Y or
# -cpuN suffix included); every other result is an experiment.
BENCHMARKS = re.compile(
    r"(healthz|wsgi-hello|asgi-hello|wsgi-fairness|django-mixed|answers-(wsgi|asgi)-\d+k|static-1m"
    r"|threads-(hello|busy)|slow_client|workers-(wsgi-c64|wsgi-c256|busy|asgi)|idle-connections"
    r"|(noisy|quiet)-(wsgi|asgi)|operations|scrape|tls-(hello|connect)|ws-echo"
    r"|h2c-hello(-m10)?|h2-tls-hello(-m10)?|h2c-static-1m)(-cpu\d+)?(-py\d+\.\d+)?")


def latest_json(name):
    """The newest raw result of benchmark `name` (stamps sort by time)."""
    runs = sorted(f for f in glob.glob(os.path.join(RESULTS, name + "-*.json"))
                  if re.fullmatch(re.escape(name) + r"-\d{4}-\d\d-\d\dT\d{6}Z\.json", os.path.basename(f)))
    return runs[-1] if runs else None


def script_for(name):
    """The bench script that writes `name` (it names its results file; a
    `-pyX.Y` suffix is the same script run with PYTHON=pythonX.Y, a `-cpuN`
    one with SERVER_CPU=N)."""
    name = re.sub(r"(-cpu\d+)?(-py\d+\.\d+)?$", "", name)
    # The shell scripts first: compare.py's docstring names an example spec.
    for path in sorted(glob.glob(os.path.join(BENCH, "*.sh"))) + sorted(glob.glob(os.path.join(BENCH, "*.py"))):
        text = open(path).read()
        if re.search(r"results/%s[-.]" % re.escape(name), text) or re.search(r'"name": "%s[$"]' % re.escape(name), text):
            return "bench/" + os.path.basename(path)
    return None


def knobs_for(name):
    """The environment that re-runs `name`'s variant of its script."""
    pinned = re.search(r"-cpu(\d+)", name)
    python = re.search(r"-py(\d+\.\d+)$", name)
    return ("SERVER_CPU=%s " % pinned.group(1) if pinned else "") + \
        ("PYTHON=python%s " % python.group(1) if python else "")


def plot(name, doc):
    """bench/results/plots/NAME.png from a result's summary; None when it has no per-server figures."""
    summary = doc.get("summary")
    if not isinstance(summary, dict) or not all(isinstance(v, dict) for v in summary.values()):
        return None
    servers = list(summary)
    metric = next(((k, unit) for k, unit in THROUGHPUT if all(k in summary[s] for s in servers)), None)
    lats = [(k, label) for k, label in LATENCIES if all(summary[s].get(k) for s in servers)]
    if metric is None and not lats:
        return None
    fig, axes = plt.subplots(1, 2 if metric and lats else 1, figsize=(11, 0.5 * len(servers) + 2.2),
                             squeeze=False)
    axes = list(axes[0])
    if metric:
        ax = axes.pop(0)
        values = [summary[s][metric[0]] for s in servers]
        ax.barh(servers, values, color="#4c72b0")
        ax.invert_yaxis()
        ax.set_xlabel(metric[1])
        ax.set_title("throughput (median)")
        for y, v in enumerate(values):
            ax.text(v, y, " %s" % format(round(v), ","), va="center", fontsize=8)
        ax.set_xlim(0, max(values) * 1.25)
    if lats:
        ax = axes.pop(0)
        height = 0.8 / len(lats)
        everything = [summary[s][k] for s in servers for k, _ in lats]
        for i, (k, label) in enumerate(lats):
            ax.barh([y + i * height for y in range(len(servers))], [summary[s][k] for s in servers],
                    height=height, label=label)
        ax.set_yticks([y + height * (len(lats) - 1) / 2 for y in range(len(servers))])
        ax.set_yticklabels(servers)
        ax.invert_yaxis()
        if max(everything) / max(min(everything), 1e-3) > 10:
            ax.set_xscale("log")
        ax.set_xlabel("latency, ms")
        ax.set_title("latency (median of runs)")
        ax.legend(fontsize=8)
    fig.suptitle(name)
    fig.tight_layout()
    os.makedirs(PLOTS, exist_ok=True)
    out = os.path.join(PLOTS, name + ".png")
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return os.path.relpath(out, BENCH)


def provenance(doc):
    """Where and with what a result was measured, as far as it says."""
    machine = doc.get("machine", {})
    parts = ["%s CPUs, Linux %s" % (machine.get("cpus", "?"), machine.get("kernel", "?"))]
    versions = doc.get("versions")
    if versions:
        parts.append(", ".join("%s %s" % kv for kv in sorted(versions.items())))
    else:
        parts.append("peers as pinned in ../shared/bench-peers.txt at the time")
    return "; ".join(parts)


def section(md):
    """A result's section: heading, re-run line, table and plot."""
    name = os.path.basename(md)[:-3]
    text = open(md).read().strip()
    title, _, body = text.partition("\n")
    title = title.lstrip("# ").strip()
    # The results' own links are relative to bench/results/.
    body = re.sub(r"\]\(([^)/]+\.json)\)", r"](results/\1)", body)
    section = ["### %s" % name, "", "**%s**" % title, ""]
    line = "`%s`" % name
    script = script_for(name)
    raw = latest_json(name)
    doc = json.load(open(raw)) if raw else {}
    if script:
        line += " · re-run: `%sbash %s`" % (knobs_for(name), script) \
            if script.endswith(".sh") else \
            " · re-run: `bench/.venv/bin/python %s`" % script
    if doc:
        line += " · measured on %s" % provenance(doc)
    section += [line, "", body.strip()]
    png = plot(name, doc) if doc else None
    if png:
        section += ["", "![%s](%s)" % (name, png)]
    return name, title, "\n".join(section)


def page(head, heading, sections):
    """A page: its hand-kept head, then a contents table and every section."""
    out = open(os.path.join(BENCH, head)).read().rstrip() + "\n"
    contents = ["| result | what |", "|---|---|"] + \
        ["| [%s](#%s) | %s |" % (name, re.sub(r"[^a-z0-9_-]", "", name), title.replace("|", "\\|"))
         for name, title, _ in sections]
    return out + "\n## %s\n\n" % heading + "\n".join(contents) + "\n\n" + \
        "\n\n".join(text for _, _, text in sections) + "\n"


def main():
    benchmarks, experiments = [], []
    for md in sorted(glob.glob(os.path.join(RESULTS, "*.md"))):
        name = os.path.basename(md)[:-3]
        (benchmarks if BENCHMARKS.fullmatch(name) else experiments).append(section(md))
    open(os.path.join(BENCH, "README.md"), "w").write(page("README.head.md", "Results", benchmarks))
    open(os.path.join(BENCH, "HISTORY.md"), "w").write(
        page("HISTORY.head.md", "Experiments: the latest table of each", experiments))
    print("bench/README.md: %d benchmarks; bench/HISTORY.md: %d experiments" % (len(benchmarks), len(experiments)))


if __name__ == "__main__":
    main()
