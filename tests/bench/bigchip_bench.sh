#!/bin/bash
# Big chips (issue 18): the 1024-core wafer, wall time, user CPU and peak RSS (/usr/bin/time -v),
# median of RUNS runs each (default 5):
#   - `tpsim run configs/experiments/wafer-32x32-qwen3-32b.textproto` on the analytical and the
#     TLM engine (targets: 0.5 s and 150 MB analytical, 1 s TLM);
#   - the chunked prefill of one 131,072-token prompt in 8,192-token chunks on Qwen3-32B with
#     `tpsim serve` on the same wafer (README "Long generations"; target: under 10 s);
#   - with LONGGEN=1 in the environment, also 100 decode steps of the experiment on the
#     analytical engine, timed step by step over a head of 10.8 million tasks (README "Long
#     generations on a big chip"; no target; about 15 s a run).
# With a second binary BEFORE, every case runs both, alternating run by run (same load), and
# prints a line for each. Asserts nothing.
# Usage: bigchip_bench.sh [TPSIM] [RUNS] [BEFORE]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tpsim=${1:-$here/build/bin/tpsim}
runs=${2:-5}
before=${3:-}
exp="$here/configs/experiments/wafer-32x32-qwen3-32b.textproto"
[ -x /usr/bin/time ] || { echo "bigchip_bench: needs /usr/bin/time (GNU time)" >&2; exit 2; }
for bin in "$tpsim" ${before:+"$before"}; do
  [ -x "$bin" ] || { echo "bigchip_bench: no binary $bin" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chunked=(--set model.max_position_embeddings=131073 --set mapping.serving.layers_simulated=64
  --set mapping.serving.max_tokens_per_iteration=8192 --set mapping.serving.chunk_tokens=8192
  --set workload.requests.synthetic.num_requests=1 --set workload.requests.synthetic.rate_per_s=1
  --set workload.requests.synthetic.prompt_tokens.dist=fixed
  --set workload.requests.synthetic.prompt_tokens.value=131072
  --set workload.requests.synthetic.output_tokens.dist=fixed
  --set workload.requests.synthetic.output_tokens.value=1)

median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# one LABEL BIN ARGS...: one run, appending "wall user rss_kb" to $tmp/LABEL and the output's
# first result line to $tmp/LABEL.out.
one() {
  local label=$1 bin=$2
  shift 2
  if ! /usr/bin/time -v -o "$tmp/time" "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; then
    echo "bigchip_bench: $label failed: $(head -1 "$tmp/err")" >&2
    exit 1
  fi
  local wall user rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/time" |
    awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }')
  user=$(sed -n 's/.*User time (seconds): //p' "$tmp/time")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time")
  echo "$wall $user $rss" >>"$tmp/$label"
  grep -m1 -E '^(total|TTFT)' "$tmp/out" >"$tmp/$label.out" || true
}

# case NAME ARGS...: RUNS runs of each binary, alternating, then one line per binary.
case_lines() {
  local name=$1
  shift
  rm -f "$tmp"/after* "$tmp"/before*
  for ((i = 0; i < runs; i++)); do
    one after "$tpsim" "$@"
    [ -n "$before" ] && one before "$before" "$@"
  done
  for label in ${before:+before} after; do
    printf '%-28s %-6s  wall %5s s  user %5s s  peak RSS %6.1f MB  %s\n' "$name" "$label" \
      "$(awk '{print $1}' "$tmp/$label" | median)" "$(awk '{print $2}' "$tmp/$label" | median)" \
      "$(awk '{print $3 / 1024}' "$tmp/$label" | median)" "$(cut -c1-40 "$tmp/$label.out")"
  done
}

echo "wafer-32x32-qwen3-32b, median of $runs runs (wall, user CPU, peak RSS from /usr/bin/time -v)"
case_lines "run, analytical" run "$exp" --quiet
case_lines "run, tlm" run "$exp" --engine tlm --quiet
case_lines "serve, 131072-token prompt" serve "$exp" "${chunked[@]}"
if [ -n "${LONGGEN:-}" ]; then
  case_lines "run, 100 decode steps" run "$exp" --set workload.decode_steps=100 --quiet
fi
