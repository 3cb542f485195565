#!/usr/bin/env bash
# /healthz under wrk at 64 keep-alive connections: nginx (`return 200;`, one
# worker) against m0serve --cores 1 on both backends, arms alternating round by
# round so that drift on the machine falls on every arm alike.
#
#   bash bench/healthz.sh            # needs: wrk, nginx (Debian: apt-get install wrk nginx), python3
#
# Knobs (environment): ROUNDS (5), DURATION (5s), CONNECTIONS (64), THREADS (2),
# SERVER_CPU (0: the CPU both servers are pinned to; wrk gets the others).
# Writes bench/results/healthz-<date>.json and rewrites bench/results/healthz.md.
# Targets (issue 2): uring >= 1.0x nginx's requests/s, portable >= 0.9x.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5s}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
SERVER_CPU=${SERVER_CPU:-0}

for tool in wrk nginx python3 taskset; do
    command -v "$tool" >/dev/null || { echo "missing: $tool (apt-get install -y wrk nginx)" >&2; exit 1; }
done

cpus=$(nproc)
if [ "$cpus" -lt 2 ]; then
    echo "needs at least 2 CPUs (one for the server, the rest for wrk)" >&2
    exit 1
fi
# wrk runs on every allowed CPU but the server's.
client_cpus=$(python3 -c "import os; print(','.join(str(c) for c in sorted(os.sched_getaffinity(0)) if c != $SERVER_CPU))")

cargo build --release --bin m0serve
bin=target/release/m0serve

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_port() {
    local port=$1 i
    for i in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "nothing listens on $port" >&2
    return 1
}

# nginx: one worker, `return 200`, keep-alive unbounded, every path in $work.
nginx_port=$(free_port)
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000000;
    keepalive_timeout 75s;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    server {
        listen 127.0.0.1:$nginx_port;
        location = /healthz { return 200; }
    }
}
EOF
taskset -c "$SERVER_CPU" nginx -p "$work/nginx" -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" &
pids+=($!)
wait_port "$nginx_port"

# m0serve --cores 1 on each backend, pinned to the same CPU as nginx.
declare -A port
for backend in uring portable; do
    port[$backend]=$(free_port)
    taskset -c "$SERVER_CPU" "$bin" --cores 1 --backend "$backend" --health-path /healthz \
        --port "${port[$backend]}" --log-level warn 2>"$work/m0serve-$backend.log" &
    pids+=($!)
    wait_port "${port[$backend]}"
done
port[nginx]=$nginx_port

arms=(nginx uring portable)
runs=$work/runs.jsonl
: >"$runs"
for round in $(seq "$ROUNDS"); do
    for arm in "${arms[@]}"; do
        out=$work/wrk-$round-$arm.txt
        taskset -c "$client_cpus" wrk --latency -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" \
            "http://127.0.0.1:${port[$arm]}/healthz" >"$out"
        python3 - "$out" "$round" "$arm" >>"$runs" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
def ms(v):
    n, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", v).groups()
    return float(n) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
p99 = ms(re.search(r"^\s+99%\s+(\S+)", text, re.M).group(1))
non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
errors = re.search(r"Socket errors:.*", text)
print(json.dumps({"round": int(sys.argv[2]), "arm": sys.argv[3], "rps": rps, "p99_ms": p99,
                  "non_2xx": int(non2xx.group(1)) if non2xx else 0,
                  "socket_errors": errors.group(0) if errors else None}))
PY
        tail -n1 "$runs"
    done
done

mkdir -p bench/results
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
json=bench/results/healthz-$stamp.json
python3 - "$runs" "$json" bench/results/healthz.md <<PY
import json, platform, statistics, subprocess, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def version(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return (p.stdout + p.stderr).strip().splitlines()[0]
summary = {}
for arm in ["nginx", "uring", "portable"]:
    mine = [r for r in runs if r["arm"] == arm]
    summary[arm] = {"median_rps": statistics.median(r["rps"] for r in mine),
                    "median_p99_ms": statistics.median(r["p99_ms"] for r in mine),
                    "non_2xx": sum(r["non_2xx"] for r in mine)}
for arm in summary:
    summary[arm]["ratio_to_nginx"] = summary[arm]["median_rps"] / summary["nginx"]["median_rps"]
targets = {"uring": 1.0, "portable": 0.9}
doc = {
    "date": "$stamp",
    "machine": {"cpus": $cpus, "kernel": platform.release(), "server_cpu": $SERVER_CPU,
                "client_cpus": "$client_cpus"},
    "tools": {"wrk": version(["wrk", "-v"]), "nginx": version(["nginx", "-v"])},
    "config": {"rounds": $ROUNDS, "duration": "$DURATION", "connections": $CONNECTIONS,
               "threads": $THREADS, "path": "/healthz", "m0serve": "--cores 1, release build",
               "nginx": "return 200; one worker"},
    "runs": runs, "summary": summary, "targets": targets,
}
json.dump(doc, open(sys.argv[2], "w"), indent=2)
rows = ["| server | median req/s | ratio to nginx | target | median p99 | non-2xx |",
        "|---|---:|---:|---|---:|---:|"]
for arm, s in summary.items():
    name = "nginx (1 worker)" if arm == "nginx" else f"m0serve --cores 1, {arm}"
    t = targets.get(arm)
    verdict = "" if t is None else f">= {t:.1f}x: {'met' if s['ratio_to_nginx'] >= t else 'MISSED'}"
    rows.append(f"| {name} | {s['median_rps']:,.0f} | {s['ratio_to_nginx']:.2f}x | {verdict} | "
                f"{s['median_p99_ms']:.2f} ms | {s['non_2xx']} |")
md = f"""# /healthz, 64 keep-alive connections

{doc['date']}: wrk -t$THREADS -c$CONNECTIONS -d$DURATION, $ROUNDS alternating rounds per arm,
servers pinned to CPU $SERVER_CPU, wrk on CPUs $client_cpus ($cpus CPUs, Linux {platform.release()}).
Raw runs: [{sys.argv[2].split('/')[-1]}]({sys.argv[2].split('/')[-1]}).

""" + "\n".join(rows) + "\n"
open(sys.argv[3], "w").write(md)
print(md)
PY
echo "wrote $json and bench/results/healthz.md"
