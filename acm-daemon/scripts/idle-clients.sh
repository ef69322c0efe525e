#!/usr/bin/env bash
# One busy client beside many quiet ones: what idle connections cost the busy client's
# cache hits (BENCHMARKS.md, "Cache hits against the C ibacm", idle connections).
#
# For each daemon binary given, in turn: our daemon on the simulated demo fabric
# (--fabric sim, log_level 0), then ROUNDS times acm-load with one client for SECONDS,
# first alone and then with IDLE more connections open that send nothing (held by a
# python3 process). Printed per run: binary, idle connections, requests/s, p50 µs.
#
# usage: acm-daemon/scripts/idle-clients.sh [-n IDLE] [-s SECONDS] [-r ROUNDS] IBACM...
#        (defaults: 2000 idle, 2 s, 2 rounds; run from the repository root; acm-load
#        is built unless BIN names a directory that has it; no root needed)
set -euo pipefail
idle=2000 secs=2 rounds=2
while getopts n:s:r: o; do
  case $o in
    n) idle=$OPTARG ;;
    s) secs=$OPTARG ;;
    r) rounds=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-n IDLE] [-s SECONDS] [-r ROUNDS] IBACM..." >&2; exit 2; }
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p acm-load
fi
# shellcheck source=SCRIPTDIR/bench-dir.sh
source "$(dirname "$0")/bench-dir.sh" idle
printf 'log_level 0\n' > "$dir/opts.cfg"
# Holds N connections to the socket open, sending nothing, until killed.
cat > "$dir/hold.py" <<'EOF'
import resource, signal, socket, sys
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    held.append(s)
print("held", len(held), flush=True)
signal.pause()
EOF
echo "binary idle requests_per_s p50_us"
for daemon in "$@"; do
  run="$dir/run-$(basename "$daemon")-$RANDOM"
  "$daemon" -P --fabric sim --run-dir "$run" -O "$dir/opts.cfg" > "$run.out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -S "$run/ibacm-unix.sock" ] && break; sleep 0.05; done
  for _ in $(seq "$rounds"); do
    for n in 0 "$idle"; do
      holder=""
      if [ "$n" -gt 0 ]; then
        python3 "$dir/hold.py" "$run/ibacm-unix.sock" "$n" > "$dir/hold.out" &
        holder=$!
        for _ in $(seq 200); do grep -q held "$dir/hold.out" 2>/dev/null && break; sleep 0.05; done
      fi
      "$bin/acm-load" -S "$run/ibacm-unix.sock" -c 1 --duration "$secs" -f n -s node1 -d node2 \
        --json -q | python3 -c 'import json, sys
j = json.load(sys.stdin)
assert j["errors"]["total"] == 0, j["errors"]
print("%s %s %d %s" % (sys.argv[1], sys.argv[2], j["requests_per_s"], j["latency_us"]["p50"]))' \
        "$daemon" "$n"
      if [ -n "$holder" ]; then kill "$holder"; wait "$holder" 2>/dev/null || true; fi
    done
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
