#!/bin/bash
# tpsim-validate on a GPU node predicts what `tpsim collectives` prints (the NCCL-like model, host
# issue included, as nccl-tests and the harness measure), not the lowered NVLink transfers on the
# analytical engine (4.22 us against 36.33 for reduce_scatter of 8 KiB over 8 H200s); and it calls
# a chip a GPU node by its gpu block, not by its noc.topology. Needs no GPU (--dry-run).
# Usage: gpu_node_predictions.sh TPSIM_VALIDATE TPSIM
set -uo pipefail
v=$1
t=$2
fail=0
sweep=$("$v" --collectives --dry-run 2>&1) || { echo "FAIL: tpsim-validate --collectives --dry-run: $sweep"; exit 1; }
# COLUMN of the sweep row KIND RANKS BYTES (8: pred_us, 11: ring_us, 12: nvls_us).
col() { awk -v k="$1" -v r="$2" -v b="$3" -v c="$4" '$1==k && $2==r && $3==b {print $c}' <<<"$sweep"; }
# The time column of `tpsim collectives h200-sxm-8 --op KIND --ranks RANKS --sizes BYTES [ARGS]`.
coll() {
  local k=$1 r=$2 b=$3
  shift 3
  "$t" collectives h200-sxm-8 --op "$k" --ranks "$r" --sizes "$b" "$@" | awk '!/^#/ {print $2}'
}
check() {  # WHAT GOT WANT
  if [ -z "$2" ] || [ "$2" != "$3" ]; then
    echo "FAIL: $1: tpsim-validate says '$2', tpsim collectives '$3'"
    fail=1
  fi
}
for point in "reduce_scatter 8 8192" "all_gather 4 1048576" "all_reduce 8 8192" "all_reduce 8 67108864" \
  "all_reduce 2 1073741824"; do
  set -- $point
  check "$point pred_us" "$(col "$1" "$2" "$3" 8)" "$(coll "$1" "$2" "$3")"
  check "$point ring_us" "$(col "$1" "$2" "$3" 11)" "$(coll "$1" "$2" "$3" --algo ring)"
done
check "all_reduce 8 67108864 nvls_us" "$(col all_reduce 8 67108864 12)" "$(coll all_reduce 8 67108864 --algo nvls)"
# nvls is all_reduce only in the GPU model: no forced time for the others.
check "all_gather 8 8192 nvls_us" "$(col all_gather 8 8192 12)" "-"
# A GPU node's collectives are not called non-GPU; a chip without a gpu block is, naming why.
exp=$(dirname "$0")/../../configs/experiments
err=$("$v" "$exp/moe-qwen3-30b-a3b-h200.textproto" --dry-run --no-numerics 2>&1 >/dev/null)
if grep -q "not a GPU node" <<<"$err"; then
  echo "FAIL: h200-sxm-8 (a gpu block) called not a GPU node: $err"
  fail=1
fi
err=$("$v" "$exp/moe-qwen3-30b-a3b.textproto" --dry-run --no-numerics 2>&1 >/dev/null)
if ! grep -q 'chip wafer-8x8 is not a GPU node (it has no `gpu` block; noc.topology "mesh")' <<<"$err"; then
  echo "FAIL: wafer-8x8's warning does not say it has no gpu block and a mesh: $err"
  fail=1
fi
[ $fail -eq 0 ] && echo "ok: tpsim-validate predicts GPU nodes as tpsim collectives does"
exit $fail
