#!/bin/bash
# GPU-node fidelity: tpsim's GPU models (arch/gpu/) against the public H100 measurements in
# validate/results/public/ (each file's '#' header names its source), MAPE per table, and the
# targets of issue 14: MAPE <= 8 % for all_reduce, all_gather and reduce_scatter (nccl-tests,
# 8 KiB .. 1 GiB, 2 / 4 / 8 GPUs where measured; 8-GPU all_gather / reduce_scatter with NCCL's choice only from
# 32 MiB, ring-forced from 8 KiB) and <= 10 % for the GEMM file (cuBLAS kernel
# times, m = 1 .. 4096 on LLM projection shapes, fp16). The issue's GEMM target is for bf16
# (M = 1 .. 8192, N, K 1024 .. 28672); XLA's bf16 table (xla-h100-bf16-matmul.csv, m, n, k 256 ..
# 4096) gets its own line against the same 10 %, as a partial stand-in only: it covers neither
# m < 256 nor m = 8192 nor N, K above 4096, and most of its shapes (N or K of 256 or 512) are no
# LLM projections. A benchmark, not a test: it prints, it does not fail. Usage: gpu_fidelity.sh [TPSIM] [PLOT_DIR]   (TPSIM default build/bin/tpsim;
# PLOT_DIR: also draw one PNG per file there).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tpsim=${1:-$here/build/bin/tpsim}
plots=()
[ $# -ge 2 ] && plots=(--plot-dir "$2")
cd "$here"
out=$("$tpsim" compare --chip h100-sxm-8 validate/results/public/*.csv --summary "${plots[@]}")
echo "$out"
echo
echo "targets (issue 14):"
echo "$out" | awk '
  # One target line: a table (or a set of rows) of `file`, its MAPE against the limit.
  function target(name, mape, limit) {
    printf "  %-58s %-40s MAPE %5.1f %%  target <= %d %%: %s\n", file, name, mape, limit,
      (mape <= limit ? "met" : sprintf("missed by %.1f points", mape - limit))
  }
  /^== / { file = $2; next }
  /: [0-9]+ (sizes|rows), MAPE / {
    mape = $0; sub(/.*MAPE /, "", mape); sub(/ %.*/, "", mape); mape += 0  # a number: "13.0" <= 8 is true as strings
    name = $0; sub(/: [0-9]+ (sizes|rows), MAPE.*/, "", name)
    # NCCL choosing (algorithm auto) where measured; at 8 GPUs all_gather / reduce_scatter with NCCL choosing
    # only from 32 MiB (nccl-tests-h100-8gpu-auto-32m.csv), so the NCCL_ALGO=RING tables
    # (nccl-tests-h100-8gpu-ring.csv, 8 KiB .. 1 GiB) stand in below that. The -4gpu-auto-32m.csv
    # tables are a second 4-GPU host (compared, not fitted); nccl-tests-h100-8gpu-auto.csv (compared, not
    # fitted) is NCCL'"'"'s choice at 8 GPUs over 8 KiB .. 1 GiB on the ring-forced file'"'"'s host.
    auto = (file ~ /nccl-tests-h100-4gpu.csv|nccl-tests-h100-allreduce-2-6gpu.csv|nccl-tests-h100-8gpu-allreduce-auto.csv|nccl-tests-h100-8gpu-auto-32m.csv|nccl-tests-h100-4gpu-auto-32m.csv|nccl-tests-h100-8gpu-auto.csv/ && name ~ /algorithm auto, protocol auto/)
    ring8 = (file ~ /nccl-tests-h100-8gpu-ring.csv|nccl-tests-h100-8gpu-rs-ring-nccl1047.csv/)
    if ((auto || ring8) && name ~ /^(all_reduce|all_gather|reduce_scatter),/) target(name, mape, 8)
  }
  # bf16 GEMM tables (n=N k=K): subsets of two files. XLA'"'"'s table (a partial stand-in for the issue
  # target: m, n, k 256 .. 4096 only) within the issue'"'"'s N, K >= 1024; aiconfigurator'"'"'s sweep
  # (m 1..8192, n, k 1024..16384, CUDA-graph device times; fitted on these rows) where the weight
  # (n x k x 2 bytes) is 10 MB or more: below that the harness may keep it in L2 across calls.
  /^n=[0-9]+ k=[0-9]+ bf16: [0-9]+ rows, MAPE / {
    n = $1; sub(/n=/, "", n); k = $2; sub(/k=/, "", k); rows = $4; m = $0; sub(/.*MAPE /, "", m); sub(/ %.*/, "", m)
    if (file ~ /xla-h100-bf16-matmul.csv/ && n + 0 >= 1024 && k + 0 >= 1024) { sub_rows[file] += rows; sub_sum[file] += rows * m }
    if (file ~ /aiconfigurator-h100-bf16-gemm.csv/ && 2 * n * k >= 10000000) { sub_rows[file] += rows; sub_sum[file] += rows * m }
  }
  /^file MAPE: / && file ~ /vidur-h100-gemm.csv|xla-h100-bf16-matmul.csv|aiconfigurator-h100-bf16-gemm.csv/ {
    whole = file ~ /vidur/ ? "all GEMM rows" : file ~ /xla/ ? "bf16 (XLA table, m,n,k 256..4096)" : "bf16 (m 1..8192, n,k 1024..16384)"
    target(whole, $3 + 0, 10)
    if (sub_rows[file] > 0)
      target(sprintf(file ~ /xla/ ? "bf16, n,k >= 1024 (%d rows)" : "bf16, weights >= 10 MB (%d rows)", sub_rows[file]),
             sub_sum[file] / sub_rows[file], 10)
  }'
echo "  (vidur-h100-dgx-allreduce.csv and nccl-tests-h100-4gpu-graph.csv hold device times (kernel durations, a"
echo "   CUDA graph's time per call), held against the model's gpu_us: shown above, no target)"
# Generality checks, not fitted (the calibration rule keeps H200 data out of the fit): GPU runs
# under validate/results/h200-*/ against h200-sxm-8's spec-sheet numbers, each against the same
# 10 % GEMM bound (the queued, weight-from-HBM sweep is what the model means; README "Measured on
# one H200").
for f in validate/results/h200-*/gemms.csv; do
  [ -f "$f" ] || continue
  m=$("$tpsim" compare --chip h200-sxm-8 "$f" --summary | awk '/^file MAPE: /{print $3; exit}')
  awk -v f="$f" -v m="$m" 'BEGIN { printf "  %-58s %-40s MAPE %5.1f %%  bound <= 10 %%: %s (check, not fitted)\n", f, "bf16 on H200, queued, weights from HBM", m, (m + 0 <= 10 ? "within" : "outside") }'
done
