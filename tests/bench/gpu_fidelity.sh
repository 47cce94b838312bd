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
  /^== / { file = $2; next }
  /: [0-9]+ (sizes|rows), MAPE / {
    mape = $0; sub(/.*MAPE /, "", mape); sub(/ %.*/, "", mape); mape += 0  # a number: "13.0" <= 8 is true as strings
    name = $0; sub(/: [0-9]+ (sizes|rows), MAPE.*/, "", name)
    # NCCL choosing (algorithm auto) where measured; at 8 GPUs all_gather / reduce_scatter with NCCL choosing
    # only from 32 MiB (nccl-tests-h100-8gpu-auto-32m.csv), so the NCCL_ALGO=RING tables
    # (nccl-tests-h100-8gpu-ring.csv, 8 KiB .. 1 GiB) stand in below that. The -4gpu-auto-32m.csv
    # tables are a second 4-GPU host (compared, not fitted).
    auto = (file ~ /nccl-tests-h100-4gpu.csv|nccl-tests-h100-allreduce-2-6gpu.csv|nccl-tests-h100-8gpu-allreduce-auto.csv|nccl-tests-h100-8gpu-auto-32m.csv|nccl-tests-h100-4gpu-auto-32m.csv/ && name ~ /algorithm auto, protocol auto/)
    ring8 = (file ~ /nccl-tests-h100-8gpu-ring.csv|nccl-tests-h100-8gpu-rs-ring-nccl1047.csv/)
    if ((auto || ring8) && name ~ /^(all_reduce|all_gather|reduce_scatter),/) {
      printf "  %-58s %-40s MAPE %5.1f %%  target <= 8 %%: %s\n", file, name, mape, (mape <= 8 ? "met" : sprintf("missed by %.1f points", mape - 8))
    }
  }
  /^file MAPE: / && file ~ /vidur-h100-gemm.csv/ {
    mape = $3
    printf "  %-58s %-40s MAPE %5.1f %%  target <= 10 %%: %s\n", file, "all GEMM rows", mape, (mape <= 10 ? "met" : sprintf("missed by %.1f points", mape - 10))
  }
  # bf16: a partial stand-in for the issue target (m, n, k 256 .. 4096 only; see the header), the
  # whole table and its shapes within the issue'"'"'s N, K >= 1024 (the rows of its n=N k=K tables).
  file ~ /xla-h100-bf16-matmul.csv/ && /^n=[0-9]+ k=[0-9]+ bf16: [0-9]+ rows, MAPE / {
    n = $1; sub(/n=/, "", n); k = $2; sub(/k=/, "", k); rows = $4; m = $0; sub(/.*MAPE /, "", m); sub(/ %.*/, "", m)
    if (n + 0 >= 1024 && k + 0 >= 1024) { big_rows += rows; big_sum += rows * m }
  }
  /^file MAPE: / && file ~ /xla-h100-bf16-matmul.csv/ {
    mape = $3
    printf "  %-58s %-40s MAPE %5.1f %%  target <= 10 %%: %s\n", file, "bf16 (XLA table, m,n,k 256..4096)", mape, (mape <= 10 ? "met" : sprintf("missed by %.1f points", mape - 10))
    if (big_rows > 0) {
      mape = big_sum / big_rows
      printf "  %-58s %-40s MAPE %5.1f %%  target <= 10 %%: %s\n", file, sprintf("bf16, n,k >= 1024 (%d rows)", big_rows), mape, (mape <= 10 ? "met" : sprintf("missed by %.1f points", mape - 10))
    }
  }
  # aiconfigurator'"'"'s bf16 sweep (compared, not fitted): m 1..8192, n, k 1024..16384, CUDA-graph device times; its
  # weights below 10 MB may stay in L2 across the harness'"'"'s calls (see the header), so the tables whose weight
  # (n x k x 2 bytes) is 10 MB or more are shown apart.
  file ~ /aiconfigurator-h100-bf16-gemm.csv/ && /^n=[0-9]+ k=[0-9]+ bf16: [0-9]+ rows, MAPE / {
    n = $1; sub(/n=/, "", n); k = $2; sub(/k=/, "", k); rows = $4; m = $0; sub(/.*MAPE /, "", m); sub(/ %.*/, "", m)
    if (2 * n * k >= 10000000) { hbm_rows += rows; hbm_sum += rows * m }
  }
  /^file MAPE: / && file ~ /aiconfigurator-h100-bf16-gemm.csv/ {
    mape = $3
    printf "  %-58s %-40s MAPE %5.1f %%  target <= 10 %%: %s\n", file, "bf16 (m 1..8192, n,k 1024..16384)", mape, (mape <= 10 ? "met" : sprintf("missed by %.1f points", mape - 10))
    if (hbm_rows > 0) {
      mape = hbm_sum / hbm_rows
      printf "  %-58s %-40s MAPE %5.1f %%  target <= 10 %%: %s\n", file, sprintf("bf16, weights >= 10 MB (%d rows)", hbm_rows), mape, (mape <= 10 ? "met" : sprintf("missed by %.1f points", mape - 10))
    }
  }'
echo "  (vidur-h100-dgx-allreduce.csv and nccl-tests-h100-4gpu-graph.csv hold device times (kernel durations, a"
echo "   CUDA graph's time per call), held against the model's gpu_us: shown above, no target)"
