#!/bin/sh
# Installs acm-rs from an existing release build: ibacm into sbin; ib_acme, acm-load and
# acmdump into bin; the systemd units; the man pages in man/; an example options file;
# the license files; the logrotate configuration (as an example, or into the directory
# --logrotatedir names). It never builds (so running it as root never runs cargo as root):
# build first, as yourself, with
#     cargo build --release -p ibacm -p ib_acme -p acmdump -p acm-load --features ibacm/verbs
# then, for example,
#     sudo packaging/install.sh                  # under /usr/local
#     packaging/install.sh --prefix /usr --destdir /tmp/stage
# `packaging/install.sh --help` lists the options. The Debian package
# (packaging/deb/build.sh) is made from this script's output.
set -eu

usage() {
    cat <<'EOF'
usage: packaging/install.sh [options]
  --prefix DIR     installation prefix (default /usr/local)
  --destdir DIR    stage everything under DIR, as DESTDIR does (default: none)
  --build-dir DIR  where the built binaries are
                   (default ${CARGO_TARGET_DIR:-target}/release)
  --bindir DIR     ib_acme, acm-load, acmdump (default PREFIX/bin)
  --sbindir DIR    ibacm (default PREFIX/sbin)
  --mandir DIR     man pages (default PREFIX/share/man)
  --unitdir DIR    systemd units (default /lib/systemd/system for the prefix /usr,
                   as Debian's ibacm package; else PREFIX/lib/systemd/system)
  --docdir DIR     example options file, license files (default PREFIX/share/doc/acm-rs)
  --logrotatedir DIR
                   install the logrotate configuration as DIR/ibacm (for example
                   /etc/logrotate.d); without it, it goes to DOCDIR/examples/logrotate.ibacm
  --gzip-man       compress the man pages (gzip -9n), as Debian packages ship them
  --strip          strip the binaries' symbols and debug information
  --help           this text
Environment: DESTDIR is used when --destdir is not given.
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")

prefix=/usr/local
destdir=${DESTDIR:-}
build_dir=
bindir=
sbindir=
mandir=
unitdir=
docdir=
logrotatedir=
gzip_man=no
strip_bins=no

while [ $# -gt 0 ]; do
    opt=$1
    case $opt in
        --gzip-man) gzip_man=yes; shift; continue ;;
        --strip) strip_bins=yes; shift; continue ;;
        --help|-h) usage; exit 0 ;;
        --*=*) val=${opt#*=}; opt=${opt%%=*} ;;
        --*)
            [ $# -ge 2 ] || { echo "install.sh: $opt needs a value" >&2; exit 2; }
            val=$2; shift ;;
        *) echo "install.sh: unexpected argument $opt" >&2; usage >&2; exit 2 ;;
    esac
    shift
    case $opt in
        --prefix) prefix=$val ;;
        --destdir) destdir=$val ;;
        --build-dir) build_dir=$val ;;
        --bindir) bindir=$val ;;
        --sbindir) sbindir=$val ;;
        --mandir) mandir=$val ;;
        --unitdir) unitdir=$val ;;
        --docdir) docdir=$val ;;
        --logrotatedir) logrotatedir=$val ;;
        *) echo "install.sh: unknown option $opt" >&2; usage >&2; exit 2 ;;
    esac
done

