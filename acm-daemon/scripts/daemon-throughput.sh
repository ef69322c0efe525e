#!/usr/bin/env bash
# Daemon cache-hit throughput against the socket's own limit, measured in one run
# (issue 7; figures go to BENCHMARKS.md "acm-daemon").
#
# Starts our ibacm on the simulated demo fabric (log_level 0) and `acm-load
# --echo-server` on unix sockets in a temporary directory, then for each client count
# runs the same acm-load cache-hit load (10.0.0.1 -> 10.0.0.2, one request in flight
# per client) against the echo server and against the daemon, alternating, ROUNDS
# times, and prints requests/s, latency and the daemon/echo ratio of each round.
#
# usage: acm-daemon/scripts/daemon-throughput.sh [SECONDS] [ROUNDS] [CLIENTS...]
#        (defaults: 10 s, 3 rounds, 4 and 16 clients; run from the repository root)
set -euo pipefail
secs=${1:-10}
rounds=${2:-3}
shift $(( $# > 2 ? 2 : $# )) || true
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(4 16)

cargo build --release -q -p acm-daemon
bin=target/release
dir=$(mktemp -d /tmp/acm-tput.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
printf 'log_level 0\n' > "$dir/opts.cfg"
"$bin/ibacm" -P --fabric sim --run-dir "$dir/acm" -O "$dir/opts.cfg" \
  --log-file "$dir/ibacm.log" > "$dir/ibacm.out" &
daemon=$!
"$bin/acm-load" --echo-server "$dir/echo.sock" > "$dir/echo.out" &
for _ in $(seq 100); do
  [ -S "$dir/acm/ibacm-unix.sock" ] && [ -S "$dir/echo.sock" ] && break
  sleep 0.05
done
sleep 1
echo "daemon idle RSS: $(awk '/VmRSS/ {print $2, $3}' /proc/$daemon/status)"

run() { # socket clients -> json
  "$bin/acm-load" -S "$1" -c "$2" --duration "$secs" -s 10.0.0.1 -d 10.0.0.2 --json -q
}
summary() { # json -> "rps p50 p99 p999"
  python3 -c 'import json,sys; j=json.load(sys.stdin); l=j["latency_us"]
assert j["errors"]["total"] == 0, j["errors"]
print("%d %s %s %s" % (j["requests_per_s"], l["p50"], l["p99"], l["p999"]))'
}

echo "clients round  echo_rps  (p50/p99/p999 us)   daemon_rps  (p50/p99/p999 us)   ratio"
for c in "${clients[@]}"; do
  for r in $(seq "$rounds"); do
    read -r e e50 e99 e999 < <(run "$dir/echo.sock" "$c" | summary)
    read -r d d50 d99 d999 < <(run "$dir/acm/ibacm-unix.sock" "$c" | summary)
    ratio=$(python3 -c "print('%.2f' % ($d / $e))")
    printf '%7s %5s %9s  (%s/%s/%s)   %10s  (%s/%s/%s)   %s\n' \
      "$c" "$r" "$e" "$e50" "$e99" "$e999" "$d" "$d50" "$d99" "$d999" "$ratio"
  done
done
echo "daemon RSS after the runs: $(awk '/VmRSS/ {print $2, $3}' /proc/$daemon/status)"
