#!/bin/sh
# Builds the Debian binary package acm-rs from this repository:
#     packaging/deb/build.sh [OUTDIR]          # default OUTDIR: the current directory
# It builds the release binaries with the hardware backend (cargo build --release -p ibacm
# -p ib_acme -p acmdump -p acm-load --features ibacm/verbs; CARGO_TARGET_DIR is honoured, so CI reuses its build),
# stages them with packaging/install.sh --prefix /usr, adds the Debian files kept next
# to this script (control.in, changelog, copyright, maintainer scripts, lintian
# overrides), computes Depends with dpkg-shlibdeps, and writes
# OUTDIR/acm-rs_VERSION_ARCH.deb with dpkg-deb. Needs dpkg-dev, gzip, binutils.
# Set ACM_DEB_SKIP_BUILD=1 to package what is already built.
# packaging/deb/check.sh then runs lintian and compares the file list.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
outdir=${1:-.}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
# From the top, so that a relative CARGO_TARGET_DIR means what it means to cargo here.
cd "$top"
target=${CARGO_TARGET_DIR:-target}

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$top/Cargo.toml")
changelog_version=$(dpkg-parsechangelog -l "$here/changelog" -S Version)
if [ "$version" != "$changelog_version" ]; then
    echo "build.sh: Cargo.toml says $version but packaging/deb/changelog says" \
        "$changelog_version; add a changelog entry (dch -v $version, or by hand)" >&2
    exit 1
fi
arch=$(dpkg --print-architecture)

if [ "${ACM_DEB_SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release --locked -p ibacm -p ib_acme -p acmdump -p acm-load --features ibacm/verbs
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Staged where dpkg-shlibdeps expects a package's files: debian/PACKAGE.
root=$work/src/debian/acm-rs
packaging/install.sh --prefix /usr --destdir "$root" --build-dir "$target/release" \
    --logrotatedir /etc/logrotate.d --gzip-man --strip >/dev/null

doc=$root/usr/share/doc/acm-rs
# The copyright file carries the licenses (lintian: extra-license-file).
rm -f "$doc"/LICENSE*
install -m 0644 "$here/copyright" "$doc/copyright"
# A native package's changelog.
gzip -9n <"$here/changelog" >"$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
install -d -m 0755 "$root/usr/share/lintian/overrides"
install -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/acm-rs"

# Depends: the shared libraries the binaries link (dpkg-shlibdeps reads
# debian/control, so a minimal one is made for it), and rdma-core, whose rdma-hw.target and
# rdma-load-modules@.service the units name and whose udev rules load the modules.
# (It finds the package's root by its DEBIAN directory.)
install -d -m 0755 "$root/DEBIAN"
printf 'Source: acm-rs\n\nPackage: acm-rs\nArchitecture: any\n' >"$work/src/debian/control"
shlibs=$(cd "$work/src" && dpkg-shlibdeps -O debian/acm-rs/usr/sbin/ibacm \
    debian/acm-rs/usr/bin/ib_acme debian/acm-rs/usr/bin/acm-load \
    debian/acm-rs/usr/bin/acmdump | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "build.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
depends="$shlibs, rdma-core (>= 15)"

for s in postinst prerm postrm; do
    install -m 0755 "$here/$s" "$root/DEBIAN/$s"
done
# Everything under /etc is a conffile: today only the logrotate configuration (the
# daemon itself needs no configuration file, see packaging/install.sh).
(cd "$root" && find etc -type f 2>/dev/null | sed 's|^|/|' | sort) >"$root/DEBIAN/conffiles"
[ -s "$root/DEBIAN/conffiles" ] || rm "$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | LC_ALL=C sort |
    xargs -d '\n' md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"
installed_size=$(du -s -k --apparent-size --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" \
    -e "s/@INSTALLED_SIZE@/$installed_size/" -e "s/@DEPENDS@/$depends/" \
    "$here/control.in" >"$root/DEBIAN/control"
chmod 0644 "$root/DEBIAN/control"

# Reproducible: every file dated by the changelog entry.
epoch=$(dpkg-parsechangelog -l "$here/changelog" -S Timestamp)
find "$root" -exec touch --no-dereference --date="@$epoch" {} +
deb=$outdir/acm-rs_${version}_${arch}.deb
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
