#include "validate/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tpsim::validate {

void RmsNormRef(const float* x, float* y, uint64_t rows, uint64_t cols, uint32_t group) {
  if (group == 0) return;
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t g0 = 0; g0 + group <= cols; g0 += group) {
      const float* xi = x + r * cols + g0;
      double ss = 0;
      for (uint32_t c = 0; c < group; ++c) ss += double{xi[c]} * xi[c];
      double inv = 1.0 / std::sqrt(ss / group + kRmsEps);
      for (uint32_t c = 0; c < group; ++c) y[r * cols + g0 + c] = static_cast<float>(xi[c] * inv);
    }
}

void RopeRef(const float* x, float* y, uint64_t rows, uint64_t cols, uint32_t head_dim, uint32_t pos0) {
  if (head_dim < 2) return;
  const uint32_t half = head_dim / 2;
  for (uint64_t r = 0; r < rows; ++r) {
    const double pos = static_cast<double>(pos0 + r);
    for (uint64_t g0 = 0; g0 + head_dim <= cols; g0 += head_dim)
      for (uint32_t c = 0; c < half; ++c) {
        double ang = pos * std::pow(kRopeTheta, -2.0 * c / head_dim);
        double x0 = x[r * cols + g0 + c], x1 = x[r * cols + g0 + c + half];
        y[r * cols + g0 + c] = static_cast<float>(x0 * std::cos(ang) - x1 * std::sin(ang));
        y[r * cols + g0 + c + half] = static_cast<float>(x0 * std::sin(ang) + x1 * std::cos(ang));
      }
  }
}

void SoftmaxRef(const float* x, float* y, uint64_t rows, uint64_t cols, float scale, uint32_t cached,
                uint32_t tokens) {
  for (uint64_t r = 0; r < rows; ++r) {
    uint64_t limit = tokens ? std::min<uint64_t>(cols, cached + r % tokens + 1) : cols;
    const float* xi = x + r * cols;
    double mx = -INFINITY, sum = 0;
    for (uint64_t j = 0; j < limit; ++j) mx = std::max(mx, double{xi[j]} * scale);
    for (uint64_t j = 0; j < limit; ++j) sum += std::exp(double{xi[j]} * scale - mx);
    for (uint64_t j = 0; j < cols; ++j)
      y[r * cols + j] = j < limit ? static_cast<float>(std::exp(double{xi[j]} * scale - mx) / sum) : 0.f;
  }
}

void SiluMulRef(const float* a, const float* b, float* y, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) y[i] = static_cast<float>(a[i] / (1.0 + std::exp(-double{a[i]})) * b[i]);
}

}  // namespace tpsim::validate
