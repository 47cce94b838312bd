#!/bin/bash
# tpsim-validate --collectives sweeps 2, 4 and 8 ranks where both this machine and the chip have
# that many GPUs (validate/microbench_plan.h, CollectiveSweepRanks). A chip of one core has no
# collective: exit 2 naming its core count and the rule (it swept 1 rank and printed 0 us for
# every size), at the --set that made it one core (chip.noc.rows) where one did, else at the chip
# file's chip.noc (the error pointed there also when a --set had made it one core). With more GPUs here than the chip has, the sweep stops at the chip's
# GPUs and says so (it measured them all, then failed with exit 1 predicting the first rank count
# above the chip's); that part runs only where there are GPUs.
# Usage: collectives_ranks.sh TPSIM_VALIDATE
set -uo pipefail
v=$1
fail=0
exp=$(dirname "$0")/../../configs/experiments/default.textproto
one_core=(--set chip.noc.rows=1 --set chip.noc.cols=1 --set mapping.tp=1 --set mapping.pipeline_stages=1
  --set workload.num_layers=1)
rule="1 core: tpsim-validate --collectives needs a chip of at least 2 cores (GPUs): a collective runs over 2 or more ranks"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The same chip made one core in its own file (an experiment naming it by absolute path).
here=$(cd "$(dirname "$0")/../.." && pwd)
sed -e 's/^  rows: 8/  rows: 1/' -e 's/^  cols: 8/  cols: 1/' "$here/configs/chips/wafer-8x8.textproto" >"$tmp/one.textproto"
sed -e "s|^chip_file: .*|chip_file: \"$tmp/one.textproto\"|" "$here/configs/experiments/default.textproto" >"$tmp/e.textproto"
one_file=(--set mapping.tp=1 --set mapping.pipeline_stages=1 --set workload.num_layers=1)
check() {  # check NAME WHERE FIELD EXPERIMENT ARGS...
  local name=$1 where=$2 field=$3 e=$4
  shift 4
  for dry in --dry-run ""; do
    out=$("$v" "$e" "$@" --collectives $dry 2>"$tmp/err")
    rc=$?
    err=$(cat "$tmp/err")
    if [ "$rc" -ne 2 ] || ! grep -qF -- "$where" <<<"$err" || ! grep -qF -- "$field: $rule" <<<"$err"; then
      echo "FAIL: $name, --collectives $dry: exit $rc (want 2 at $where, $field), stderr: $err"
      fail=1
    fi
    if [ -n "$out" ]; then
      echo "FAIL: $name, --collectives $dry printed a sweep: $(head -5 <<<"$out")"
      fail=1
    fi
  done
}
check "a chip made one core by --set" "<command line: --set chip.noc.rows=1>:1:1:" chip.noc.rows "$exp" "${one_core[@]}"
check "a chip file of one core" "one.textproto:28:1:" chip.noc "$tmp/e.textproto" "${one_file[@]}"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -ge 4 ]; then
  h200=$(dirname "$0")/../../validate/experiments/qwen3-4b-h200.textproto
  out=$("$v" "$h200" --set chip.noc.nodes=2 --set mapping.tp=2 --collectives --reps 2 --warmup 1 2>&1)
  rc=$?
  if [ "$rc" -ne 0 ] || ! grep -q "^# this machine has $gpus GPUs, chip h200-sxm-8 has 2: ranks 4.* not swept" <<<"$out" ||
    grep -q '^all_reduce  *4 ' <<<"$out"; then
    echo "FAIL: $gpus GPUs here, a chip of 2: exit $rc, output: $(head -5 <<<"$out")"
    fail=1
  fi
fi
[ $fail -eq 0 ] && echo "ok: tpsim-validate --collectives sweeps only ranks the chip has"
exit $fail
