#!/bin/sh
# Runs `systemd-analyze verify` on the ibacm units installed under ROOT (a DESTDIR of
# packaging/install.sh, or an unpacked package), as they would be on a system:
#     packaging/verify-units.sh ROOT
# systemd-analyze checks, among the rest, that ExecStart's program exists and, with
# --man=yes, that the Documentation= man pages do. Both must be ours, not the host's
# (whose Debian ibacm may be installed), so the check runs in a scratch root: this
# machine's own systemd units (sysinit.target, rdma-core's rdma-hw.target, ...)
# without any ibacm.*, and the system programs the units name (/bin/kill), overlaid
# with ROOT. The man pages are looked up in ROOT's; when ROOT has none (the tree has no
# man/ pages), that part is skipped and said so.
# Clean means exit status 0 and no output at all.
set -eu

[ $# -eq 1 ] || { echo "usage: packaging/verify-units.sh ROOT" >&2; exit 2; }
root=$(cd "$1" && pwd)
units=$(cd "$root" && find . -path '*/systemd/system/ibacm.*' -type f)
[ -n "$units" ] || { echo "verify-units.sh: no ibacm units under $root" >&2; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/usr/lib/systemd/system"
for d in /usr/lib/systemd/system /lib/systemd/system; do
    [ -d "$d" ] && cp -a "$d/." "$scratch/usr/lib/systemd/system/"
done
rm -f "$scratch"/usr/lib/systemd/system/ibacm.*
# The system's programs the units run besides ours (ExecReload='s /bin/kill), at their
# paths, for the check that each Exec program exists.
for prog in /bin/kill; do
    [ -x "$prog" ] || { echo "verify-units.sh: $prog is missing on this machine" >&2; exit 1; }
    mkdir -p "$scratch$(dirname "$prog")"
    cp "$prog" "$scratch$prog"
done
tar -C "$root" -cf - . | tar -C "$scratch" -xf -

man=--man=no
manpath=$(cd "$root" && find . -path '*/share/man/man8/ibacm.8*' | head -n 1)
if [ -n "$manpath" ]; then
    manpath=$scratch/${manpath#./}
    man=--man=yes
    MANPATH=$(dirname "$(dirname "$manpath")")
    export MANPATH
else
    echo "verify-units.sh: no man pages under $root; Documentation= not checked"
fi

names=$(for u in $units; do basename "$u"; done | tr '\n' ' ')
# shellcheck disable=SC2086 # one word per unit name
if out=$(systemd-analyze verify --root="$scratch" "$man" $names 2>&1) && [ -z "$out" ]; then
    echo "systemd-analyze verify: clean (${names% }) with ${man#--}"
else
    echo "systemd-analyze verify failed for the units under $root:" >&2
    echo "$out" >&2
    exit 1
fi
