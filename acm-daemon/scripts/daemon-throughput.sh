#!/usr/bin/env bash
# Daemon cache-hit throughput against the socket's own limit, measured in one run
# (figures in BENCHMARKS.md, "The daemon beside an echo server").
#
# Starts our ibacm on the simulated demo fabric (log_level 0, or LOG_LEVEL from the
# environment) and two `acm-load` echo servers on unix sockets in a temporary
# directory: the fast one (event loops, batched reads and writes) and the reference
# style (the C ibacm's pattern: one thread blocking in select, one recv and one send
# per request). Then for each client count it runs the same acm-load cache-hit load
# (10.0.0.1 -> 10.0.0.2, one request in flight per client) against the three in turn,
# ROUNDS times, and prints requests/s and p50 latency of each, the daemon's ratio to
# each yardstick, and the daemon's CPU time and context switches per request (from
# /proc, summed over its threads).
#
# usage: acm-daemon/scripts/daemon-throughput.sh [SECONDS] [ROUNDS] [CLIENTS...]
#        (defaults: 10 s, 3 rounds, 4 and 16 clients; run from the repository root)
set -euo pipefail
secs=${1:-10}
rounds=${2:-3}
shift $(( $# > 2 ? 2 : $# )) || true
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(4 16)

cargo build --release -q -p ibacm -p acm-load
bin=${CARGO_TARGET_DIR:-target}/release
dir=$(mktemp -d /tmp/acm-tput.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
printf 'log_level %s\n' "${LOG_LEVEL:-0}" > "$dir/opts.cfg"
"$bin/ibacm" -P --fabric sim --run-dir "$dir/acm" -O "$dir/opts.cfg" \
  --log-file "$dir/ibacm.log" > "$dir/ibacm.out" &
daemon=$!
"$bin/acm-load" --echo-server "$dir/echo.sock" > "$dir/echo.out" &
"$bin/acm-load" --echo-server "$dir/echo-ref.sock" --echo-style reference > "$dir/echo-ref.out" &
for _ in $(seq 100); do
  [ -S "$dir/acm/ibacm-unix.sock" ] && [ -S "$dir/echo.sock" ] && [ -S "$dir/echo-ref.sock" ] && break
  sleep 0.05
done
sleep 1
echo "daemon idle RSS: $(awk '/VmRSS/ {print $2, $3}' /proc/$daemon/status)"

run() { # socket clients -> json
  "$bin/acm-load" -S "$1" -c "$2" --duration "$secs" -s 10.0.0.1 -d 10.0.0.2 --json -q
}
# shellcheck source=SCRIPTDIR/load-figures.sh
source "$(dirname "${BASH_SOURCE[0]}")/load-figures.sh"
hz=$(getconf CLK_TCK)

echo "clients round  echo_rps (p50 us)  ref_echo_rps (p50 us)  daemon_rps (p50 us)  daemon/echo  daemon/ref_echo  daemon_cpu_us/req  daemon_cs/req"
for c in "${clients[@]}"; do
  for r in $(seq "$rounds"); do
    read -r e _ e50 < <(run "$dir/echo.sock" "$c" | summary)
    read -r f _ f50 < <(run "$dir/echo-ref.sock" "$c" | summary)
    read -r t0 cs0 < <(usage "$daemon")
    read -r d n d50 < <(run "$dir/acm/ibacm-unix.sock" "$c" | summary)
    read -r t1 cs1 < <(usage "$daemon")
    python3 -c "
c, r, e, e50, f, f50, d, d50, n = '$c', '$r', $e, '$e50', $f, '$f50', $d, '$d50', $n
cpu = ($t1 - $t0) / $hz * 1e6 / n
cs = ($cs1 - $cs0) / n
print('%7s %5s %9d (%s)  %12d (%s)  %10d (%s)  %11.2f  %15.2f  %17.2f  %13.2f' % (
    c, r, e, e50, f, f50, d, d50, d / e, d / f, cpu, cs))"
  done
done
echo "daemon RSS after the runs: $(awk '/VmRSS/ {print $2, $3}' /proc/$daemon/status)"
