# shellcheck shell=bash
# Sourced by vs-reference.sh and ours-ab.sh: the set-up both share. Builds the release
# binaries unless BIN names them, makes a temporary directory ($dir, removed on exit
# with every background job), writes the daemons' options ($dir/opts.cfg, log_level
# LOG_LEVEL), and starts one acm-fabric-hub on the demo fabric with our daemon on it
# as node2, the peer the benchmarks resolve. Sets bin, fabric, dir and fake (the
# emulated HCA's library, for LD_PRELOAD), pin_daemon and on_load_cpus for PIN, and
# start_ours and start_c (with wait_c), which start one of our daemons or the C
# ibacm as another host of the fabric.
#
# A script that needs more hosts than the demo's three sets extra_hosts=K before
# sourcing this: the fabric is then the demo's with hosts node4 .. node(3+K) added,
# alike (same leaf, next LIDs, GUIDs and IPs).
#
# C_IBACM: the C daemon to run (default Debian's /usr/sbin/ibacm); C_PROVIDER_DIR: the
# folder it loads its providers from (option provider_lib_path; it loads every file
# there; default its built-in /usr/lib/<triplet>/ibacm).
#
# PIN=yes: the measured daemons (every thread, `pin_daemon PID`; ours and the C daemon
# are also started on them) run on the last DAEMON_CPUS CPUs (default 1) and acm-load
# (prefixed with "${on_load_cpus[@]}") on the others. Unpinned, a client woken by the
# daemon's recv may be placed on a daemon's CPU and preempt it before the reply is sent
# (0.1-0.2 involuntary context switches per request at 16 clients); pinned, the
# daemons have CPUs to themselves, as on a host with more cores than busy clients, and
# requests per second measure what each costs per request, its own work and what it
# makes the clients' system calls do. A daemon with worker threads wants as many CPUs
# as it has workers (DAEMON_CPUS=8 for worker_threads up to 8); the daemons share
# those CPUs, which is fair because only one is loaded at a time.
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p acm-fake-hca -p acm-fabric-hub -p ibacm -p acm-load --features ibacm/verbs
fi
# Absolute: the C daemon's acm-load runs inside its mount namespace, from another
# working directory.
bin=$(realpath "$bin")
fabric=$PWD/testdata/fabrics/demo.toml
[ -f "$fabric" ] || { echo "cache-hit-fabric.sh: run from the repository root ($fabric missing)" >&2; exit 2; }
# shellcheck source=SCRIPTDIR/bench-dir.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-dir.sh" "${1:-bench}"
# shellcheck disable=SC2034 # read by the scripts that source this one
fake=$(realpath "$bin/libacm_fake_hca.so")

# shellcheck disable=SC2034 # on_load_cpus is read by the scripts that source this one
if [ "${PIN:-no}" = yes ]; then
  ncpu=$(nproc)
  daemon_cpus=${DAEMON_CPUS:-1}
  (( daemon_cpus >= 1 && daemon_cpus < ncpu )) \
    || { echo "PIN=yes: DAEMON_CPUS=$daemon_cpus must be from 1 to $(( ncpu - 1 )) on $ncpu CPUs" >&2; exit 2; }
  first_daemon_cpu=$(( ncpu - daemon_cpus ))
  daemon_cpu_list=$first_daemon_cpu-$(( ncpu - 1 ))
  pin_daemon() { taskset -a -p -c "$daemon_cpu_list" "$1" > /dev/null; }
  on_daemon_cpus=(taskset -c "$daemon_cpu_list")
  on_load_cpus=(taskset -c "0-$(( first_daemon_cpu - 1 ))")
else
  pin_daemon() { :; }
  on_daemon_cpus=()
  on_load_cpus=()
fi
# 1,000 clients are as many sockets in acm-load and in the daemon; a soft limit of
# 1,024 open files would refuse the last of them.
ulimit -n 65536 2> /dev/null || ulimit -n "$(ulimit -H -n)" || true

# The fabric with extra_hosts more hosts than the demo's three, each like node3.
if (( ${extra_hosts:-0} > 0 )); then
  cp "$fabric" "$dir/fabric.toml"
  for (( h = 4; h < 4 + extra_hosts; h++ )); do
    printf '\n[[hosts]]\nname = "node%d"\nleaf = 0\n\n[[hosts.hcas]]\nname = "mlx5_0"\nguid = "0x0002c90300a0b%03x"\n\n[[hosts.hcas.ports]]\nlid = %d\n\n[[hosts.ips]]\naddr = "10.0.0.%d"\nprefix = 24\n' \
      "$h" "$(( h - 1 ))" "$h" "$h" >> "$dir/fabric.toml"
  done
  fabric=$dir/fabric.toml
fi

printf 'log_level %s\n' "${LOG_LEVEL:-0}" > "$dir/opts.cfg"
"$bin/acm-fabric-hub" --fabric "$fabric" --socket "$dir/hub.sock" 2> "$dir/hub.log" &
for _ in $(seq 100); do [ -S "$dir/hub.sock" ] && break; sleep 0.05; done