case $prefix in
    /*) ;;
    *) echo "install.sh: --prefix must be absolute: $prefix" >&2; exit 2 ;;
esac
prefix=${prefix%/}
[ -n "$prefix" ] || prefix=/
bindir=${bindir:-$prefix/bin}
sbindir=${sbindir:-$prefix/sbin}
mandir=${mandir:-$prefix/share/man}
docdir=${docdir:-$prefix/share/doc/acm-rs}
if [ -z "$unitdir" ]; then
    # Debian's ibacm installs its units in /lib/systemd/system; the package replaces
    # those files. systemd also reads PREFIX/lib/systemd/system for PREFIX /usr/local.
    if [ "$prefix" = /usr ]; then
        unitdir=/lib/systemd/system
    else
        unitdir=$prefix/lib/systemd/system
    fi
fi
build_dir=${build_dir:-${CARGO_TARGET_DIR:-$top/target}/release}

missing=
for b in ibacm ib_acme acm-load acmdump; do
    [ -x "$build_dir/$b" ] || missing="$missing $b"
done
if [ -n "$missing" ]; then
    echo "install.sh: not built in $build_dir:$missing" >&2
    echo "build them first (as yourself, not root):" >&2
    echo "    cargo build --release -p ibacm -p ib_acme -p acmdump -p acm-load --features ibacm/verbs" >&2
    exit 1
fi
# A daemon built without the verbs feature serves only simulated fabrics.
if command -v readelf >/dev/null 2>&1 &&
    ! readelf -d "$build_dir/ibacm" | grep -q 'libibverbs'; then
    echo "install.sh: warning: $build_dir/ibacm was built without --features verbs;" \
        "it cannot use InfiniBand hardware" >&2
fi

d() { printf '%s%s' "$destdir" "$1"; }

say() { echo "  $1"; }

echo "installing under $prefix${destdir:+, staged in $destdir}"

install -d -m 0755 "$(d "$sbindir")" "$(d "$bindir")"
put_bin() {
    install -m 0755 "$build_dir/$1" "$2/$1"
    if [ "$strip_bins" = yes ]; then
        strip --remove-section=.comment --remove-section=.note "$2/$1"
    fi
    say "$2/$1"
}
put_bin ibacm "$(d "$sbindir")"
for b in ib_acme acm-load acmdump; do
    put_bin "$b" "$(d "$bindir")"
done

# The units name the daemon by its installed path.
install -d -m 0755 "$(d "$unitdir")"
for u in ibacm.service ibacm.socket; do
    sed "s|^ExecStart=/usr/sbin/ibacm|ExecStart=$sbindir/ibacm|" \
        "$top/dist/systemd/$u" >"$(d "$unitdir")/$u"
    chmod 0644 "$(d "$unitdir")/$u"
    say "$(d "$unitdir")/$u"
done
if ! grep -q "^ExecStart=$sbindir/ibacm " "$(d "$unitdir")/ibacm.service"; then
    echo "install.sh: dist/systemd/ibacm.service has no ExecStart=/usr/sbin/ibacm line" >&2
    exit 1
fi

# Whatever man pages the tree has (man/NAME.SECTION, roff).
for page in "$top"/man/*.[1-8]; do
    [ -f "$page" ] || continue
    name=$(basename "$page")
    dir=$(d "$mandir")/man${name##*.}
    install -d -m 0755 "$dir"
    if [ "$gzip_man" = yes ]; then
        gzip -9n <"$page" >"$dir/$name.gz"
        chmod 0644 "$dir/$name.gz"
        say "$dir/$name.gz"
    else
        install -m 0644 "$page" "$dir/$name"
        say "$dir/$name"
    fi
done

# An options file to start from: what `ib_acme -O` writes, every option at its
# default and explained. Not installed into /etc: the daemon needs none (Debian's
# ibacm ships none either), and copying it there changes nothing until edited.
install -d -m 0755 "$(d "$docdir")/examples"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build_dir/ib_acme" -O -D "$tmp" >/dev/null
install -m 0644 "$tmp/ibacm_opts.cfg" "$(d "$docdir")/examples/ibacm_opts.cfg"
say "$(d "$docdir")/examples/ibacm_opts.cfg"
# The log's rotation: into /etc only when asked (the Debian package does), else as an
# example beside the options file.
if [ -n "$logrotatedir" ]; then
    install -d -m 0755 "$(d "$logrotatedir")"
    install -m 0644 "$top/dist/logrotate/ibacm" "$(d "$logrotatedir")/ibacm"
    say "$(d "$logrotatedir")/ibacm"
else
    install -m 0644 "$top/dist/logrotate/ibacm" "$(d "$docdir")/examples/logrotate.ibacm"
    say "$(d "$docdir")/examples/logrotate.ibacm"
fi
for f in "$top"/LICENSE*; do
    [ -f "$f" ] || continue
    install -m 0644 "$f" "$(d "$docdir")/$(basename "$f")"
    say "$(d "$docdir")/$(basename "$f")"
done

if [ -z "$destdir" ]; then
    echo "done. To run it as a service: systemctl daemon-reload;" \
        "systemctl enable --now ibacm.socket"
fi
