# shellcheck shell=bash
# Sourced by the benchmark scripts: makes a temporary folder, $dir
# (/tmp/acm-NAME.XXXXXX), and removes it on exit after ending every background job the
# script started.
#
# usage: source bench-dir.sh NAME
dir=$(mktemp -d "/tmp/acm-${1:-bench}.XXXXXX")
cleanup() {
  local pids
  mapfile -t pids < <(jobs -p)
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
