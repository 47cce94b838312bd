#!/usr/bin/env bash
# The Program IR's cost (issue 13 item 1): bytes per task and lowering time of the reference
# experiment (program_bench, median of 11 fresh Lowers), bytes per task of the wafer, and the
# wafer's analytical run end to end (peak RSS and wall of `tpsim run`, median of N runs, from
# /usr/bin/time -v). Targets: <= 48 B/task, reference lowering <= 20 ms, wafer <= 200 MB and
# <= 1 s. Prints numbers; asserts nothing.
#
#   tests/bench/program_bench.sh [BUILD_DIR] [RUNS]
# Defaults: build, 5.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
runs="${2:-5}"
bench="$build/tests/bench/program_bench"
tpsim="$build/bin/tpsim"
for bin in "$bench" "$tpsim"; do
  if [[ ! -x "$bin" ]]; then
    echo "program_bench: no $bin (build the program_bench and tpsim targets)" >&2
    exit 2
  fi
done
if [[ ! -x /usr/bin/time ]]; then
  echo "program_bench: needs /usr/bin/time (apt-get install -y time)" >&2
  exit 2
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

"$bench" --benchmark_repetitions=11 --benchmark_format=json --benchmark_out="$tmp/b.json" \
  --benchmark_out_format=json >/dev/null
python3 - "$tmp/b.json" <<'PY'
import json, statistics, sys
runs = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    runs.setdefault(b["label"], []).append(b)
print(f"{'experiment':<24} {'tasks':>9} {'deps/task':>9} {'bytes/task':>10} {'lower_ms (median)':>18}")
for label, bs in runs.items():
    ms = statistics.median(b["real_time"] for b in bs)
    b = bs[0]
    print(f"{label:<24} {b['tasks']:>9.0f} {b['deps/task']:>9.2f} {b['bytes/task']:>10.1f} {ms:>18.1f}")
PY

exp="$root/configs/experiments/wafer-32x32-qwen3-32b.textproto"
: >"$tmp/wall"
: >"$tmp/rss"
for ((i = 0; i < runs; i++)); do
  /usr/bin/time -v -o "$tmp/one" "$tpsim" run "$exp" --engine analytical >/dev/null
  awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0; for (k = 1; k <= n; k++) s = s * 60 + t[k]; print s}' \
    "$tmp/one" >>"$tmp/wall"
  awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/one" >>"$tmp/rss"
done
printf 'wafer-32x32-qwen3-32b analytical, %d runs (median): wall %s s, peak RSS %s MB\n' "$runs" \
  "$(median <"$tmp/wall")" "$(median <"$tmp/rss" | awk '{printf "%.1f", $1 / 1024}')"
