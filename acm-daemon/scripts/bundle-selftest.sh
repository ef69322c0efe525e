#!/usr/bin/env bash
# Runs a bundle made by device-bundle.sh here as it would run on a bare host: from a
# copy outside the checkout, in a private mount namespace where this host's copies of
# everything the bundle holds are hidden (each bundled library, Debian's ibacm and its
# provider folder, this checkout's target/, and with TOOLS=hidden util-linux's
# unshare, nsenter, taskset and mount too), with an empty environment but PATH. A
# program or library the bundle lacks then fails here rather than on the device.
#
# usage: acm-daemon/scripts/bundle-selftest.sh [BUNDLE] [VAR=VALUE...]
#        (root; BUNDLE defaults to bench-bundle; the VARs go to run.sh, e.g.
#        SECS=1 ROUNDS=1 CLIENTS="1 4" WORKERS=; its output goes to stdout and
#        $OUT/run.txt, OUT defaulting to a temporary folder)
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "bundle-selftest.sh: needs root (a mount namespace)" >&2; exit 2; }
bundle=$(realpath "${1:-bench-bundle}")
shift $(( $# > 0 ? 1 : 0 ))
[ -f "$bundle/run.sh" ] || { echo "bundle-selftest.sh: $bundle has no run.sh (device-bundle.sh makes it)" >&2; exit 2; }
# shellcheck source=SCRIPTDIR/bench-dir.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-dir.sh" selftest
cp -a "$bundle" "$dir/bundle"
out=${OUT:-$dir/out}
target=$(realpath "${CARGO_TARGET_DIR:-target}" 2> /dev/null || true)
: > "$dir/noexec"
cat > "$dir/hidden.sh" <<EOS
set -e
mount --make-rprivate /
for l in $dir/bundle/lib/*; do
  for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64; do
    [ ! -e "\$d/\${l##*/}" ] || mount --bind /dev/null "\$d/\${l##*/}"
  done
done
[ ! -e /usr/sbin/ibacm ] || mount --bind /dev/null /usr/sbin/ibacm
[ ! -d /usr/lib/x86_64-linux-gnu/ibacm ] || mount -t tmpfs none /usr/lib/x86_64-linux-gnu/ibacm
[ ! -d "$target" ] || mount -t tmpfs none "$target"
if [ "${TOOLS:-}" = hidden ]; then
  # A file that is not executable: the shell looks further along PATH.
  for t in unshare nsenter taskset mount; do mount --bind $dir/noexec "\$(command -v \$t)"; done
fi
cd /
exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin OUT=$out "\$@" bash $dir/bundle/run.sh
EOS
unshare -m bash "$dir/hidden.sh" "$@"
