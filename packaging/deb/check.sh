#!/bin/sh
# Checks a package made by packaging/deb/build.sh:
#     packaging/deb/check.sh DEB             # what CI runs
#     packaging/deb/check.sh --update DEB    # rewrite expected-files.txt from DEB
# 1. lintian, failing on errors and warnings (justified overrides are in
#    packaging/deb/lintian-overrides);
# 2. its file list against packaging/deb/expected-files.txt, plus one man page
#    usr/share/man/manN/NAME.N.gz for each man/NAME.N of the tree (kept out of the list,
#    so that adding a page needs no list change);
# 3. packaging/verify-units.sh on its unpacked files (systemd-analyze verify);
# 4. its maintainer scripts: installed, reinstalled (an upgrade) and purged with dpkg
#    in a scratch root (DPKG_ROOT), the units enabled and then forgotten. The host's
#    systemd is not touched: the scripts leave it alone under DPKG_ROOT, and
#    deb-systemd-helper writes inside DPKG_ROOT (init-system-helpers 1.61 and later;
#    with an older one this step is skipped).
# After changing what the package installs, run build.sh, then check.sh --update,
# and review the list's diff.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
update=no
if [ "${1:-}" = --update ]; then
    update=yes
    shift
fi
[ $# -eq 1 ] || { echo "usage: packaging/deb/check.sh [--update] DEB" >&2; exit 2; }
deb=$1
expected=$here/expected-files.txt

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Every path in the package, directories included, without ./ and trailing /.
dpkg-deb --fsys-tarfile "$deb" | tar -tf - | sed -e 's|^\./||' -e 's|/$||' |
    grep -v '^$' | LC_ALL=C sort >"$work/actual"
grep -v '^usr/share/man\(/\|$\)' "$work/actual" >"$work/actual-nonman" || true

if [ "$update" = yes ]; then
    {
        echo "# Every path packaging/deb/build.sh puts in acm-rs, man pages excepted (they"
        echo "# are derived from man/ at check time). Regenerate with"
        echo "#     packaging/deb/check.sh --update DEB"
        cat "$work/actual-nonman"
    } >"$expected"
    echo "wrote $expected"
    exit 0
fi

echo "== lintian $(basename "$deb")"
suppress=
if ! ls "$top"/man/*.[1-8] >/dev/null 2>&1; then
    # The man pages come from man/; a tree without any cannot ship them. Every other
    # warning still fails.
    echo "no man pages in $top/man: lintian's no-manual-page is not checked"
    suppress="--suppress-tags no-manual-page"
fi
# shellcheck disable=SC2086 # $suppress is empty or two words
lintian --fail-on error,warning --display-info --tag-display-limit 0 $suppress "$deb"

echo "== file list"
for page in "$top"/man/*.[1-8]; do
    [ -f "$page" ] || continue
    name=$(basename "$page")
    echo "usr/share/man"
    echo "usr/share/man/man${name##*.}"
    echo "usr/share/man/man${name##*.}/$name.gz"
done | LC_ALL=C sort -u >"$work/expected-man"
grep -v '^#' "$expected" | cat - "$work/expected-man" | LC_ALL=C sort >"$work/expected"
if ! diff -u "$work/expected" "$work/actual" >"$work/diff"; then
    echo "the package's files differ from packaging/deb/expected-files.txt" \
        "(and man/); - expected, + in the package:" >&2
    tail -n +3 "$work/diff" >&2
    echo "if the change is intended: packaging/deb/check.sh --update $deb" >&2
    exit 1
fi
echo "$(wc -l <"$work/actual") paths as expected"

echo "== systemd-analyze verify"
dpkg-deb -x "$deb" "$work/root"
"$top/packaging/verify-units.sh" "$work/root"

echo "== maintainer scripts in a scratch dpkg root"
helper=$(command -v deb-systemd-helper || true)
if [ -z "$helper" ] || ! grep -q DPKG_ROOT "$helper"; then
    echo "deb-systemd-helper does not know DPKG_ROOT here: not run"
    exit 0
fi
r=$work/dpkg-root
mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$r/etc/systemd/system"
touch "$r/var/lib/dpkg/status" "$r/var/lib/dpkg/available"
not_root=
[ "$(id -u)" = 0 ] || not_root=--force-not-root
in_root() {
    # The scratch root has none of the package's dependencies.
    # shellcheck disable=SC2086 # $not_root is empty or one word
    dpkg --root="$r" --force-script-chrootless --force-depends $not_root --log=/dev/null "$@" \
        >"$work/dpkg.out" 2>&1 || { cat "$work/dpkg.out" >&2; exit 1; }
}
enabled() {
    for link in sockets.target.wants/ibacm.socket rdma-hw.target.wants/ibacm.service; do
        if [ -L "$r/etc/systemd/system/$link" ]; then
            echo "$link"
        fi
    done
}
in_root -i "$deb"
[ "$(enabled | wc -l)" = 2 ] || { echo "installed, but the units are not enabled:" \
    "$(enabled)" >&2; exit 1; }
in_root -i "$deb"
[ "$(enabled | wc -l)" = 2 ] || { echo "reinstalled, the units are no longer enabled" >&2; exit 1; }
in_root --purge acm-rs
left=$(find "$r/etc" "$r/var/lib/systemd" -mindepth 1 ! -type d 2>/dev/null) || true
[ -z "$left" ] || { echo "purged, but left behind: $left" >&2; exit 1; }
echo "installed (units enabled), reinstalled, purged (nothing left)"
