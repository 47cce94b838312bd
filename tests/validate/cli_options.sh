#!/bin/bash
# tpsim-validate's timing options: bad values are usage errors (exit 2, the rule named); good
# ones get as far as looking for a GPU (exit 1 here, where there is none).
# Usage: cli_options.sh TPSIM_VALIDATE
set -uo pipefail
v=$1
fail=0
expect() {  # EXIT PATTERN ARGS...: the exit status and a line of stderr
  local want=$1 pat=$2
  shift 2
  local err rc
  err=$("$v" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -q -- "$pat" <<<"$err"; then
    echo "FAIL: tpsim-validate $*: exit $rc (want $want), stderr: $err"
    fail=1
  fi
}
expect 2 "--timing needs queued or alone, got 'bogus'" --gemms --csv /dev/null --timing bogus
expect 2 "--warm-l2 needs --gemms with --timing queued" --gemms --csv /dev/null --warm-l2 --timing alone
expect 2 "--warm-l2 needs --gemms with --timing queued" --collectives --warm-l2
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" = 0 ]; then
  expect 1 "no CUDA device found" --gemms --csv /dev/null --warm-l2
  expect 1 "no CUDA device found" --gemms --csv /dev/null --timing=alone
fi
"$v" --help 2>&1 | grep -q -- "--timing queued (default)" || { echo "FAIL: --help lacks --timing"; fail=1; }
# --predicted-program needs no GPU: with --dry-run it writes the analytical engine's Result for the
# Program the harness runs, whose q, k and v projections are separate ops (tpsim run fuses them on
# a GPU node into qkv_proj).
exp=$(dirname "$0")/../../validate/experiments/qwen3-4b-h200.textproto
out=$(mktemp)
if "$v" "$exp" --set mapping.tp=2 --dry-run --predicted-program "$out" >/dev/null 2>&1 &&
  grep -q '"op": "q_proj"' "$out" && grep -q '"op": "v_proj"' "$out" && ! grep -q '"op": "qkv_proj"' "$out" &&
  grep -q '"engine": "analytical"' "$out"; then :; else
  echo "FAIL: --dry-run --predicted-program did not write the harness's Program's prediction"
  fail=1
fi
rm -f "$out"
[ $fail -eq 0 ] && echo "ok: tpsim-validate timing options"
exit $fail
