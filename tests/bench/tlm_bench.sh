#!/usr/bin/env bash
# TLM engine speed on the reference job (issue 4 target: < 1 s wall, < 200 MB peak RSS
# on one core), for k_split and m_split_rotate: median of N runs of wall time and of
# peak RSS, measured with /usr/bin/time around the whole `tpsim run`. Asserts nothing.
#
#   tests/bench/tlm_bench.sh [TPSIM_BINARY] [EXPERIMENT] [RUNS]
# Defaults: build/bin/tpsim, configs/experiments/reference-qwen3-4b.textproto, 5.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tpsim="${1:-$root/build/bin/tpsim}"
exp="${2:-$root/configs/experiments/reference-qwen3-4b.textproto}"
runs="${3:-5}"
if [[ ! -x "$tpsim" ]]; then
  echo "tlm_bench: no tpsim binary at $tpsim (pass its path as the first argument)" >&2
  exit 2
fi
if [[ ! -x /usr/bin/time ]]; then
  echo "tlm_bench: needs /usr/bin/time (apt-get install -y time)" >&2
  exit 2
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

printf 'experiment %s, engine tlm, %d runs (median), pinned to one core\n' "$(basename "$exp")" "$runs"
printf '%-16s %10s %14s\n' partition wall_s peak_rss_MB
for partition in k_split m_split_rotate; do
  : >"$tmp/wall"
  : >"$tmp/rss"
  for ((i = 0; i < runs; i++)); do
    taskset -c 0 /usr/bin/time -f '%e %M' -o "$tmp/one" \
      "$tpsim" run "$exp" --engine tlm --set "mapping.partition=$partition" >/dev/null
    read -r wall rss_kb <"$tmp/one"
    echo "$wall" >>"$tmp/wall"
    echo "$rss_kb" >>"$tmp/rss"
  done
  wall=$(median <"$tmp/wall")
  rss=$(median <"$tmp/rss" | awk '{printf "%.1f", $1 / 1024}')
  printf '%-16s %10s %14s\n' "$partition" "$wall" "$rss"
done
