#!/bin/bash
# `tpsim search` speed (issue 19: at least 10,000 candidates on wafer-8x8 with Qwen3-8B in
# at most 60 s on 2 cores). The reference experiment (wafer-8x8, 16 layers, a 256-token
# prompt + 20 decode steps) with --model qwen3-8b, on the default space (every tp x stages,
# partition pair, placement, span and collective: 59,500 candidates), 2 jobs, no TLM
# confirmation. The search is stopped after 60 s (the full space takes far longer); the
# bench prints how many candidates were decided by then (simulated, sharing a Program with
# a simulated one, or pruned by bounds), from the search's progress line, for RUNS runs
# (default 3) and their median.
# Usage: search_bench.sh [TPSIM] [RUNS]
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tpsim=${1:-$here/build/bin/tpsim}
runs=${2:-3}
limit=60
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
decided=()
for r in $(seq 1 "$runs"); do
  timeout -s INT "$limit" "$tpsim" search "$here/configs/experiments/reference-qwen3-4b.textproto" \
    --model qwen3-8b --confirm 0 --jobs 2 >"$tmp/out" 2>"$tmp/log"
  rc=$?
  # "tpsim search: N/M candidates, S simulated (R from -), H shared, P pruned, T s"
  line=$(grep '^tpsim search: [0-9]' "$tmp/log" | tail -1)
  if [ -z "$line" ]; then
    # The first chunk (4 x jobs candidates, the largest TP first) did not finish.
    line="no chunk finished"; n=0
  else
    n=$(echo "$line" | sed -E 's/^tpsim search: ([0-9]+)\/.*/\1/')
  fi
  echo "run $r (exit $rc; 124/130 = stopped at ${limit} s): $line"
  decided+=("$n")
done
median=$(printf '%s\n' "${decided[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "median candidates decided in ${limit} s: $median (target: 10000)"
