#!/usr/bin/env bash
# The runner of a bundle made by device-bundle.sh (copied there as run.sh): the cache-hit
# comparison of our daemon at several worker counts with the C ibacm
# (vs-reference.sh), on a many-core host that has none of the programs or libraries
# installed, from the bundle alone, within a fixed time.
#
# It first prints the host (CPUs, kernel, glibc, root or not) and what it lacks: the
# bundle's libraries must resolve with the host's glibc (ldd); util-linux's tools come
# from the bundle where the host has none; and the C daemon needs root and a private
# mount namespace with tmpfs and bind mounts (tried once first). Without those it runs
# ours alone (C=no: the scaling ours(N)/ours(first), no ratio to C) and says why.
# It then picks the rounds (and if need be the seconds) so that the estimate fits
# BUDGET_S, prints the estimate, and runs vs-reference.sh under a hard limit of
# LIMIT_S. Everything printed also goes to $OUT/run.txt, as it is printed, so a run
# cut short still leaves its rounds there.
#
# usage: OUT=DIR bash bench-bundle/run.sh     (as root, from anywhere)
#        SECS (3) ROUNDS (4) CLIENTS ("1 4 16 64 256 1000") WORKERS ("1 2 4 8") PIN (yes)
#        DAEMON_CPUS (half the CPUs) ECHO (no) LOG_LEVEL (0) SWAP, C: as vs-reference.sh.
#        BUDGET_S (480): the time the run is sized to; LIMIT_S (560): where it is cut.
set -uo pipefail
B=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$B/results}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.txt") 2>&1
# A copy may have lost the execute bits.
chmod +x "$B"/bin/* "$B"/c/ibacm "$B"/tools/* "$B"/tools/real/* 2> /dev/null || true

echo "== bundle"
cat "$B/VERSION"
echo "== host"
echo "cpus $(nproc), kernel $(uname -r), $(. /etc/os-release 2> /dev/null && echo "$PRETTY_NAME"), $(ldd --version 2>&1 | head -1), uid $(id -u)"

# Whether the host has the program NAME (bash's `command -v` also names a file found
# but not executable).
have() { local p; p=$(command -v "$1") && [ -x "$p" ]; }
missing=()
for t in bash python3 timeout awk getconf seq mktemp realpath; do
  have "$t" || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "run.sh: the host lacks ${missing[*]}, which the scripts need and the bundle does not hold"
  exit 2
fi
for t in unshare nsenter taskset mount; do
  have "$t" || echo "the host has no $t: the bundle's copy is used"
done
PATH=$PATH:$B/tools
export PATH

# The libraries: LD_LIBRARY_PATH names the bundle's alone; each program must find all
# it needs (the host's glibc, or the bundle's copies), else nothing can be measured.
export LD_LIBRARY_PATH=$B/lib
elves=("$B"/bin/* "$B"/c/ibacm "$B"/c/prov/*)
if have ldd; then
  if ldd "${elves[@]}" 2>&1 | grep -E "not found|not a dynamic"; then
    echo "run.sh: the libraries above are missing on this host (its glibc may be older than the one the bundle was built with)"
    exit 2
  fi
  echo "libraries from outside the bundle: $(ldd "${elves[@]}" | awk '$3 ~ /^\// && $3 !~ "^'"$B"'" {print $1}' | sort -u | tr '\n' ' ')"
else
  echo "the host has no ldd: the libraries are not checked before the run"
fi
"$B/bin/acm-load" --version > /dev/null || { echo "run.sh: the bundle's acm-load does not run here"; exit 2; }

# The C daemon: root and a private mount namespace, with what its script mounts.
# shellcheck disable=SC2016 # expanded by the namespace's shell
ns_try() {
  timeout 20 unshare -m sh -c 'mount --make-rprivate / && m=$(mktemp -d) &&
    mount --bind /sys/class "$m" && mount -t tmpfs none /sys/class && mount -t tmpfs none /run' 2>&1
}
C=${C:-yes}
if [ "$C" = yes ]; then
  if [ "$(id -u)" != 0 ]; then
    why="not root"
  elif ! why=$(ns_try); then
    why="no private mount namespace here (unshare -m with tmpfs and bind mounts: ${why:-failed})"
  else
    why=""
  fi
  if [ -n "$why" ]; then
    echo "run.sh: the C daemon cannot run: $why; measuring ours alone (C=no)"
    C=no
  fi
fi
export C

ncpu=$(nproc)
export SECS=${SECS:-3} ROUNDS=${ROUNDS:-4} CLIENTS=${CLIENTS:-1 4 16 64 256 1000}
export WORKERS=${WORKERS-1 2 4 8} PIN=${PIN:-yes} DAEMON_CPUS=${DAEMON_CPUS:-$(( ncpu / 2 ))}
export ECHO=${ECHO:-no} LOG_LEVEL=${LOG_LEVEL:-0}
budget=${BUDGET_S:-480} limit=${LIMIT_S:-560}
read -r -a clients <<< "$CLIENTS"
read -r -a workers <<< "$WORKERS"
daemons=$(( ${#workers[@]} > 0 ? ${#workers[@]} : 1 ))
[ "$C" = yes ] && daemons=$(( daemons + 1 ))
[ "$ECHO" = no ] || daemons=$(( daemons + 2 ))
# Each run: SECS of load and some 0.1-0.4 s around it (acm-load's start, warm-up and
# connections, the figures read from /proc; 0.1 s measured on 2 CPUs from 1 to 1,000
# clients), counted as 0.4 s; the start-up: about 20 s.
estimate() { echo $(( ${#clients[@]} * $1 * daemons * ($2 * 10 + 4) / 10 + 20 )); }
# Over the budget: fewer rounds down to 3 (the least a bootstrap interval says much
# with), shorter runs down to 2 s, then 2 rounds, then 1 s.
fit() { # least_rounds least_secs
  while (( $(estimate "$ROUNDS" "$SECS") > budget && ROUNDS > $1 )); do ROUNDS=$(( ROUNDS - 1 )); done
  while (( $(estimate "$ROUNDS" "$SECS") > budget && SECS > $2 )); do SECS=$(( SECS - 1 )); done
}
fit 3 2
fit 2 1
echo "== plan: clients ${clients[*]}; workers ${WORKERS:-(as the options are)}; C $C; $ROUNDS rounds of $SECS s;" \
  "PIN $PIN, daemons on $DAEMON_CPUS of $ncpu CPUs; estimate $(estimate "$ROUNDS" "$SECS") s, cut at $limit s"

cd "$B/repo" || exit 2
BIN=$B/bin C_IBACM=$B/c/ibacm C_PROVIDER_DIR=$B/c/prov \
  timeout "$limit" bash acm-daemon/scripts/vs-reference.sh "$SECS" "$ROUNDS" "${clients[@]}"
rc=$?
case $rc in
  0) echo "== done" ;;
  124) echo "== cut at $limit s: the rounds above are all there is" ;;
  *) echo "== vs-reference.sh ended with status $rc" ;;
esac
exit "$rc"
