#include "validate/func_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tpsim::validate {

BlasCall ColumnMajorCall(const FuncStep& s, uint32_t b) {
  if (s.kind != FuncStepKind::kMatmul || s.a.cs != 1 || s.b.cs != 1 || s.out.cs != 1 || b >= s.batch)
    throw std::invalid_argument("func plan: not a row-contiguous matmul batch entry");
  BlasCall c;
  c.trans_a = s.transpose_b;
  c.trans_b = false;
  c.m = static_cast<int>(s.out.cols);
  c.n = static_cast<int>(s.out.rows);
  c.k = static_cast<int>(s.a.cols);
  c.arena_a = s.b.arena, c.off_a = s.b.offset + uint64_t{b} * s.stride_b;
  c.arena_b = s.a.arena, c.off_b = s.a.offset + uint64_t{b} * s.stride_a;
  c.arena_c = s.out.arena, c.off_c = s.out.offset + uint64_t{b} * s.stride_out;
  c.lda = static_cast<int>(std::max<uint64_t>(s.b.ld, 1));
  c.ldb = static_cast<int>(std::max<uint64_t>(s.a.ld, 1));
  c.ldc = static_cast<int>(std::max<uint64_t>(s.out.ld, 1));
  c.beta = s.accumulate ? 1.f : 0.f;
  return c;
}

Copy2D CopyCall(const FuncStep& s) {
  if (s.kind != FuncStepKind::kCopy || s.a.cs != 1 || s.out.cs != 1)
    throw std::invalid_argument("func plan: not a row-contiguous copy");
  return {s.a.arena,    s.out.arena,
          s.a.offset,   std::max<uint64_t>(s.a.ld, s.a.cols),
          s.out.offset, std::max<uint64_t>(s.out.ld, s.out.cols),
          s.out.cols,   s.out.rows};
}

StepDiff FirstDivergentStep(const StepTrace& got, const StepTrace& want, double tolerance) {
  for (size_t s = 0; s < std::min(got.size(), want.size()); ++s) {
    StepDiff d;
    d.step = static_cast<int64_t>(s);
    if (got[s].size() != want[s].size()) {
      d.rel = d.max_abs = std::numeric_limits<double>::infinity();
      return d;
    }
    double mx = 0;
    for (size_t i = 0; i < want[s].size(); ++i) {
      mx = std::max(mx, std::fabs(double{want[s][i]}));
      const double e = std::fabs(double{got[s][i]} - want[s][i]);
      d.max_abs = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(d.max_abs, e);
    }
    d.rel = d.max_abs / std::max(mx, 1e-30);
    if (d.rel > tolerance) return d;
  }
  return {};
}

OutputDiff CompareOutputs(const std::vector<mapping::Matrix>& a, const std::vector<mapping::Matrix>& b) {
  OutputDiff worst;
  if (a.size() != b.size()) {
    worst.shape_mismatch = true;
    worst.rel = std::numeric_limits<double>::infinity();
    return worst;
  }
  for (size_t o = 0; o < a.size(); ++o) {
    if (a[o].rows != b[o].rows || a[o].cols != b[o].cols || a[o].v.size() != b[o].v.size()) {
      worst.shape_mismatch = true;
      worst.output = o;
      worst.rel = std::numeric_limits<double>::infinity();
      return worst;
    }
    OutputDiff d;
    d.output = o;
    size_t at = 0;
    for (size_t i = 0; i < b[o].v.size(); ++i) {
      d.max_ref = std::max(d.max_ref, std::fabs(double{b[o].v[i]}));
      const double e = std::fabs(double{a[o].v[i]} - b[o].v[i]);
      if (e > d.max_abs || std::isnan(e)) {
        d.max_abs = std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
        at = i;
      }
    }
    d.rel = d.max_abs / std::max(d.max_ref, 1e-30);
    if (!b[o].v.empty()) {
      d.row = static_cast<uint32_t>(at / b[o].cols);
      d.col = static_cast<uint32_t>(at % b[o].cols);
      d.got = a[o].v[at];
      d.want = b[o].v[at];
    }
    if (o == 0 || d.rel > worst.rel) worst = d;
  }
  return worst;
}

}  // namespace tpsim::validate
