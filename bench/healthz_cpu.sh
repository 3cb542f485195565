#!/usr/bin/env bash
# Server CPU time per /healthz request (nginx, m0serve uring, m0serve portable), each pinned
# to CPU 0 under wrk on CPU 1: where wrk saturates first (~140k req/s here), CPU per request
# tells the servers apart. Needs a release build (cargo build --release), wrk and nginx.

measure() { # name pid port
  local t0=$(awk '{print $14+$15}' /proc/$2/stat)
  local out=$(taskset -c 1 wrk -t2 -c64 -d5s http://127.0.0.1:$3/healthz)
  local t1=$(awk '{print $14+$15}' /proc/$2/stat)
  local rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  local reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  python3 -c "t=($t1-$t0)/100.0; print('%-9s %8.0f req/s  server CPU %.2f s  %.2f us/request' % ('$1', $rps, t, t/$reqs*1e6))"
}
work=$(mktemp -d); mkdir -p $work/n
cat > $work/n/nginx.conf <<EOC
worker_processes 1; daemon off; pid $work/n/pid; error_log $work/n/err warn;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000000; client_body_temp_path $work/n/b; proxy_temp_path $work/n/p; fastcgi_temp_path $work/n/f; uwsgi_temp_path $work/n/u; scgi_temp_path $work/n/s;
 server { listen 127.0.0.1:8201; location = /healthz { return 200; } } }
EOC
taskset -c 0 nginx -p $work/n -c $work/n/nginx.conf & 
taskset -c 0 target/release/m0serve --cores 1 --backend uring --port 8202 --health-path /healthz --log-level warn &
taskset -c 0 target/release/m0serve --cores 1 --backend portable --port 8203 --health-path /healthz --log-level warn &
sleep 1
ngpid=$(pgrep -f "nginx: worker"); upid=$(pgrep -f "port 8202"); ppid=$(pgrep -f "port 8203")
for r in 1 2; do measure nginx $ngpid 8201; measure uring $upid 8202; measure portable $ppid 8203; done
kill $upid $ppid; pkill -f "nginx -p $work"; rm -rf $work
