#!/usr/bin/env bash
# Two builds of our daemon side by side on cache hits: before and after a change
# (BENCHMARKS.md, "Reading these figures" says how far such a comparison can be read).
#
# One acm-fabric-hub serves the demo fabric; node2 is the peer (ours, on the hub); build
# A runs as node1 and build B as node3, both on the hardware backend under the emulated
# HCA, as in vs-reference.sh. acm-load sends the same cache-hit RESOLVE by name to each
# in turn, alternating who goes first. Printed per round: requests/s, CPU and user CPU
# per request of each daemon, and B/A; then, per client count, the median of B/A with
# its 95 % bootstrap interval (ratio-summary.py).
#
# usage: acm-daemon/scripts/ours-ab.sh A_IBACM B_IBACM [SECONDS] [ROUNDS] [CLIENTS...]
#        (defaults: 3 s, 10 rounds, 16 256 clients; run from the repository root; the
#        hub, the emulated HCA and acm-load are built unless BIN names a directory
#        that has them; no root needed; PIN=yes: the daemons on the last CPU,
#        acm-load on the others, as in vs-reference.sh)
set -euo pipefail
a_bin=$(realpath "$1") b_bin=$(realpath "$2")
secs=${3:-3}
rounds=${4:-10}
shift $(( $# > 4 ? 4 : $# )) || true
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(16 256)
# shellcheck source=SCRIPTDIR/cache-hit-fabric.sh
source "$(dirname "$0")/cache-hit-fabric.sh" ab
start_ours node1 "$a_bin"
a=$!
start_ours node3 "$b_bin"
b=$!
for _ in $(seq 200); do
  [ -S "$dir/node1/ibacm-unix.sock" ] && [ -S "$dir/node3/ibacm-unix.sock" ] \
    && [ -S "$dir/n2/ibacm-unix.sock" ] && break
  sleep 0.05
done
sleep 1
pin_daemon "$a"
pin_daemon "$b"
hz=$(getconf CLK_TCK)
usage() { # pid -> "cpu_ticks user_ticks", summed over the process's threads
  local all=0 user=0 t
  for t in /proc/"$1"/task/*; do
    read -r u s < <(awk '{print $14, $15}' "$t/stat")
    all=$(( all + u + s )); user=$(( user + u ))
  done
  echo "$all $user"
}
measured() { # pid node clients -> "rps cpu_us/req user_us/req"
  local t0 u0 t1 u1 rps n
  read -r t0 u0 < <(usage "$1")
  read -r rps n < <("${on_load_cpus[@]}" "$bin/acm-load" -S "$dir/$2/ibacm-unix.sock" -c "$3" --duration "$secs" \
    -f n -s "$2" -d node2 --json -q | python3 -c 'import json,sys; j=json.load(sys.stdin)
assert j["errors"]["total"] == 0, j["errors"]
print("%d %d" % (j["requests_per_s"], j["requests"]["answered"]))')
  read -r t1 u1 < <(usage "$1")
  python3 -c "print('%d %.2f %.2f' % ($rps, ($t1-$t0)/$hz*1e6/$n, ($u1-$u0)/$hz*1e6/$n))"
}
echo "clients round   A_rps A_cpu A_user   B_rps B_cpu B_user   B/A"
for n in "${clients[@]}"; do
  for r in $(seq "$rounds"); do
    if (( r % 2 )); then
      read -r ar ac au < <(measured "$a" node1 "$n")
      read -r br bc bu < <(measured "$b" node3 "$n")
    else
      read -r br bc bu < <(measured "$b" node3 "$n")
      read -r ar ac au < <(measured "$a" node1 "$n")
    fi
    printf '%7s %5s %7d %5s %6s %7d %5s %6s   %.3f\n' "$n" "$r" "$ar" "$ac" "$au" "$br" "$bc" "$bu" \
      "$(python3 -c "print($br / $ar)")"
    echo "$n $(python3 -c "print($br / $ar)")" >> "$dir/ratios"
  done
done
python3 "$(dirname "$0")/ratio-summary.py" "$dir/ratios" B/A