# node2: the peer, ours on the hub.
"$bin/ibacm" -P --fabric "hub:$dir/hub.sock:node2" --run-dir "$dir/n2" -O "$dir/opts.cfg" \
  > "$dir/n2.out" 2>&1 &

# start_ours HOST IBACM...: the daemon IBACM (a path, after the words of a wrapper
# such as valgrind if one is given) as HOST of the fabric, on its hardware backend under
# the emulated HCA, with the options file $ours_opts (default $dir/opts.cfg), in the
# background ($! is its pid); its socket is $dir/HOST/ibacm-unix.sock, its log
# $dir/HOST.log.
start_ours() {
  local host=$1
  shift
  "$bin/acm-fake-hca-sysfs" "$fabric" "$host" "$dir/sys-$host"
  mkdir -p "$dir/dev-$host"
  printf '%s mlx5_0 1 default\n' "$host" > "$dir/addr-$host.cfg"
  "${on_daemon_cpus[@]}" env ACM_FAKE_HCA_HUB="$dir/hub.sock" ACM_FAKE_HCA_HOST="$host" \
    ACM_SYSFS_ROOT="$dir/sys-$host" ACM_DEV_ROOT="$dir/dev-$host" LD_PRELOAD="$fake" \
    "$@" -P --run-dir "$dir/$host" -O "${ours_opts:-$dir/opts.cfg}" -A "$dir/addr-$host.cfg" \
    --log-file "$dir/$host.log" > "$dir/$host.out" 2>&1 &
}

# start_c HOST [WRAPPER...]: the C daemon ($C_IBACM, default Debian's /usr/sbin/ibacm) as HOST of the fabric, with our
# daemons' options, run by WRAPPER if one is given (valgrind, say). Its paths are fixed
# (/run/ibacm-unix.sock, /sys/class/infiniband*), so it runs in a private mount
# namespace (root, unshare) with HOST's generated sysfs tree mounted there; reach it
# with nsenter -t "$c" -m. Sets cns: the pid that becomes the daemon (unshare and the
# namespace's script exec into it); wait_c then sets c.
start_c() {
  local host=$1
  shift
  "$bin/acm-fake-hca-sysfs" "$fabric" "$host" "$dir/sys-c"
  printf '%s mlx5_0 1 default\n' "$host" > "$dir/addr-c.cfg"
  {
    cat "$dir/opts.cfg"
    printf 'log_file %s\nlock_file %s\n' "$dir/c.log" "$dir/c.pid"
    [ -z "${C_PROVIDER_DIR:-}" ] || printf 'provider_lib_path %s\n' "$C_PROVIDER_DIR"
  } > "$dir/c-opts.cfg"
  cat > "$dir/c-ns.sh" <<EOS
set -e
mount --make-rprivate /
mkdir -p $dir/orig-class
mount --bind /sys/class $dir/orig-class
mount -t tmpfs none /sys/class
for c in $dir/orig-class/*; do mkdir -p /sys/class/\${c##*/}; mount --bind \$c /sys/class/\${c##*/}; done
mkdir -p /sys/class/infiniband /sys/class/infiniband_mad
mount --bind $dir/sys-c/class/infiniband /sys/class/infiniband
mount --bind $dir/sys-c/class/infiniband_mad /sys/class/infiniband_mad
mount -t tmpfs none /run
exec env ACM_FAKE_HCA_HUB=$dir/hub.sock ACM_FAKE_HCA_HOST=$host \
  ACM_FAKE_HCA_DEV_ROOT=/dev/infiniband LD_PRELOAD=$fake \
  $* ${C_IBACM:-/usr/sbin/ibacm} -P -O $dir/c-opts.cfg -A $dir/addr-c.cfg
EOS
  "${on_daemon_cpus[@]}" unshare -m bash "$dir/c-ns.sh" > "$dir/c.out" 2>&1 &
  cns=$!
}

# wait_c [SOCKET...]: waits (up to 60 s) until the C daemon's socket and each SOCKET
# exist, and sets c, the C daemon's pid; exits if it did not start.
wait_c() {
  local s ready
  c=""
  for _ in $(seq 1200); do
    # Until the namespace's script has set it up and exec'd, the pid is taskset's,
    # unshare's or bash's, and /run is still the host's.
    case $(cat "/proc/$cns/comm" 2>/dev/null) in
      taskset | unshare | bash | "") ;;
      *) c=$cns ;;
    esac
    ready=$c
    for s in "$@"; do [ -S "$s" ] || ready=""; done
    [ -n "$ready" ] && nsenter -t "$c" -m test -S /run/ibacm-unix.sock && return 0
    sleep 0.05
  done
  echo "the C daemon did not start:"
  cat "$dir/c.out"
  exit 1
}
