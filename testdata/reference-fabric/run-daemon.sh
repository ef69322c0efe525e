#!/usr/bin/env bash
# Runs our ibacm in the foreground as the reference captures' host, on the simulated
# fabric of fabric.toml, with the options, address and hosts files the reference daemon
# read. The socket is RUN_DIR/ibacm-unix.sock; the log is RUN_DIR/ibacm.log.
#
#   testdata/reference-fabric/run-daemon.sh RUN_DIR
#   ib_acme -S RUN_DIR/ibacm-unix.sock -f i -s 10.0.0.1 -d 10.0.0.2
#
# The daemon binary is $IBACM if set, else the workspace's debug build (built first, and
# found where cargo reports it, so CARGO_TARGET_DIR and a configured target-dir count).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 RUN_DIR" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$1"
run_dir="$(cd "$1" && pwd)"
if [ -z "${IBACM:-}" ]; then
  IBACM="$(cargo build -q --manifest-path "$here/../../Cargo.toml" -p ibacm \
    --message-format=json-render-diagnostics |
    sed -n 's/.*"executable":"\([^"]*\/ibacm\)".*/\1/p' | tail -n 1)"
  if [ -z "$IBACM" ]; then
    echo "$0: cargo did not report the ibacm binary it built" >&2
    exit 1
  fi
fi
# The reference's options, plus the paths the shared copy leaves out.
{
  cat "$here/ibacm_opts.cfg"
  echo "log_file $run_dir/ibacm.log"
  echo "addr_data_file $here/ibacm_hosts.data"
} > "$run_dir/ibacm_opts.cfg"
exec "$IBACM" -P --fabric "sim:$here/fabric.toml:fakehost" --run-dir "$run_dir" \
  -O "$run_dir/ibacm_opts.cfg" -A "$here/ibacm_addr.cfg"
