#!/usr/bin/env bash
# User-space instructions per cache hit, our daemon against Debian's C ibacm, counted by
# valgrind's callgrind (figures in BENCHMARKS.md, "Cache hits against the C ibacm").
#
# Requests per second on a shared VM move by 10 % or more from round to round; an
# instruction count does not. It covers only what runs in user space (each daemon's own
# code, its libraries' and the emulated HCA's thread, idle here: cache hits do not reach
# the fabric), not the kernel's work in the system calls, which is where most of a cache
# hit's time goes and which the two daemons share (one recvfrom and one sendto per
# request each). So it measures the part of a request's cost that the daemons' code
# decides, without the noise.
#
# The same set-up as vs-reference.sh: one fabric hub on the demo fabric, our daemon's
# hardware backend as node3 and the C daemon as node1, both under the emulated HCA, each
# now run by valgrind --tool=callgrind. For each client count, each daemon's counters
# are zeroed, acm-load sends REQUESTS cache-hit RESOLVEs by name (node1/node3 -> node2),
# the counters are dumped, and the instructions of that stretch are divided by the
# requests answered. Under valgrind a daemon's own code runs tens of times slower
# (ours, on --fabric sim at 16 clients, served about a quarter of its usual requests per
# second), so it is the slower side and each of its waits finds more requests ready
# than it would: the per-wait work is spread over more requests than without valgrind.
#
# usage: acm-daemon/scripts/instructions.sh [REQUESTS] [CLIENTS...]
#        (defaults: 20000 requests, 1 16 256 clients; root; valgrind and Debian's ibacm
#        installed; run from the repository root). PER_FUNCTION=N also prints each
#        daemon's N functions with the most instructions (callgrind_annotate) after
#        the last client count. KEEP=DIR copies the callgrind files (c.cg.K, ours.cg.K:
#        the K-th client count) into DIR, for callgrind_annotate --tree=caller and the like.
set -euo pipefail
requests=${1:-20000}
shift $(( $# > 1 ? 1 : $# )) || true
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(1 16 256)
[ "$(id -u)" = 0 ] || { echo "instructions.sh: needs root (a mount namespace for the C daemon)" >&2; exit 2; }
[ -x /usr/sbin/ibacm ] || { echo "instructions.sh: needs Debian's ibacm (/usr/sbin/ibacm)" >&2; exit 2; }
command -v callgrind_control > /dev/null || { echo "instructions.sh: needs valgrind" >&2; exit 2; }

# shellcheck source=SCRIPTDIR/cache-hit-fabric.sh
source "$(dirname "$0")/cache-hit-fabric.sh" instr

callgrind() { # name -> the valgrind command line that runs a daemon, as words
  echo valgrind --tool=callgrind --callgrind-out-file="$dir/$1.cg" --log-file="$dir/$1.vg.log"
}
# shellcheck disable=SC2046 # the wrapper's words are meant to split
start_ours node3 $(callgrind ours) "$bin/ibacm"
ours=$!
# shellcheck disable=SC2046
start_c node1 $(callgrind c)
wait_c "$dir/node3/ibacm-unix.sock" "$dir/n2/ibacm-unix.sock"

load() { # c|ours clients -> "answered"
  local cmd=("$bin/acm-load" -c "$2" --count "$requests" -f n -d node2 --json -q)
  case $1 in
    c) cmd=(nsenter -t "$c" -m "${cmd[@]}" -S /run/ibacm-unix.sock -s node1) ;;
    *) cmd=("${cmd[@]}" -S "$dir/node3/ibacm-unix.sock" -s node3) ;;
  esac
  "${cmd[@]}" | python3 -c 'import json,sys; j=json.load(sys.stdin)
assert j["errors"]["total"] == 0, j["errors"]
print(j["requests"]["answered"])'
}
# Each dump is a new part file, NAME.cg.1, NAME.cg.2 and so on.
declare -A dumps=([c]=0 [ours]=0)
counted() { # c|ours pid clients: sets instr and answered
  callgrind_control -z "$2" > /dev/null 2>&1
  answered=$(load "$1" "$3")
  callgrind_control -d "$2" > /dev/null 2>&1
  dumps[$1]=$(( dumps[$1] + 1 ))
  instr=$(awk '/^summary:/ {print $2}' "$dir/$1.cg.${dumps[$1]}")
}

# A first load warms both daemons up (caches filled, connections' buffers grown).
load c 4 > /dev/null
load ours 4 > /dev/null
echo "$requests requests per count; user-space instructions per request (callgrind)"
echo "clients   C   ours   ours/C"
for n in "${clients[@]}"; do
  counted c "$c" "$n"
  ci=$instr ca=$answered
  counted ours "$ours" "$n"
  oi=$instr oa=$answered
  python3 -c "print('%7s %6.0f %6.0f %8.3f' % ('$n', $ci / $ca, $oi / $oa, ($oi / $oa) / ($ci / $ca)))"
done
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP"
  cp "$dir"/c.cg.* "$dir"/ours.cg.* "$KEEP"/
fi
if [ -n "${PER_FUNCTION:-}" ]; then
  for who in c ours; do
    echo "== $who, last client count: functions by instructions (exclusive)"
    callgrind_annotate --inclusive=no --threshold=100 "$dir/$who.cg.${dumps[$who]}" 2> /dev/null \
      | sed -n '/file:function/,$p' | grep -F '%)' | grep -vF '(100.0%)' | head -n "$PER_FUNCTION"
  done
fi
