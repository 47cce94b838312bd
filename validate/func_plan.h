#pragma once
// The GPU harness's side of a FuncPlan (mapping/func_plan.h: the data semantics as flat
// buffers and steps, with the CPU backend): the CUDA backend's library calls computed on the
// host so tests can hold them against the CPU backend, and the comparisons of traces and
// outputs that the numerics check reports.

#include <cstdint>
#include <vector>

#include "mapping/func_plan.h"

namespace tpsim::validate {

using mapping::BuildFuncPlan;
using mapping::FuncArena;
using mapping::FuncExecOptions;
using mapping::FuncInit;
using mapping::FuncPlan;
using mapping::FuncPlanOutput;
using mapping::FuncStep;
using mapping::FuncStepKind;
using mapping::FuncStepOrigin;
using mapping::FuncView;
using mapping::GatherOutputs;
using mapping::InitialArenas;
using mapping::InitValues;
using mapping::kStagingCore;
using mapping::kWeightsCore;
using mapping::ReadView;
using mapping::RunFuncPlanCpu;
using mapping::RunFuncPlanCpuArenas;
using mapping::StepTrace;

// The first step whose written values differ from `want`'s by more than `tolerance` relative to
// the largest |value| `want` wrote in that step (step -1: none).
struct StepDiff {
  int64_t step = -1;
  double max_abs = 0, rel = 0;
};
StepDiff FirstDivergentStep(const StepTrace& got, const StepTrace& want, double tolerance);

// The CUDA backend's library calls, computed here so that tests can hold them against the CPU
// backend. cuBLAS is column-major: C[m x n] = op(A) . op(B) (+ beta C), element (i, j) of X at
// X[i + j * ldx]; a row-major Y[m, n] = A[m, k] . op(W) is the column-major Y^T = op(W)^T . A^T,
// so cuBLAS's A is our W and its B our A.
struct BlasCall {
  bool trans_a = false, trans_b = false;  // cuBLAS's op(A), op(B)
  int m = 0, n = 0, k = 0;
  uint32_t arena_a = 0, arena_b = 0, arena_c = 0;
  uint64_t off_a = 0, off_b = 0, off_c = 0;
  int lda = 1, ldb = 1, ldc = 1;
  float beta = 0;
};
// Batch entry `b` of matmul step `s` (its views must have cs == 1). Throws std::invalid_argument
// otherwise.
BlasCall ColumnMajorCall(const FuncStep& s, uint32_t b);
// cudaMemcpy2D of a copy step whose views both have cs == 1, in elements: `height` rows of `width`
// elements, row i from src_off + i * spitch to dst_off + i * dpitch.
struct Copy2D {
  uint32_t src_arena = 0, dst_arena = 0;
  uint64_t src_off = 0, spitch = 0, dst_off = 0, dpitch = 0, width = 0, height = 0;
};
Copy2D CopyCall(const FuncStep& s);

struct OutputDiff {
  double max_abs = 0;  // max |a - b|
  double max_ref = 0;  // max |b|
  double rel = 0;      // max_abs / max(max_ref, tiny)
  size_t output = 0;   // which output holds the worst element
  uint32_t row = 0, col = 0;
  float got = 0, want = 0;
  bool shape_mismatch = false;
};
// The worst output of `a` against the reference `b` (relative to b's largest magnitude in that
// output).
OutputDiff CompareOutputs(const std::vector<mapping::Matrix>& a, const std::vector<mapping::Matrix>& b);

}  // namespace tpsim::validate
