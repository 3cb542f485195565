#!/usr/bin/env bash
# What the access log costs through Python's logging (issue 33, point 4): GET /
# of shared/probe_app.py:wsgi at 64 keep-alive connections, m0serve --cores 1
# --blocking-threads 1 with the access log written by the server (no
# --log-config), with a --log-config that configures Python's root logger
# only (the line must still be written without the GIL), and with one that
# hands m0serve.access to a Python handler (every line then takes the GIL);
# beside Granian's --access-log (written in Rust) and gunicorn's
# --access-logfile (Python's logging). Every server's output goes to a file
# (compare.py), as a collector would read it. Arms alternate round by round;
# ratios are to the first arm.
#
#   bash bench/logging.sh   # ROUNDS (5), DURATION (5s), CONNECTIONS (64), SERVER_CPU
#
# Writes bench/results/logging-<date>.json and bench/results/logging.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
shared=$(shared_dir)
cat >"$work/root-only.json" <<'JSON'
{"version": 1, "disable_existing_loggers": false,
 "handlers": {"out": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}},
 "root": {"level": "INFO", "handlers": ["out"]}}
JSON
cat >"$work/access.json" <<'JSON'
{"version": 1, "disable_existing_loggers": false,
 "formatters": {"plain": {"format": "%(message)s"}},
 "handlers": {"out": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "plain"}},
 "loggers": {"m0serve.access": {"level": "INFO", "handlers": ["out"], "propagate": false}},
 "root": {"level": "INFO", "handlers": ["out"]}}
JSON
m0="\"$venv/bin/m0serve\", \"--cores\", \"1\", \"--blocking-threads\", \"1\", \"--port\", \"{port}\", \"--app-dir\", \"$shared\", \"--access-log\""
cat >"$work/spec.json" <<JSON
{
  "name": "logging${SERVER_CPU:+-cpu$SERVER_CPU}", "title": "WSGI hello with an access log: written by the server, or through Python's logging, 64 keep-alive connections${SERVER_CPU:+, servers on CPU $SERVER_CPU}", $pin_spec
  "path": "/", "connections": ${CONNECTIONS:-64}, "threads": 1,
  "duration": "${DURATION:-5s}", "rounds": ${ROUNDS:-5}, "baseline": "native",
  "targets": {"root-only": 0.97},
  "arms": [
    {"name": "native", "label": "m0serve --access-log (no --log-config)",
     "cmd": [$m0, "probe_app:wsgi"]},
    {"name": "root-only", "label": "... --log-config (root logger only: the line stays native)",
     "cmd": [$m0, "--log-config", "$work/root-only.json", "probe_app:wsgi"]},
    {"name": "python", "label": "... --log-config (m0serve.access to a Python handler)",
     "cmd": [$m0, "--log-config", "$work/access.json", "probe_app:wsgi"]},
    {"name": "granian", "label": "granian --interface wsgi --blocking-threads 1 --access-log",
     "cmd": ["$venv/bin/granian", "--interface", "wsgi", "--workers", "1", "--blocking-threads", "1", "--access-log",
             "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "$shared", "probe_app:wsgi"]},
    {"name": "gunicorn", "label": "gunicorn -k gthread --threads 4 --access-logfile -",
     "cmd": ["$venv/bin/gunicorn", "-k", "gthread", "--threads", "4", "-w", "1", "--access-logfile", "-",
             "-b", "127.0.0.1:{port}", "--chdir", "$shared", "probe_app:wsgi"]}
  ]
}
JSON
"$venv/bin/python" bench/compare.py "$work/spec.json"
