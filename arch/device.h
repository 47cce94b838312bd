#pragma once
// What one core of a chip answers for a GEMM, whatever the core is: the GPU GEMM
// model (arch/gpu/gemm.h) on GPU-node chips (chip.gpu present), the systolic core's
// Chip::GemmTime otherwise. `tpsim gemm` and the lowering's cost model ask this one
// question, so a wafer core and a GPU answer the same shapes in the same units.

#include <cstdint>
#include <string>
#include <string_view>

namespace tpsim::arch {

class Chip;

enum class Dtype { kBf16, kFp16, kFp8 };
// "bf16", "fp16", "fp8"; false (and *d untouched) for anything else.
bool ParseDtype(std::string_view s, Dtype* d);
const char* ToString(Dtype d);
// Bytes per operand element: 2 for bf16 / fp16, 1 for fp8 (outputs are 2-byte bf16 for all).
uint32_t DtypeBytes(Dtype d);

// What limits a GEMM: the math units, memory traffic, or the fixed cost of a kernel
// (latency: the kernel's fixed overhead exceeds both its compute and memory time).
enum class Bound { kCompute, kMemory, kLatency };
const char* ToString(Bound b);

// C[m, n] = A[m, k] x B[k, n], `batch` independent times.
struct GemmShape {
  uint64_t m = 0, n = 0, k = 0;
  uint64_t batch = 1;
  Dtype dtype = Dtype::kBf16;
};

struct GemmEstimate {
  double time_us = 0;  // one kernel (GPU) or one core's matrix unit (systolic), start to end
  double tflops = 0;   // 2 m n k batch / time, 1e12 FLOP/s
  Bound bound = Bound::kCompute;
  uint64_t tiles = 0;               // output tiles: CTA tiles (GPU) or systolic tiles (R x C), over the batch
  double waves = 0;                 // CTAs (tiles x split_k) / SMs (GPU); tiles / arrays (systolic)
  uint32_t tile_m = 0, tile_n = 0;  // the tile shape used
  uint32_t split_k = 1;             // K split into this many CTAs per tile (GPU only)
  double compute_us = 0;            // time of the math alone (wave-quantised)
  double memory_us = 0;             // time of the memory traffic alone (HBM on GPUs, SRAM on systolic cores)
  double overhead_us = 0;           // fixed kernel cost (GPU), 0 on systolic cores
};

// One core of `chip` computing `s`. Throws std::invalid_argument for a dtype the core
// does not have (systolic cores model bf16 only; fp8 on a GPU without fp8_tflops) and
// for an empty shape (any of m, n, k, batch zero).
GemmEstimate CoreGemm(const Chip& chip, const GemmShape& s);

}  // namespace tpsim::arch
