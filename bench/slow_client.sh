#!/usr/bin/env bash
# Slow clients against the peers: probes/slow_client.py's scenario (two
# threads, 8 clients trickling a POST body to a view that reads it, wrk
# driving GET /fast at 16 connections) on m0serve (release, both arms judged)
# and on Granian (--blocking-threads 2) and gunicorn (gthread, 2 threads),
# which have no request buffering: their base and trickling figures only.
# In the bench's own virtualenv (bench/venv.sh); the output goes to
# bench/results/slow_client.md.
#
#   bash bench/slow_client.sh      # SECONDS (4)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
secs=${SECONDS_PER_ARM:-4}
out=bench/results/slow_client.md
probe() { "$venv/bin/python" probes/slow_client.py --seconds "$secs" "$@"; }
{
    echo "# Slow clients: 8 trickling uploads, 2 threads, GET /fast at 16 connections"
    echo
    echo "$(date -u +%Y-%m-%d), $(nproc) CPUs, ${secs} s per arm."
    echo
    echo '```'
    for backend in uring portable; do
        probe --m0serve "$venv/bin/m0serve" --backend "$backend" || true
    done
    probe --label granian --peer-cmd \
        "$venv/bin/granian --interface wsgi --workers 1 --blocking-threads 2 --host 127.0.0.1 --port {port} slow_client_app:wsgi" || true
    probe --label gunicorn --peer-cmd \
        "$venv/bin/gunicorn -k gthread --threads 2 -w 1 -b 127.0.0.1:{port} slow_client_app:wsgi" || true
    echo '```'
} | tee "$out"
