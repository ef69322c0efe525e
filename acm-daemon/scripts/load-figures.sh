# shellcheck shell=bash
# Sourced by the benchmark scripts that load a daemon with acm-load: the figures they
# print of a run and of the process that served it.

summary() { # acm-load's --json report -> "rps answered p50"; fails on any error
  python3 -c 'import json,sys; j=json.load(sys.stdin); l=j["latency_us"]
assert j["errors"]["total"] == 0, j["errors"]
print("%d %d %s" % (j["requests_per_s"], j["requests"]["answered"], l["p50"]))'
}

usage() { # pid -> "cpu_ticks context_switches", summed over the process's threads
  local ticks=0 cs=0 t
  for t in /proc/"$1"/task/*; do
    ticks=$(( ticks + $(awk '{print $14 + $15}' "$t/stat") ))
    cs=$(( cs + $(awk '/ctxt_switches/ {n += $2} END {print n}' "$t/status") ))
  done
  echo "$ticks $cs"
}
