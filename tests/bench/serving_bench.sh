#!/bin/bash
# Serving speed: `tpsim serve` of a 10,000-request synthetic Poisson trace (the stream of
# configs/experiments/serving-fused.textproto: Qwen3-4B on wafer-8x8, fused, analytical
# engine) on one core (taskset -c 0 when available), 3 times; prints the median wall time
# (and user CPU time, with /usr/bin/time), skeleton use (TPSIM_SERVE_STATS),
# iterations/s and requests/s. Target (issue 8): under 10 s.
# Usage: serving_bench.sh [TPSIM] [RATE_PER_S] [MODE] [BUCKET]
#   TPSIM default build/bin/tpsim; RATE_PER_S default 0.5 (sustainable: the fused layout
#   serves ~0.86 req/s; use e.g. 1 for an overloaded run); MODE fused (default) or
#   disaggregated; BUCKET mapping.serving.context_bucket_tokens, default 0: exact timing
#   keys (the shipped experiments round contexts up to 64 tokens; a run with BUCKET > 1
#   is approximate and labelled so).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tpsim=${1:-$here/build/bin/tpsim}
rate=${2:-0.5}
mode=${3:-fused}
bucket=${4:-0}
exp="$here/configs/experiments/serving-$mode.textproto"
[ -f "$exp" ] || { echo "serving_bench: no $exp (mode is fused or disaggregated)" >&2; exit 2; }
pin=()
command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null && pin=(taskset -c 0)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -f %U -o "$tmp/cpu")
times=()
cpus=()
for run in 1 2 3; do
  start=$(date +%s.%N)
  TPSIM_SERVE_STATS=1 "${timer[@]}" "${pin[@]}" "$tpsim" serve "$exp" --set workload.requests.synthetic.num_requests=10000 \
    --set workload.requests.synthetic.rate_per_s="$rate" --set mapping.serving.context_bucket_tokens="$bucket" \
    >"$tmp/out" 2>"$tmp/err" || {
    cat "$tmp/err" >&2; exit 1; }
  end=$(date +%s.%N)
  times+=("$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }')")
  [ -s "$tmp/cpu" ] && cpus+=("$(tail -1 "$tmp/cpu")")
done
# "... ; N iterations, M distinct timed" per group.
iters=$(sed -n 's/.*; \([0-9]*\) iterations, \([0-9]*\) distinct timed.*/\1 \2/p' "$tmp/out" |
  awk '{ n += $1; d += $2 } END { print n + 0, d + 0 }')
median=$(printf '%s\n' "${times[@]}" | sort -g | sed -n 2p)
cpu_median=$(printf '%s\n' "${cpus[@]}" | sort -g | sed -n 2p)
grep -E '^(requests:|TTFT |TPOT |throughput:)' "$tmp/out" | sed 's/^/  /'
grep -v '^[0-9.]*$' "$tmp/err" | sed 's/^/  /'  # per group: skeletons, iterations timed from one
# User CPU time too: on a shared machine the wall time includes waiting for the core.
[ -n "$cpu_median" ] && echo "  user CPU time: median $cpu_median s (${cpus[*]} s)"
keys="exact keys"
[ "$bucket" -gt 1 ] && keys="APPROXIMATE: contexts rounded up to $bucket tokens"
awk -v t="$median" -v it="$iters" -v all="${times[*]}" -v rate="$rate" -v mode="$mode" -v pinned="${#pin[@]}" -v keys="$keys" 'BEGIN {
  split(it, a, " ");
  printf "serving_bench: 10000 requests (%s, %s req/s, %s) in %.2f s median of 3 (%s s)%s: %d iterations (%d distinct timed), %.0f iterations/s, %.0f requests/s (target < 10 s: %s)\n",
    mode, rate, keys, t, all, (pinned ? " on core 0" : ""), a[1], a[2], a[1] / t, 10000 / t, (t < 10 ? "met" : "MISSED") }'
