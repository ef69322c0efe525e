#!/usr/bin/env bash
# Cache-hit throughput of our daemon and of rdma-core's C ibacm, side by side in one run
# on the same emulated HCA (figures in BENCHMARKS.md, "Cache hits against the C ibacm").
#
# One acm-fabric-hub serves the demo fabric. node2 is our daemon on the hub (the peer
# both resolve, once). node1 is Debian's /usr/sbin/ibacm with its own provider
# (libibacmp.so), node3 is our ibacm's hardware backend (feature verbs, no --fabric;
# SWAP=yes exchanges the two); both run under the emulated HCA (LD_PRELOAD of
# libacm_fake_hca.so), so each does the work it does on a real host, above verbs and
# umad. The C daemon's paths are fixed (/run/ibacm-unix.sock, /sys/class/infiniband*),
# so it runs in a private mount namespace (root, unshare) with the host's generated
# sysfs tree mounted there; acm-load joins that namespace (nsenter) to reach it. Both daemons run the same options
# (log_level LOG_LEVEL, default 0), and acm-load sends the same cache-hit RESOLVE by
# name (node1/node3 -> node2, one request in flight per client) to each in turn, ROUNDS
# times per client count, beside the two echo servers (fast and reference-style).
# Printed per run: requests/s, p50, the ratio ours/C, and each daemon's CPU time and
# context switches per request (from /proc, all threads); then, per client count, the
# median ratio with its 95 % bootstrap interval (ratio-summary.py).
#
# usage: acm-daemon/scripts/vs-reference.sh [SECONDS] [ROUNDS] [CLIENTS...]
#        (defaults: 10 s, 3 rounds, 1 4 16 256 clients; root; run from the repository
#        root; Debian's ibacm package installed)
#        ECHO=no: leave out the two echo servers (yardsticks) to save time.
#        PIN=yes: the daemons on the last CPU, acm-load on the others
#        (cache-hit-fabric.sh says why).
#        SWAP=yes: the C daemon is host node3 and ours node1 (the other way round by
#        default). Two identical daemons in the two hosts' places have served a few
#        per cent apart in one run (BENCHMARKS.md, "Reading these figures"), so a claim of a
#        few per cent wants runs with both assignments.
#        HOLD=FILE: start everything, write "C_PID OUR_PID DIR" to FILE and wait
#        instead of measuring (for perf or strace by hand; the C daemon's socket is
#        /run/ibacm-unix.sock inside its mount namespace, ours DIR/node3/ibacm-unix.sock,
#        node1 with SWAP=yes);
#        stop it with Ctrl-C or by killing the script.
set -euo pipefail
secs=${1:-10}
rounds=${2:-3}
shift $(( $# > 2 ? 2 : $# )) || true
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(1 4 16 256)
[ "$(id -u)" = 0 ] || { echo "vs-reference.sh: needs root (a mount namespace for the C daemon)" >&2; exit 2; }
[ -x /usr/sbin/ibacm ] || { echo "vs-reference.sh: needs Debian's ibacm (/usr/sbin/ibacm)" >&2; exit 2; }

# shellcheck source=SCRIPTDIR/cache-hit-fabric.sh
source "$(dirname "$0")/cache-hit-fabric.sh" vsref

if [ "${SWAP:-no}" = yes ]; then c_node=node3 our_node=node1; else c_node=node1 our_node=node3; fi

# Ours, hardware backend, emulated HCA.
start_ours "$our_node" "$bin/ibacm"
ours=$!
our_sock=$dir/$our_node/ibacm-unix.sock

# The C daemon, in a private mount namespace.
start_c "$c_node"

"$bin/acm-load" --echo-server "$dir/echo.sock" > /dev/null &
pin_daemon "$!"
"$bin/acm-load" --echo-server "$dir/echo-ref.sock" --echo-style reference > /dev/null &
pin_daemon "$!"

wait_c "$our_sock" "$dir/n2/ibacm-unix.sock"
sleep 1
pin_daemon "$c"
pin_daemon "$ours"

load() { # where clients src -> json
  local where=$1 n=$2 src=$3
  case $where in
    c) nsenter -t "$c" -m "${on_load_cpus[@]}" "$bin/acm-load" -S /run/ibacm-unix.sock -c "$n" --duration "$secs" \
         -f n -s "$src" -d node2 --json -q ;;
    *) "${on_load_cpus[@]}" "$bin/acm-load" -S "$where" -c "$n" --duration "$secs" -f n -s "$src" -d node2 --json -q ;;
  esac
}
# shellcheck source=SCRIPTDIR/load-figures.sh
source "$(dirname "${BASH_SOURCE[0]}")/load-figures.sh"
measured() { # pid where clients src -> "rps p50 cpu_us/req cs/req"
  local t0 cs0 t1 cs1 rps n p50
  read -r t0 cs0 < <(usage "$1")
  read -r rps n p50 < <(load "$2" "$3" "$4" | summary)
  read -r t1 cs1 < <(usage "$1")
  python3 -c "print('%d %s %.2f %.2f' % ($rps, '$p50', ($t1-$t0)/$hz*1e6/$n, ($cs1-$cs0)/$n))"
}
hz=$(getconf CLK_TCK)

if [ -n "${HOLD:-}" ]; then
  echo "$c $ours $dir" > "$HOLD"
  echo "holding: C daemon $c, ours $ours, in $dir"
  while :; do sleep 3600; done
fi
echo "log_level ${LOG_LEVEL:-0}; $secs s per run"
echo "clients round   C_rps (p50 us) C_cpu_us/req C_cs/req   ours_rps (p50 us) ours_cpu_us/req ours_cs/req   ours/C   echo_rps ref_echo_rps"
for n in "${clients[@]}"; do
  for r in $(seq "$rounds"); do
    # Alternate which daemon goes first, so that neither always meets the machine
    # in the state the other left it in.
    if (( r % 2 )); then
      read -r crps cp50 ccpu ccs < <(measured "$c" c "$n" "$c_node")
      read -r orps op50 ocpu ocs < <(measured "$ours" "$our_sock" "$n" "$our_node")
    else
      read -r orps op50 ocpu ocs < <(measured "$ours" "$our_sock" "$n" "$our_node")
      read -r crps cp50 ccpu ccs < <(measured "$c" c "$n" "$c_node")
    fi
    e=0 f=0
    if [ "${ECHO:-yes}" != no ]; then
      read -r e _ _ < <(load "$dir/echo.sock" "$n" "$our_node" | summary)
      read -r f _ _ < <(load "$dir/echo-ref.sock" "$n" "$our_node" | summary)
    fi
    python3 -c "print('%7s %5s %8d (%s) %12s %8s   %8d (%s) %15s %11s   %6.2f   %8d %12d' % (
      '$n', '$r', $crps, '$cp50', '$ccpu', '$ccs', $orps, '$op50', '$ocpu', '$ocs', $orps / $crps, $e, $f))"
    echo "$n $(python3 -c "print($orps / $crps)")" >> "$dir/ratios"
  done
done
# Per client count: the median of the rounds' ratios with its bootstrap interval, and
# in how many rounds ours served at least as many requests per second.
python3 "$(dirname "$0")/ratio-summary.py" "$dir/ratios" ours/C
