#pragma once
// Host references of the harness's own kernels (validate/kernels.h), on row-major float
// matrices, with the conventions of mapping/functional.cc (the CPU functional executor):
//   rmsnorm   y = x / sqrt(mean(x^2 over each group of `group` columns) + 1e-6)  (no gain)
//   rope      per group of head_dim columns, pairs (c, c + head_dim/2) rotated by
//             (pos0 + row) * 10000^(-2c/head_dim)
//   softmax   row-wise, scaled by `scale`, numerically stable (max subtracted); causal:
//             row r sees columns j < min(cols, cached + r % tokens + 1), the rest are 0
//   silu_mul  silu(a) * b = a / (1 + exp(-a)) * b
// The GPU kernels compute in fp32 on bf16 data; tests compare them within bf16 tolerance.

#include <cstdint>
#include <vector>

#include "mapping/func_plan.h"

namespace tpsim::validate {

constexpr float kRmsEps = mapping::kFuncNormEps;
constexpr double kRopeTheta = mapping::kFuncRopeTheta;

void RmsNormRef(const float* x, float* y, uint64_t rows, uint64_t cols, uint32_t group);
void RopeRef(const float* x, float* y, uint64_t rows, uint64_t cols, uint32_t head_dim, uint32_t pos0);
void SoftmaxRef(const float* x, float* y, uint64_t rows, uint64_t cols, float scale, uint32_t cached,
                uint32_t tokens);
void SiluMulRef(const float* a, const float* b, float* y, uint64_t n);

using mapping::RoundBf16;  // mapping/func_plan.h: the CPU backend rounds with it too

}  // namespace tpsim::validate
