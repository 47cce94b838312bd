#!/usr/bin/env bash
# Issue 15's agreement target: |analytical/TLM - 1| <= 10% on >= 95% of 500 random
# experiments and <= 25% on every one (total time). Runs `tpsim agree` on seed 2025,
# writes agree-500.csv, prints the distribution, the warning's hit rate and the worst
# cases; exit 1 when the bounds are not met.
#
#   tests/bench/agree.sh [TPSIM_BINARY] [COUNT] [JOBS] [FAMILY]
# Defaults: build/bin/tpsim, 500, nproc, dense (or moe: the MoE catalog models, --family).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tpsim="${1:-$root/build/bin/tpsim}"
count="${2:-500}"
jobs="${3:-$(nproc)}"
family="${4:-dense}"
if [[ ! -x "$tpsim" ]]; then
  echo "agree.sh: no tpsim binary at $tpsim (pass its path as the first argument)" >&2
  exit 2
fi
exec "$tpsim" agree --seed 2025 --count "$count" --jobs "$jobs" --family "$family" \
  --csv agree-"$family"-"$count".csv --worst 10 --bounds 0.95,0.25
