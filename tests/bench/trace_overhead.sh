#!/usr/bin/env bash
# Tracing overhead: wall time of a 64-core TLM run with and without --trace (median of N
# runs each) and their ratio. Target (issue 6): ratio <= 2. Prints numbers; asserts nothing.
#
#   tests/bench/trace_overhead.sh [TPSIM_BINARY] [EXPERIMENT] [RUNS]
# Defaults: build/bin/tpsim, configs/experiments/reference-qwen3-4b.textproto, 5.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tpsim="${1:-$root/build/bin/tpsim}"
exp="${2:-$root/configs/experiments/reference-qwen3-4b.textproto}"
runs="${3:-5}"
if [[ ! -x "$tpsim" ]]; then
  echo "trace_overhead: no tpsim binary at $tpsim (pass its path as the first argument)" >&2
  exit 2
fi
trace="$(mktemp -d)/x.pftrace"
trap 'rm -rf "$(dirname "$trace")"' EXIT

# Median wall seconds of `runs` runs of the given command.
median() {
  local times=()
  for ((i = 0; i < runs; i++)); do
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')")
  done
  printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}

plain=$(median "$tpsim" run "$exp" --engine tlm)
traced=$(median "$tpsim" run "$exp" --engine tlm --trace "$trace")
ratio=$(awk -v a="$traced" -v b="$plain" 'BEGIN {print a / b}')
printf 'experiment      %s\n' "$(basename "$exp")"
printf 'runs            %d (median)\n' "$runs"
printf 'without --trace %.3f s\n' "$plain"
printf 'with --trace    %.3f s   (%s bytes of trace)\n' "$traced" "$(stat -c %s "$trace")"
printf 'ratio           %.2fx   (target <= 2x)\n' "$ratio"
