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
# A malformed --shapes file is bad input (exit 2, as tpsim gemm --shapes says it; it was exit 1),
# found before looking for a GPU; options a mode does not read are refused (they were ignored).
tmp=$(mktemp -d)
printf 'm,n,k\n0,64,64\n' >"$tmp/zero.csv"
printf 'm,n,k\n' >"$tmp/empty.csv"
expect 2 "zero.csv:2: m: '0' is not a positive integer" --gemms --shapes "$tmp/zero.csv" --csv /dev/null
expect 2 "empty.csv: no shapes" --gemms --shapes "$tmp/empty.csv" --csv /dev/null
expect 2 "<command line>:1:1: --shapes: $tmp/none.csv: file not found" --gemms --shapes "$tmp/none.csv" --csv /dev/null
expect 2 "--predicted is for an experiment's layer run; --collectives does not read it" --collectives --dry-run --predicted "$tmp/p.json"
expect 2 "--no-numerics is for an experiment's layer run; --gemms does not read it" --gemms --csv /dev/null --no-numerics
expect 2 "--gemms does not read --dry-run" --gemms --csv /dev/null --dry-run
# A flag of one value given twice kept the last (--predicted p1 --predicted p2 wrote p2 only); --set
# without an EXPERIMENT and what only a measurement reads under --dry-run were ignored (exit 0).
expect 2 "--reps given twice ('5' and '6'): give it once" --gemms --csv /dev/null --reps 5 --reps 6
expect 2 "--csv given twice" --collectives --dry-run --csv "$tmp/a.csv" --csv "$tmp/b.csv"
expect 2 "--csv needs a value, got the option '--reps'" --gemms --csv --reps 5
expect 2 "--set sets a field of the EXPERIMENT; --collectives without one" --collectives --dry-run --set bogus=1
expect 2 "--dry-run measures nothing: it does not read --reps" --collectives --dry-run --reps 3
expect 2 "--dry-run measures nothing, so there is no measured result for --out" \
  "$(dirname "$0")/../../validate/experiments/qwen3-4b-h200.textproto" --dry-run --out "$tmp/m.json"
[ -e "$tmp/a.csv" ] || [ -e "$tmp/b.csv" ] || [ -e "$tmp/m.json" ] && { echo "FAIL: a refused line wrote a file"; fail=1; }
[ -e "$tmp/p.json" ] && { echo "FAIL: --collectives wrote --predicted"; fail=1; }
rm -rf "$tmp"
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
# --help on stdout, exit 0, as every tpsim command (it went to stderr).
help_out=$("$v" --help 2>/dev/null)
help_rc=$?
help_err=$("$v" --help 2>&1 >/dev/null)
if [ "$help_rc" -ne 0 ] || ! grep -q "^usage: tpsim-validate" <<<"$help_out" || [ -n "$help_err" ] ||
  ! grep -q -- "--reps N (default 20)" <<<"$help_out"; then
  echo "FAIL: tpsim-validate --help: exit $help_rc, stdout starts: $(head -1 <<<"$help_out"), stderr: $help_err"
  fail=1
fi
[ $fail -eq 0 ] && echo "ok: tpsim-validate timing options"
exit $fail
