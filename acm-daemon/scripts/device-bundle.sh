#!/usr/bin/env bash
# Collects what the comparison with the C ibacm (vs-reference.sh) needs into one folder
# that runs on a host with no compiler, no package manager and no rdma-core: our
# release binaries, Debian's C daemon and its provider, every shared library they load
# beyond glibc, util-linux's namespace tools as a fallback, the scripts and the demo
# fabric, and the runner (bundle-run.sh, as run.sh). It builds nothing, so that the
# bundle holds exactly the binaries that were tested here; a missing one is named with
# the command that builds it.
#
# Layout: bin/ (ours), c/ibacm and c/prov/libibacmp.so (the C daemon loads every file
# of its provider folder, so that folder holds the provider alone), lib/ (the libraries,
# for LD_LIBRARY_PATH), tools/ (unshare, nsenter, taskset, mount, each behind a wrapper
# that points it at tools/lib; used only where the host has none), repo/ (the scripts
# and testdata/fabrics/demo.toml, where the scripts look for them), VERSION, run.sh.
#
# glibc (libc, libm, the loader, ...) and libgcc_s stay out: every glibc host has them,
# a program must use the loader of the libc it runs with, and the runner's
# LD_LIBRARY_PATH also reaches the host's own tools (bash, python3, grep), which must
# keep their own copies of these. Binaries are stripped.
#
# usage: acm-daemon/scripts/device-bundle.sh [OUTDIR]   (default bench-bundle, which
#        .gitignore lists; run from the repository root, after
#        cargo build --release -p acm-fake-hca -p acm-fabric-hub -p ibacm -p acm-load \
#          -p ib_acme --features ibacm/verbs
#        and with Debian's ibacm package installed; bundle-selftest.sh then runs it
#        here as on a bare host)
set -euo pipefail
out=${1:-bench-bundle}
rel=${CARGO_TARGET_DIR:-target}/release
ours=(ibacm acm-load ib_acme acm-fabric-hub acm-fake-hca-sysfs libacm_fake_hca.so)
c_daemon=/usr/sbin/ibacm
c_provider=/usr/lib/x86_64-linux-gnu/ibacm/libibacmp.so
tools=(unshare nsenter taskset mount)
[ -f testdata/fabrics/demo.toml ] || { echo "device-bundle.sh: run from the repository root" >&2; exit 2; }
for f in "${ours[@]}"; do
  [ -f "$rel/$f" ] || {
    echo "device-bundle.sh: $rel/$f is missing; build it with" >&2
    echo "  cargo build --release -p acm-fake-hca -p acm-fabric-hub -p ibacm -p acm-load -p ib_acme --features ibacm/verbs" >&2
    exit 2
  }
done
# The comparison needs ours on its hardware backend, which only the verbs build has.
if ! ldd "$rel/ibacm" | grep -q libibverbs; then
  echo "device-bundle.sh: $rel/ibacm does not link libibverbs: build it with --features ibacm/verbs" >&2
  exit 2
fi
for f in "$c_daemon" "$c_provider"; do
  [ -f "$f" ] || { echo "device-bundle.sh: $f is missing (Debian's ibacm package)" >&2; exit 2; }
done

rm -rf "$out"
mkdir -p "$out"/{bin,c/prov,lib,tools/real,tools/lib,repo/acm-daemon/scripts,repo/testdata/fabrics}
for f in "${ours[@]}"; do cp "$rel/$f" "$out/bin/"; done
cp "$c_daemon" "$out/c/ibacm"
cp "$c_provider" "$out/c/prov/"
for t in "${tools[@]}"; do
  cp "$(command -v "$t")" "$out/tools/real/"
  # shellcheck disable=SC2016 # expanded by the wrapper
  printf '#!/bin/sh\n# The host has no %s: this copy, with the libraries it was built with.\nd=$(dirname "$0")\nLD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec "$d/real/%s" "$@"\n' \
    "$t" "$t" > "$out/tools/$t"
  chmod +x "$out/tools/$t"
done
# Symbols are not needed to run; the shared objects keep their dynamic symbols.
strip "$out"/bin/* "$out"/c/ibacm "$out"/tools/real/* 2> /dev/null || true
strip --strip-unneeded "$out"/bin/*.so "$out"/c/prov/*.so

# Every library each program loads, by ldd (which follows them recursively); glibc and
# libgcc_s excepted (see above). No libibverbs provider: under the emulated HCA the
# device list and every verb come from libacm_fake_hca.so.
host_only='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libutil|libresolv|libgcc_s)\.so'
copy_libs() { # DEST ELF...
  local dest=$1 name path
  shift
  ldd "$@" 2> /dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
    while read -r name path; do
      [[ $name =~ $host_only ]] && continue
      [ -e "$dest/$name" ] || cp -L "$path" "$dest/$name"
    done
}
copy_libs "$out/lib" "$out"/bin/* "$out"/c/ibacm "$out"/c/prov/*.so
copy_libs "$out/tools/lib" "$out"/tools/real/*
strip --strip-unneeded "$out"/lib/* "$out"/tools/lib/* 2> /dev/null || true
if ldd "$out"/bin/* "$out"/c/ibacm "$out"/c/prov/*.so | grep "not found"; then
  echo "device-bundle.sh: a library above is missing here" >&2
  exit 1
fi

cp acm-daemon/scripts/*.sh acm-daemon/scripts/*.py "$out/repo/acm-daemon/scripts/"
cp testdata/fabrics/demo.toml "$out/repo/testdata/fabrics/"
cp acm-daemon/scripts/bundle-run.sh "$out/run.sh"
{
  echo "commit $(git rev-parse HEAD 2> /dev/null || echo unknown)$(git diff --quiet HEAD 2> /dev/null || echo ' (with uncommitted changes)')"
  echo "bundled $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "ibacm: $("$rel/ibacm" --version 2>&1 | head -1)"
  echo "C ibacm: $(dpkg-query -W -f '${Package} ${Version}' ibacm 2> /dev/null || echo "$c_daemon")"
} > "$out/VERSION"
cat "$out/VERSION"
echo "$out: $(du -sh "$out" | cut -f1) ($(du -sb "$out" | cut -f1) bytes); the device tool carries at most 64 MiB with the working tree"
