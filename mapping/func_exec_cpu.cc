// The CPU backend of a FuncPlan (mapping/func_plan.h): double accumulation, on the plan's strided
// views. mapping::RunFunctional runs it unrounded; tpsim-validate runs it with bf16 rounding too.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "mapping/func_plan.h"

namespace tpsim::mapping {
namespace {

struct Ref {
  float* base;
  FuncView v;
  float& operator()(uint64_t i, uint64_t j) const { return base[v.offset + i * v.ld + j * v.cs]; }
};

class Cpu {
 public:
  Cpu(const FuncPlan& plan, const FuncExecOptions& o) : plan_(plan), round_(o.round_bf16) {
    mem_ = InitialArenas(plan, round_);
  }
  Cpu(const FuncPlan& plan, const FuncExecOptions& o, std::vector<std::vector<float>> arenas)
      : plan_(plan), round_(o.round_bf16), mem_(std::move(arenas)) {
    bool fits = mem_.size() == plan.arenas.size();
    for (size_t a = 0; fits && a < mem_.size(); ++a) fits = mem_[a].size() == plan.arenas[a].elems;
    if (!fits) throw std::invalid_argument("func plan: initial arenas do not match the plan's");
  }
  float Store(double x) const { return round_ ? RoundBf16(static_cast<float>(x)) : static_cast<float>(x); }
  Ref R(FuncView v, uint64_t shift = 0) {
    v.offset += shift;
    return {mem_[v.arena].data(), v};
  }

  // Each element sums k in ascending order in double, as the reference does;
  // W not transposed goes row by row for locality.
  void Matmul(const FuncStep& s) {
    const uint32_t m = s.out.rows, n = s.out.cols, inner = s.a.cols;
    std::vector<double> acc(n);
    for (uint32_t b = 0; b < s.batch; ++b) {
      Ref a = R(s.a, b * s.stride_a), w = R(s.b, b * s.stride_b), y = R(s.out, b * s.stride_out);
      for (uint32_t i = 0; i < m; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0);
        if (s.transpose_b) {
          for (uint32_t j = 0; j < n; ++j)
            for (uint32_t k = 0; k < inner; ++k) acc[j] += double{a(i, k)} * w(j, k);
        } else {
          for (uint32_t k = 0; k < inner; ++k) {
            const double x = a(i, k);
            for (uint32_t j = 0; j < n; ++j) acc[j] += x * w(k, j);
          }
        }
        for (uint32_t j = 0; j < n; ++j) y(i, j) = Store(s.accumulate ? y(i, j) + acc[j] : acc[j]);
      }
    }
  }

  void Run(const FuncStep& s) {
    if (s.kind == FuncStepKind::kMatmul) return Matmul(s);
    Ref a = R(s.a), y = R(s.out);
    const uint32_t rows = s.out.rows, cols = s.out.cols;
    switch (s.kind) {
      case FuncStepKind::kRmsNorm:
        for (uint32_t i = 0; i < rows; ++i)
          for (uint32_t g0 = 0; g0 < cols; g0 += s.group) {
            double ss = 0;
            for (uint32_t c = 0; c < s.group; ++c) ss += double{a(i, g0 + c)} * a(i, g0 + c);
            const double inv = 1.0 / std::sqrt(ss / s.group + kFuncNormEps);
            for (uint32_t c = 0; c < s.group; ++c) y(i, g0 + c) = Store(a(i, g0 + c) * inv);
          }
        break;
      case FuncStepKind::kRope: {
        const uint32_t hd = s.group, half = hd / 2;
        for (uint32_t i = 0; i < rows; ++i) {
          const double pos = s.pos0 + i;
          for (uint32_t g0 = 0; g0 < cols; g0 += hd)
            for (uint32_t c = 0; c < half; ++c) {
              const double ang = pos * std::pow(kFuncRopeTheta, -2.0 * c / hd);
              const double x0 = a(i, g0 + c), x1 = a(i, g0 + c + half);
              y(i, g0 + c) = Store(static_cast<float>(x0 * std::cos(ang) - x1 * std::sin(ang)));
              y(i, g0 + c + half) = Store(static_cast<float>(x0 * std::sin(ang) + x1 * std::cos(ang)));
            }
        }
        break;
      }
      case FuncStepKind::kSoftmax:
        for (uint32_t i = 0; i < rows; ++i) {
          const uint32_t limit = std::min(cols, s.pos0 + (s.row0 + i) % s.tokens + 1);
          double mx = -1e300, sum = 0;
          for (uint32_t j = 0; j < limit; ++j) mx = std::max(mx, a(i, j) * s.scale);
          for (uint32_t j = 0; j < limit; ++j) sum += std::exp(a(i, j) * s.scale - mx);
          for (uint32_t j = 0; j < cols; ++j)
            y(i, j) = j < limit ? Store(static_cast<float>(std::exp(a(i, j) * s.scale - mx) / sum)) : 0.f;
        }
        break;
      case FuncStepKind::kAdd:
      case FuncStepKind::kSiluMul: {
        Ref b = R(s.b);
        for (uint32_t i = 0; i < rows; ++i)
          for (uint32_t j = 0; j < cols; ++j) {
            const float x = a(i, j), z = b(i, j);
            y(i, j) = Store(s.kind == FuncStepKind::kAdd ? x + z : x / (1.f + std::exp(-x)) * z);
          }
        break;
      }
      case FuncStepKind::kCopy:
        for (uint32_t i = 0; i < rows; ++i)
          for (uint32_t j = 0; j < cols; ++j) y(i, j) = a(i, j);
        break;
      case FuncStepKind::kMatmul:
        break;
    }
  }

  std::vector<Matrix> Run(StepTrace* trace) {
    for (const FuncStep& s : plan_.steps) {
      Run(s);
      if (trace) trace->push_back(ReadView(mem_[s.out.arena], s.out, s.batch, s.stride_out));
    }
    return GatherOutputs(plan_, mem_);
  }
  std::vector<std::vector<float>> Arenas() {
    for (const FuncStep& s : plan_.steps) Run(s);
    return std::move(mem_);
  }

 private:
  const FuncPlan& plan_;
  bool round_;
  std::vector<std::vector<float>> mem_;
};

}  // namespace

std::vector<std::vector<float>> RunFuncPlanCpuArenas(const FuncPlan& plan, const FuncExecOptions& opts) {
  return Cpu(plan, opts).Arenas();
}

std::vector<std::vector<float>> RunFuncPlanCpuArenas(const FuncPlan& plan, const FuncExecOptions& opts,
                                                     std::vector<std::vector<float>> arenas) {
  return Cpu(plan, opts, std::move(arenas)).Arenas();
}

std::vector<Matrix> RunFuncPlanCpu(const FuncPlan& plan, const FuncExecOptions& opts, StepTrace* trace) {
  return Cpu(plan, opts).Run(trace);
}

}  // namespace tpsim::mapping
