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
[ $fail -eq 0 ] && echo "ok: tpsim-validate timing options"
exit $fail
