#include "arch/gpu/gemm.h"

#include <algorithm>
#include <cmath>

namespace tpsim::arch::gpu {

namespace {

struct Tile {
  uint32_t m, n;
};
// Largest first: ties keep the bigger tile (fewer CTAs, less operand traffic).
constexpr Tile kTiles[] = {{256, 128}, {128, 256}, {256, 64}, {128, 128},
                           {64, 256},  {128, 64},  {64, 128}, {64, 64}};
constexpr uint32_t kSplits[] = {1, 2, 3, 4, 6, 8, 12, 16};
constexpr uint64_t kMinSplitK = 512;  // a split keeps at least eight 64-deep k blocks

long double CeilDiv(long double a, long double b) { return std::ceil(a / b); }

}  // namespace

double PeakTflops(const config::Gpu& gpu, Dtype d) {
  switch (d) {
    case Dtype::kBf16:
      return gpu.bf16_tflops();
    case Dtype::kFp16:
      return gpu.fp16_tflops();
    case Dtype::kFp8:
      return gpu.fp8_tflops();
  }
  return 0;
}

GemmEstimate EstimateGemm(const config::Gpu& gpu, const GemmShape& s) {
  const long double m = s.m, n = s.n, k = s.k, batch = s.batch;
  const long double e = DtypeBytes(s.dtype);
  const long double sms = gpu.sms();
  const long double f = PeakTflops(gpu, s.dtype) * 1e12L / sms * gpu.tensor_efficiency();  // FLOP/s per SM
  const long double hbm = gpu.hbm_bandwidth_gbps() * 1e9L * gpu.hbm_efficiency();          // bytes/s
  const long double a_bytes = m * k * e, b_bytes = k * n * e, c_bytes = 2 * m * n;
  const bool fits_l2 = a_bytes + b_bytes <= 0.5L * gpu.l2_bytes();
  const long double overhead = gpu.kernel_overhead_us() * 1e-6L;

  GemmEstimate best;
  long double best_s = -1;
  for (const Tile& t : kTiles) {
    const long double mt = CeilDiv(m, t.m), nt = CeilDiv(n, t.n);
    const long double tiles = mt * nt * batch;
    const long double per_k =
        std::max(2.0L * t.m * t.n / f, (t.m + t.n) * e * gpu.operand_flops_per_byte() / f);
    // Operand re-reads when A and B do not stay in L2 (see gemm.h).
    long double operand_bytes = a_bytes + b_bytes;
    if (!fits_l2) {
      const long double w = std::min(mt * nt, sms);
      long double r = std::clamp(std::round(std::sqrt(w * t.n / t.m)), 1.0L, mt);
      const long double c = std::clamp(CeilDiv(w, r), 1.0L, nt);
      // A grid narrower than the block (c clamped to nt) spreads the wave over more rows:
      // the block still holds w tiles (before, r x c < w counted B re-read within one wave).
      r = std::clamp(CeilDiv(w, c), r, mt);
      operand_bytes = std::max(a_bytes * CeilDiv(nt, c) + b_bytes * CeilDiv(mt, r), operand_bytes);
    }
    for (uint32_t split : kSplits) {
      const long double k_slice = CeilDiv(k, split);
      if (split > 1 && k_slice < kMinSplitK) break;
      const long double ctas = tiles * split;
      const long double compute = std::ceil(ctas / sms) * k_slice * per_k;
      long double bytes = (operand_bytes + c_bytes) * batch;
      if (split > 1) bytes += 2.0L * 4 * m * n * split * batch;
      const long double memory = bytes / hbm;
      const long double fixed = overhead;
      const long double time = std::max(compute, memory) + fixed;
      if (best_s >= 0 && time >= best_s) continue;
      best_s = time;
      best.time_us = static_cast<double>(time * 1e6L);
      best.tiles = static_cast<uint64_t>(tiles);
      best.waves = static_cast<double>(ctas / sms);
      best.tile_m = t.m;
      best.tile_n = t.n;
      best.split_k = split;
      best.compute_us = static_cast<double>(compute * 1e6L);
      best.memory_us = static_cast<double>(memory * 1e6L);
      best.overhead_us = static_cast<double>(fixed * 1e6L);
      best.bound = fixed > std::max(compute, memory) ? Bound::kLatency
                   : compute >= memory               ? Bound::kCompute
                                                     : Bound::kMemory;
    }
  }
  best.tflops = static_cast<double>(2.0L * m * n * k * batch / best_s / 1e12L);
  return best;
}

}  // namespace tpsim::arch::gpu
