# Sourced by the bench scripts: the bench's own virtualenv with the pinned
# peers (shared/bench-peers.txt; websockets for uvicorn's WebSockets) and
# m0serve from this checkout (release), wrk from Debian's packages, and a
# scratch folder removed at exit. PYTHON=python3.13 makes (once) and uses
# bench/.venv-3.13 instead of bench/.venv (the default Python's), so the same
# benchmark can be run on another CPython; $pyver says which one ran.
command -v wrk >/dev/null || { echo "bench: wrk is needed (apt-get install wrk)" >&2; exit 2; }
shared_dir() {
    local d
    for d in ../shared shared; do
        [ -f "$d/probe_app.py" ] && { (cd "$d" && pwd); return; }
    done
    echo "bench: cannot find shared/probe_app.py beside the checkout" >&2
    exit 2
}
venv=bench/.venv
if [ -n "${PYTHON:-}" ]; then
    venv=bench/.venv-$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
fi
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
# BENCH_INSTALLED=1: this checkout is installed there already (a second script in a row).
if [ "${BENCH_INSTALLED:-}" != 1 ]; then
    "$venv/bin/python" -m pip install -q -r "$(shared_dir)/bench-peers.txt" django flask websockets==17.4 matplotlib
    "$venv/bin/python" -m pip install -q --force-reinstall --no-deps .
    # The build's commit, for the results (compare.py's versions()): with
    # BENCH_INSTALLED=1 the checkout may have moved on since.
    { git rev-parse --short HEAD | tr -d '\n'
      [ -z "$(git status --porcelain --untracked-files=no -- . ':!bench')" ] || printf -- '-dirty'
    } >"$venv/m0serve-build"
fi
venv=$(cd "$venv" && pwd)
pyver=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# SERVER_CPU=N (asgi.sh, wsgi.sh): every server confined to CPU N and wrk to
# the others, as in a pod with one pinned CPU and its clients elsewhere; the
# results' names get -cpuN. $pin_spec is the spec's "cpus" entry, or empty.
pin_spec=
if [ -n "${SERVER_CPU:-}" ]; then
    others=$(python3 -c "import os; print(','.join(str(c) for c in sorted(os.sched_getaffinity(0)) if c != ${SERVER_CPU}))")
    [ -n "$others" ] || { echo "bench: SERVER_CPU needs another CPU for wrk" >&2; exit 2; }
    pin_spec='"cpus": {"server": "'$SERVER_CPU'", "client": "'$others'"},'
fi
