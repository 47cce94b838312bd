#!/bin/bash
# tpsim-validate --collectives predicts what `tpsim collectives` prints (both call
# sim::PredictCollective): on a GPU node the NCCL-like model, host issue included, as nccl-tests
# and the harness measure, not the lowered NVLink transfers on the analytical engine (4.22 us
# against 36.33 for reduce_scatter of 8 KiB over 8 H200s); on other chips tpsim's collective
# lowering on the analytical engine. And it calls a chip a GPU node by its gpu block, not by its
# noc.topology. Needs no GPU (--dry-run).
# Usage: gpu_node_predictions.sh TPSIM_VALIDATE TPSIM
set -uo pipefail
v=$1
t=$2
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sweep=$("$v" --collectives --dry-run 2>&1) || { echo "FAIL: tpsim-validate --collectives --dry-run: $sweep"; exit 1; }
# COLUMN of the sweep row KIND RANKS BYTES (7: algo, 8: pred_us, 10: pred_bus, 11: ring_us,
# 12: nvls_us).
col() { awk -v k="$1" -v r="$2" -v b="$3" -v c="$4" '$1==k && $2==r && $3==b {print $c}' <<<"$sweep"; }
# COLUMN (2: time, 4: busbw, 5: algorithm) of `tpsim collectives $chip --op KIND --ranks RANKS
# --sizes BYTES [ARGS]`.
chip=h200-sxm-8
collc() {
  local k=$1 r=$2 b=$3 c=$4
  shift 4
  "$t" collectives "$chip" --op "$k" --ranks "$r" --sizes "$b" "$@" | awk -v c="$c" '!/^#/ {print $c}'
}
# Its time column.
coll() {
  local k=$1 r=$2 b=$3
  shift 3
  collc "$k" "$r" "$b" 2 "$@"
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
# Chips without a gpu block: wafer-8x8 (the default experiment, a mesh: ring only) and h200-sxm-8
# without its gpu block (a switch with in-switch reduction: nvls for all_reduce from 1 MiB over
# 4 ranks, and nvls forced for every kind).
exp=$(dirname "$0")/../../configs/experiments
sweep=$("$v" "$exp/default.textproto" --collectives --dry-run 2>&1) ||
  { echo "FAIL: tpsim-validate default.textproto --collectives --dry-run: $sweep"; exit 1; }
chip=wafer-8x8
for point in "reduce_scatter 8 8192" "all_gather 4 1048576" "all_reduce 8 67108864" "all_reduce 2 1073741824"; do
  set -- $point
  check "wafer-8x8 $point pred_us" "$(col "$1" "$2" "$3" 8)" "$(coll "$1" "$2" "$3")"
  check "wafer-8x8 $point pred_bus" "$(col "$1" "$2" "$3" 10)" "$(collc "$1" "$2" "$3" 4)"
  check "wafer-8x8 $point algo" "$(col "$1" "$2" "$3" 7)" "$(collc "$1" "$2" "$3" 5)"
  check "wafer-8x8 $point ring_us" "$(col "$1" "$2" "$3" 11)" "$(coll "$1" "$2" "$3" --algo ring)"
  check "wafer-8x8 $point nvls_us" "$(col "$1" "$2" "$3" 12)" "-"
done
# wafer-32x32: all_reduce of 32 KiB over 8 ranks takes 915,000 ps. tpsim collectives prints
# 915000 x 1e-6 = 0.9149999999999999 us as 0.91, and so does ring_us (ring is the choice); the
# sweep's own conversion (915000 x 1e-12 x 1e6 = 0.915) printed pred_us 0.92.
sweep=$("$v" "$exp/wafer-32x32-qwen3-32b.textproto" --collectives --dry-run 2>&1) ||
  { echo "FAIL: tpsim-validate wafer-32x32-qwen3-32b.textproto --collectives --dry-run: $sweep"; exit 1; }
chip=wafer-32x32
for point in "all_reduce 8 32768" "all_gather 8 65536" "reduce_scatter 8 65536"; do
  set -- $point
  check "wafer-32x32 $point pred_us" "$(col "$1" "$2" "$3" 8)" "$(coll "$1" "$2" "$3")"
  check "wafer-32x32 $point ring_us" "$(col "$1" "$2" "$3" 11)" "$(col "$1" "$2" "$3" 8)"
done
chips=$(dirname "$0")/../../configs/chips
sed -e '/^gpu {/,/^}/d' -e 's/^name: .*/name: "h200-no-gpu"/' "$chips/h200-sxm-8.textproto" >"$tmp/h200-no-gpu.textproto"
cat >"$tmp/exp.textproto" <<EOF
name: "no-gpu"
chip_file: "$tmp/h200-no-gpu.textproto"
model_file: "$(cd "$(dirname "$0")/../../configs/models" && pwd)/qwen3-4b.json"
workload { batch: 1 seq_len: 512 decode_steps: 2 num_layers: 1 dtype: "bf16" }
mapping { tp: 8 pipeline_stages: 1 partition: "megatron" placement: "linear" collective: "auto" }
EOF
sweep=$("$v" "$tmp/exp.textproto" --collectives --dry-run 2>&1) ||
  { echo "FAIL: tpsim-validate (h200 without a gpu block) --collectives --dry-run: $sweep"; exit 1; }
grep -q '^# algo = .*nvls (in-switch reduction)' <<<"$sweep" || { echo "FAIL: no in-switch reduction: $sweep"; fail=1; }
chip=$tmp/h200-no-gpu.textproto
for point in "reduce_scatter 8 8192" "all_gather 4 1048576" "all_reduce 8 8192" "all_reduce 8 67108864" \
  "all_reduce 2 1073741824"; do
  set -- $point
  check "no-gpu $point pred_us" "$(col "$1" "$2" "$3" 8)" "$(coll "$1" "$2" "$3")"
  check "no-gpu $point pred_bus" "$(col "$1" "$2" "$3" 10)" "$(collc "$1" "$2" "$3" 4)"
  check "no-gpu $point algo" "$(col "$1" "$2" "$3" 7)" "$(collc "$1" "$2" "$3" 5)"
  check "no-gpu $point ring_us" "$(col "$1" "$2" "$3" 11)" "$(coll "$1" "$2" "$3" --algo ring)"
  check "no-gpu $point nvls_us" "$(col "$1" "$2" "$3" 12)" "$(coll "$1" "$2" "$3" --algo nvls)"
done
# A GPU node's collectives are not called non-GPU; a chip without a gpu block is, naming why.
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
[ $fail -eq 0 ] && echo "ok: tpsim-validate predicts every chip as tpsim collectives does"
exit $fail
