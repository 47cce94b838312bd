#include "arch/device.h"

#include <cmath>
#include <stdexcept>

#include "arch/chip.h"
#include "arch/gpu/gemm.h"

namespace tpsim::arch {

bool ParseDtype(std::string_view s, Dtype* d) {
  if (s == "bf16")
    *d = Dtype::kBf16;
  else if (s == "fp16")
    *d = Dtype::kFp16;
  else if (s == "fp8")
    *d = Dtype::kFp8;
  else
    return false;
  return true;
}

const char* ToString(Dtype d) {
  switch (d) {
    case Dtype::kBf16:
      return "bf16";
    case Dtype::kFp16:
      return "fp16";
    case Dtype::kFp8:
      return "fp8";
  }
  return "?";
}

uint32_t DtypeBytes(Dtype d) { return d == Dtype::kFp8 ? 1 : 2; }

const char* ToString(Bound b) {
  switch (b) {
    case Bound::kCompute:
      return "compute";
    case Bound::kMemory:
      return "memory";
    case Bound::kLatency:
      return "latency";
  }
  return "?";
}

GemmEstimate CoreGemm(const Chip& chip, const GemmShape& s) {
  if (s.m == 0 || s.n == 0 || s.k == 0 || s.batch == 0) {
    throw std::invalid_argument("empty GEMM: m, n, k and batch must be positive");
  }
  const config::Chip& cfg = chip.config();
  if (cfg.has_gpu()) {
    if (gpu::PeakTflops(cfg.gpu(), s.dtype) <= 0) {
      throw std::invalid_argument(std::string("chip ") + cfg.name() + " has no " + ToString(s.dtype) +
                                  " tensor cores (gpu." + ToString(s.dtype) + "_tflops is 0)");
    }
    return gpu::EstimateGemm(cfg.gpu(), s);
  }
  if (s.dtype != Dtype::kBf16) {
    throw std::invalid_argument(std::string("chip ") + cfg.name() +
                                ": its systolic core models bf16 only, not " + ToString(s.dtype));
  }
  // The systolic core: Chip::GemmTime with all three operands through SRAM once.
  const auto& core = cfg.core();
  const long double bytes = (static_cast<long double>(s.m) * s.k + static_cast<long double>(s.k) * s.n +
                             static_cast<long double>(s.m) * s.n) *
                            2 * s.batch;
  const uint64_t sram_bytes = bytes >= 1.8e19L ? UINT64_MAX : static_cast<uint64_t>(bytes);
  const Ps compute = chip.GemmTime(s.batch, s.m, s.n, s.k, 0);
  const Ps sram = chip.GemmTime(0, s.m, s.n, s.k, sram_bytes);
  const Ps total = chip.GemmTime(s.batch, s.m, s.n, s.k, sram_bytes);
  GemmEstimate g;
  g.time_us = static_cast<double>(total) * 1e-6;
  g.tflops = 2.0 * s.m * s.n * s.k * s.batch / (static_cast<double>(total) * 1e-12) / 1e12;
  g.tile_m = core.systolic_rows();
  g.tile_n = core.systolic_cols();
  const long double tiles = std::ceil(static_cast<long double>(s.m) / g.tile_m) *
                            std::ceil(static_cast<long double>(s.n) / g.tile_n) * s.batch;
  g.tiles = static_cast<uint64_t>(tiles);
  g.waves = static_cast<double>(tiles / std::max<uint32_t>(1, core.systolic_arrays()));
  g.compute_us = static_cast<double>(compute) * 1e-6;
  g.memory_us = static_cast<double>(sram) * 1e-6;
  g.bound = compute >= sram ? Bound::kCompute : Bound::kMemory;
  return g;
}

}  // namespace tpsim::arch
