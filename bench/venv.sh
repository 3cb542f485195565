# Sourced by the bench scripts: the bench's own virtualenv with the pinned
# peers (shared/bench-peers.txt; websockets for uvicorn's WebSockets) and
# m0serve from this checkout (release), wrk from Debian's packages, and a
# scratch folder removed at exit.
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
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q -r "$(shared_dir)/bench-peers.txt" django flask websockets==17.4 matplotlib
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps .
venv=$(cd "$venv" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
