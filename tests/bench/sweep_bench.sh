#!/bin/bash
# Sweep speed: runs configs/sweeps/bench-10k-analytical.textproto (10,000
# analytical points) on 2 workers into a fresh database and prints points per
# second. Target: under 60 s. Usage: sweep_bench.sh [TPSIM] (default build/bin/tpsim).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tpsim=${1:-$here/build/bin/tpsim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s.%N)
"$tpsim" sweep "$here/configs/sweeps/bench-10k-analytical.textproto" --jobs 2 --db "$tmp/bench.sqlite" 2>"$tmp/log" || {
  cat "$tmp/log"; exit 1; }
end=$(date +%s.%N)
tail -1 "$tmp/log"
rows=$(sqlite3 "$tmp/bench.sqlite" 'SELECT COUNT(*) FROM points' 2>/dev/null || echo "?")
awk -v s="$start" -v e="$end" -v n=10000 -v rows="$rows" 'BEGIN {
  t = e - s; printf "sweep_bench: %d points in %.1f s on 2 workers: %.0f points/s (%s rows stored; target < 60 s: %s)\n",
  n, t, n / t, rows, (t < 60 ? "met" : "MISSED") }'
