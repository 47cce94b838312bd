#!/bin/bash
# Sweep speed on 2 workers, each sweep into a fresh database:
#  1. configs/sweeps/bench-10k-reference.textproto: 10,000 analytical points, each the
#     full reference-qwen3-4b job (~75,000 tasks) with seq_len, partition, DRAM and
#     link bandwidth changed (100 distinct Programs; the chip axes reuse them).
#     Target: under 60 s.
#  2. configs/sweeps/bench-distinct-reference.textproto: 200 full reference points
#     that are all distinct Programs (no reuse), and what 10,000 such points would take.
# Prints wall time, points/s and the CPU time of the process (user + sys), which
# other load on the machine inflates less than the wall time.
# Usage: sweep_bench.sh [TPSIM] (default build/bin/tpsim).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tpsim=${1:-$here/build/bin/tpsim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME: sweeps configs/sweeps/NAME.textproto; sets wall, cpu, points, rows.
run() {
  local start end
  local timer=()
  [ -x /usr/bin/time ] && timer=(/usr/bin/time -f "%U %S" -o "$tmp/$1.time")  # GNU time (Debian: apt-get install time)
  start=$(date +%s.%N)
  "${timer[@]}" "$tpsim" sweep "$here/configs/sweeps/$1.textproto" --jobs 2 --db "$tmp/$1.sqlite" 2>"$tmp/$1.log" || {
    cat "$tmp/$1.log"; exit 1; }
  end=$(date +%s.%N)
  tail -1 "$tmp/$1.log"
  wall=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }')
  cpu=nan
  [ -f "$tmp/$1.time" ] && cpu=$(awk '{ printf "%.2f", $1 + $2 }' "$tmp/$1.time")
  rows=$(sqlite3 "$tmp/$1.sqlite" "SELECT COUNT(*) FROM points WHERE status = 'ok'" 2>/dev/null || echo "?")
}

run bench-10k-reference
awk -v t="$wall" -v c="$cpu" -v rows="$rows" -v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
  n = 10000
  printf "sweep_bench: %d full reference points in %.1f s on 2 workers: %.0f points/s, CPU %.1f s (%.2f ms/point); %s ok rows; load average %s; target < 60 s: %s\n",
    n, t, n / t, c, 1000 * c / n, rows, load, (t < 60 ? "met" : "MISSED") }'

run bench-distinct-reference
awk -v t="$wall" -v c="$cpu" -v rows="$rows" 'BEGIN {
  n = 200
  printf "sweep_bench: %d distinct full reference Programs (no reuse) in %.1f s on 2 workers: %.1f points/s, CPU %.1f s (%.1f ms/point); %s ok rows; 10,000 such points: about %.0f s\n",
    n, t, n / t, c, 1000 * c / n, rows, 10000 * t / n }'
