#!/usr/bin/env bash
# Cache-hit throughput of our daemon and of rdma-core's C ibacm, side by side in one run
# on the same emulated HCA (figures in BENCHMARKS.md, "Cache hits against the C ibacm").
#
# One acm-fabric-hub serves the demo fabric. node2 is our daemon on the hub (the peer
# every daemon resolves, once). node1 is Debian's /usr/sbin/ibacm with its own provider
# (libibacmp.so), node3 is our ibacm's hardware backend (feature verbs, no --fabric;
# SWAP=yes exchanges the two); both run under the emulated HCA (LD_PRELOAD of
# libacm_fake_hca.so), so each does the work it does on a real host, above verbs and
# umad. The C daemon's paths are fixed (/run/ibacm-unix.sock, /sys/class/infiniband*),
# so it runs in a private mount namespace (root, unshare) with the host's generated
# sysfs tree mounted there; acm-load joins that namespace (nsenter) to reach it. All
# daemons run the same options (log_level LOG_LEVEL, default 0), and acm-load sends the
# same cache-hit RESOLVE by name (-> node2, one request in flight per client) to each in
# turn, ROUNDS times per client count, beside the two echo servers (fast and
# reference-style).
# Printed per run and daemon: requests/s, p50, CPU time and context switches per
# request (from /proc, all threads), and the ratio ours/C; then, per client count, the
# median ratio with its 95 % bootstrap interval (ratio-summary.py).
#
# usage: acm-daemon/scripts/vs-reference.sh [SECONDS] [ROUNDS] [CLIENTS...]
#        (defaults: 10 s, 3 rounds, 1 4 16 256 clients; root; run from the repository
#        root; Debian's ibacm package installed)
#        WORKERS="1 2 4 8": one of our daemons per count, each with the options-file line
#        `worker_threads N` (the first as node3, the others as node4, node5, ... of the
#        demo fabric with hosts added); besides ours(N)/C, the scaling ours(N)/ours(first)
#        is summarised. Unset: one of ours, with the options as they are. A daemon that
#        does not know worker_threads stops the script (exit 3) rather than be measured
#        under a wrong name.
#        PIN=yes: the daemons on the last DAEMON_CPUS CPUs (default 1), acm-load on the
#        others (cache-hit-fabric.sh says why); with WORKERS, give the daemons as many
#        CPUs as the largest count (DAEMON_CPUS=8 for WORKERS="1 2 4 8" on 16 CPUs).
#        ECHO=no: leave out the two echo servers (yardsticks) to save time.
#        C=no: leave out the C daemon (no root needed then): ours only, for the scaling.
#        C_MAX_CLIENTS (default 1000): above it the C daemon is not measured. It serves
#        at most 1,022 clients, fewer as its other files take descriptors under select()'s
#        1,024, and closes the connections beyond.
#        SWAP=yes: the C daemon is host node3 and ours (the first) node1 (the other way
#        round by default). Two identical daemons in the two hosts' places have served a
#        few per cent apart in one run (BENCHMARKS.md, "Reading these figures"), so a claim
#        of a few per cent wants runs with both assignments.
#        HOLD=FILE: start everything, write "C_PID OUR_PID DIR" to FILE and wait
#        instead of measuring (for perf or strace by hand; the C daemon's socket is
#        /run/ibacm-unix.sock inside its mount namespace, ours DIR/node3/ibacm-unix.sock,
#        node1 with SWAP=yes);
#        stop it with Ctrl-C or by killing the script.
#        BIN, C_IBACM, C_PROVIDER_DIR, LOG_LEVEL: see cache-hit-fabric.sh.
set -euo pipefail
secs=${1:-10}
rounds=${2:-3}
shift $(( $# > 2 ? 2 : $# )) || true
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(1 4 16 256)
read -r -a workers <<< "${WORKERS:-}"
with_c=${C:-yes}
c_max=${C_MAX_CLIENTS:-1000}
if [ "$with_c" = yes ]; then
  [ "$(id -u)" = 0 ] || { echo "vs-reference.sh: needs root (a mount namespace for the C daemon); C=no runs ours alone" >&2; exit 2; }
  [ -x "${C_IBACM:-/usr/sbin/ibacm}" ] || { echo "vs-reference.sh: needs the C ibacm (${C_IBACM:-/usr/sbin/ibacm}, Debian's package)" >&2; exit 2; }
fi

# Our daemons: one per worker count, or one with the options as they are ("").
ours_counts=("${workers[@]}")
[ ${#ours_counts[@]} -gt 0 ] || ours_counts=("")
extra_hosts=$(( ${#ours_counts[@]} - 1 ))
# shellcheck source=SCRIPTDIR/cache-hit-fabric.sh
source "$(dirname "$0")/cache-hit-fabric.sh" vsref

if [ "${SWAP:-no}" = yes ]; then c_node=node3 first_node=node1; else c_node=node1 first_node=node3; fi

# The measured daemons, by index: name, pid, socket ("c" for the C daemon's) and host.
names=() pids=() socks=() nodes=()
for i in "${!ours_counts[@]}"; do
  w=${ours_counts[$i]}
  if (( i == 0 )); then node=$first_node; else node=node$(( i + 3 )); fi
  if [ -n "$w" ]; then
    name="ours($w)"
    ours_opts=$dir/opts-w$w.cfg
    { cat "$dir/opts.cfg"; printf 'worker_threads %s\n' "$w"; } > "$ours_opts"
  else
    name=ours
    ours_opts=$dir/opts.cfg
  fi
  # Ours, hardware backend, emulated HCA.
  start_ours "$node" "$bin/ibacm"
  names+=("$name") pids+=("$!") socks+=("$dir/$node/ibacm-unix.sock") nodes+=("$node")
done
n_ours=${#names[@]}
ours=${pids[0]}

if [ "$with_c" = yes ]; then
  # The C daemon, in a private mount namespace.
  start_c "$c_node"
fi

if [ "${ECHO:-yes}" != no ]; then
  "$bin/acm-load" --echo-server "$dir/echo.sock" > /dev/null &
  pin_daemon "$!"
  "$bin/acm-load" --echo-server "$dir/echo-ref.sock" --echo-style reference > /dev/null &
  pin_daemon "$!"
fi

if [ "$with_c" = yes ]; then
  wait_c "${socks[@]}" "$dir/n2/ibacm-unix.sock"
  names+=(C) pids+=("$c") socks+=(c) nodes+=("$c_node")
else
  c=""
  for _ in $(seq 1200); do
    up=yes
    for s in "${socks[@]}" "$dir/n2/ibacm-unix.sock"; do [ -S "$s" ] || up=no; done
    [ "$up" = yes ] && break
    sleep 0.05
  done
  [ "$up" = yes ] || { echo "vs-reference.sh: our daemons did not start:"; tail -n 5 "$dir"/node*.out; exit 1; }
fi
sleep 1
for p in "${pids[@]}"; do pin_daemon "$p"; done

# A daemon that does not know worker_threads logs it as an unknown option (at every
# log level) and runs single-threaded: its figures would be ours(1)'s under another name.
for i in $(seq 0 $(( n_ours - 1 ))); do
  [ -n "${ours_counts[$i]}" ] || continue
  if unknown=$(grep -h "unknown option 'worker_threads'" "$dir/${nodes[$i]}.log" "$dir/${nodes[$i]}.out" 2> /dev/null); then
    echo "vs-reference.sh: $bin/ibacm does not know the option worker_threads; it logged:" >&2
    echo "  ${unknown%%$'\n'*}" >&2
    echo "WORKERS needs a daemon with worker threads; unset WORKERS to measure this one." >&2
    exit 3
  fi
done
for i in "${!names[@]}"; do
  tasks=("/proc/${pids[$i]}/task/"*)
  echo "${names[$i]}: host ${nodes[$i]}, pid ${pids[$i]}, ${#tasks[@]} threads"
done

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
if [ -n "$c" ] && (( c_max < 1022 )); then
  for n in "${clients[@]}"; do
    (( n <= c_max )) || echo "the C daemon is not measured at $n clients (C_MAX_CLIENTS=$c_max)"
  done
fi
echo "log_level ${LOG_LEVEL:-0}; $secs s per run"
echo "clients round  daemon      rps      p50_us  cpu_us/req  cs/req    ratio"
c_i=$(( ${#names[@]} - 1 ))
for n in "${clients[@]}"; do
  for r in $(seq "$rounds"); do
    # Each daemon goes first in turn, so that none always meets the machine in the
    # state another left it in.
    rps=() line=()
    for k in "${!names[@]}"; do
      i=$(( (k + r) % ${#names[@]} ))
      if [ "${socks[$i]}" = c ] && (( n > c_max )); then continue; fi
      read -r q p50 cpu cs < <(measured "${pids[$i]}" "${socks[$i]}" "$n" "${nodes[$i]}") \
        || { echo "vs-reference.sh: ${names[$i]} at $n clients: no figures (acm-load failed)" >&2; exit 1; }
      rps[i]=$q
      line[i]=$(printf '%7s %5s  %-8s %8d %10s %11s %7s' "$n" "$r" "${names[$i]}" "$q" "$p50" "$cpu" "$cs")
    done
    for i in "${!names[@]}"; do
      [ -n "${rps[$i]:-}" ] || continue
      ratio=""
      if (( i < n_ours )) && [ -n "$c" ] && [ -n "${rps[$c_i]:-}" ]; then
        read -r q ratio < <(python3 -c "q = ${rps[$i]} / ${rps[$c_i]}; print(q, '%.3f' % q)")
        echo "$n $q ${names[$i]}/C" >> "$dir/ratios"
      fi
      if (( i > 0 && i < n_ours )); then
        echo "$n $(python3 -c "print(${rps[$i]} / ${rps[0]})") ${names[$i]}/${names[0]}" >> "$dir/scaling"
      fi
      echo "${line[$i]}   ${ratio:+$ratio (/C)}"
    done
    if [ "${ECHO:-yes}" != no ]; then
      read -r e _ _ < <(load "$dir/echo.sock" "$n" "${nodes[0]}" | summary)
      read -r f _ _ < <(load "$dir/echo-ref.sock" "$n" "${nodes[0]}" | summary)
      printf '%7s %5s  %-8s %8d    (reference-style: %d)\n' "$n" "$r" echo "$e" "$f"
    fi
  done
done
# Per client count: the median of the rounds' ratios with its bootstrap interval, and
# in how many rounds the first served at least as many requests per second.
if [ -s "$dir/ratios" ]; then
  echo "== requests/s, ours ÷ C"
  python3 "$(dirname "$0")/ratio-summary.py" "$dir/ratios"
fi
if [ -s "$dir/scaling" ]; then
  echo "== requests/s, ours with N workers ÷ ${names[0]}"
  python3 "$(dirname "$0")/ratio-summary.py" "$dir/scaling"
fi
