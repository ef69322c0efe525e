# shellcheck shell=bash
# Sourced by vs-reference.sh and ours-ab.sh: the set-up both share. Builds the release
# binaries unless BIN names them, makes a temporary directory ($dir, removed on exit
# with every background job), writes the daemons' options ($dir/opts.cfg, log_level
# LOG_LEVEL), and starts one acm-fabric-hub on the demo fabric with our daemon on it
# as node2, the peer the benchmarks resolve. Sets bin, fabric, dir and fake (the
# emulated HCA's library, for LD_PRELOAD), pin_daemon and on_load_cpus for PIN, and
# start_ours, which starts one of our daemons as another host of the fabric.
#
# PIN=yes: the measured daemons (every thread, `pin_daemon PID`) run on the last CPU and
# acm-load (prefixed with "${on_load_cpus[@]}") on the others. Unpinned, a client woken
# by the daemon's recv may be placed on the daemon's CPU and preempt it before the
# reply is sent (0.1-0.2 involuntary context switches per request at 16 clients);
# pinned, the daemon has a CPU to itself, as on a host with more cores than busy
# clients, and requests per second measure what it costs per request, its own work
# and what it makes the clients' system calls do.
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p acm-fake-hca -p acm-fabric-hub -p acm-daemon --features acm-daemon/verbs
fi
# Absolute: the C daemon's acm-load runs inside its mount namespace, from another
# working directory.
bin=$(realpath "$bin")
fabric=$PWD/testdata/fabrics/demo.toml
# shellcheck source=SCRIPTDIR/bench-dir.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-dir.sh" "${1:-bench}"
# shellcheck disable=SC2034 # read by the scripts that source this one
fake=$(realpath "$bin/libacm_fake_hca.so")

# shellcheck disable=SC2034 # on_load_cpus is read by the scripts that source this one
if [ "${PIN:-no}" = yes ]; then
  last_cpu=$(( $(nproc) - 1 ))
  (( last_cpu > 0 )) || { echo "PIN=yes needs two CPUs or more" >&2; exit 2; }
  pin_daemon() { taskset -a -p -c "$last_cpu" "$1" > /dev/null; }
  on_load_cpus=(taskset -c "0-$(( last_cpu - 1 ))")
else
  pin_daemon() { :; }
  on_load_cpus=()
fi

printf 'log_level %s\n' "${LOG_LEVEL:-0}" > "$dir/opts.cfg"
"$bin/acm-fabric-hub" --fabric "$fabric" --socket "$dir/hub.sock" 2> "$dir/hub.log" &
for _ in $(seq 100); do [ -S "$dir/hub.sock" ] && break; sleep 0.05; done

# node2: the peer, ours on the hub.
"$bin/ibacm" -P --fabric "hub:$dir/hub.sock:node2" --run-dir "$dir/n2" -O "$dir/opts.cfg" \
  > "$dir/n2.out" 2>&1 &

# start_ours HOST IBACM: the daemon IBACM (a path) as HOST of the fabric, on its
# hardware backend under the emulated HCA, in the background ($! is its pid); its
# socket is $dir/HOST/ibacm-unix.sock.
start_ours() {
  "$bin/acm-fake-hca-sysfs" "$fabric" "$1" "$dir/sys-$1"
  mkdir -p "$dir/dev-$1"
  printf '%s mlx5_0 1 default\n' "$1" > "$dir/addr-$1.cfg"
  env ACM_FAKE_HCA_HUB="$dir/hub.sock" ACM_FAKE_HCA_HOST="$1" ACM_SYSFS_ROOT="$dir/sys-$1" \
    ACM_DEV_ROOT="$dir/dev-$1" LD_PRELOAD="$fake" \
    "$2" -P --run-dir "$dir/$1" -O "$dir/opts.cfg" -A "$dir/addr-$1.cfg" \
    --log-file "$dir/$1.log" > "$dir/$1.out" 2>&1 &
}
