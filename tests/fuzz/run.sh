#!/usr/bin/env bash
# Runs every fuzz target of build-fuzz/tests/fuzz for SECONDS each (default 20) from a copy of
# its committed corpus (tests/fuzz/corpus/TARGET), with the limits the README states; exits
# non-zero on the first crash, leak, timeout or out-of-memory. Usage: run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-20}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(config_fuzz hf_import_fuzz sweep_fuzz trace_fuzz placement_fuzz edges_fuzz)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  cp tests/fuzz/corpus/"$t"/* "$work/$t"/
  echo "fuzz: $t for ${seconds} s"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    build-fuzz/tests/fuzz/"$t" "$work/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -print_final_stats=1 -artifact_prefix="$work/$t-" 2>&1 | grep -E "^(stat::|==|SUMMARY|Done)" || true
  if ls "$work/$t-"* >/dev/null 2>&1; then
    echo "fuzz: $t found a failing input:" && ls "$work/$t-"* && exit 1
  fi
done
