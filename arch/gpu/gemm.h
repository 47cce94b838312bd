#pragma once
// GPU GEMM model: how long one cuBLAS-like kernel takes for C[m,n] = A[m,k] B[k,n].
//
// The kernel tiles C into CTA tiles of tm x tn outputs; each CTA runs a main loop over
// its K range (all of K, or K / s with split-K). Tiles are scheduled in waves of one
// CTA per SM:
//
//      n ->  +------+------+------+-- ...      ctas  = ceil(m/tm) ceil(n/tn) batch s
//   m   tile | CTA0 | CTA1 | CTA2 |            waves = ctas / sms (reported as is)
//   |        +------+------+------+-- ...      the last, partial wave costs a full one
//   v        | ...  |      |      |
//
// Per CTA, per k step (f = dtype peak / sms x tensor_efficiency, FLOP/s per SM):
//   math     = 2 tm tn / f
//   operands = (tm + tn) x bytes(dtype) x operand_flops_per_byte / f
//   t_cta    = ceil(k / s) x max(math, operands)
// compute = ceil(waves) x t_cta.
//
// HBM traffic streams under the math (the two overlap; the kernel takes the longer):
//   A = m k e, B = k n e, C = 2 m n (bf16 out), per batch (e = bytes(dtype)).
//   If A + B fit in half of l2_bytes (Hopper's L2 is two partitions, data shared by all
//   SMs can sit in both), every operand is read from HBM once. Otherwise a wave covers a
//   near-square block of r x c tiles (r = round(sqrt(w tn / tm)), c = ceil(w / r),
//   w = min(tiles, sms), clamped to the grid; where c is clamped to nt, r grows to
//   ceil(w / c) within mt, so the block holds the wave) and operands are re-read per block:
//   A x ceil(nt / c) + B x ceil(mt / r) + C. Split-K adds its fp32 partial sums, written
//   and read back: 2 x 4 m n s.
//   memory = bytes / (hbm_bandwidth_gbps x hbm_efficiency)
//
// time = max(compute, memory) + kernel_overhead_us. Split-K reduces its partial sums inside
// the kernel (stream-K style, as Hopper's cuBLAS kernels do): no second launch, only the
// partial-sum traffic above. The model tries tiles {256x128, 128x256, 256x64, 128x128,
// 64x256, 128x64, 64x128, 64x64} and splits s in {1, 2, 3, 4, 6, 8, 12, 16} (K slices of
// at least 512) and keeps the fastest (the first on ties, in that order), as cuBLAS's
// heuristics pick a kernel. Bound: latency when the fixed overhead exceeds both compute
// and memory, else the larger of the two.

#include "arch/device.h"
#include "chip.pb.h"

namespace tpsim::arch::gpu {

// `gpu` must have passed ValidateChip; `s` must be non-empty (CoreGemm checks both).
GemmEstimate EstimateGemm(const config::Gpu& gpu, const GemmShape& s);

// Dense tensor peak of `gpu` for `d` in TFLOP/s (0 when the GPU has none).
double PeakTflops(const config::Gpu& gpu, Dtype d);

}  // namespace tpsim::arch::gpu
