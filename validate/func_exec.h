#pragma once
// The CUDA backend of a FuncPlan (validate/func_exec.cu): every arena in one GPU's memory, so each
// rank's data and every transfer between ranks stay on that GPU (transfers are device-to-device
// copies, reductions an add kernel). Matmuls are cuBLAS fp32 GEMMs (cublasGemmEx, CUDA_R_32F,
// CUBLAS_COMPUTE_32F: fp32 accumulation, no TF32), the rest the harness's fp32 view kernels
// (validate/kernels.h). With opts.round_bf16 every value written, and every initial value, is
// rounded to bf16: bf16 storage with fp32 arithmetic, as the timed bf16 kernels and cuBLAS bf16
// GEMMs with fp32 accumulation compute.

#include <vector>

#include "mapping/functional.h"
#include "validate/func_plan.h"

namespace tpsim::validate {

struct FuncCudaRun {
  std::vector<mapping::Matrix> outputs;
  double seconds = 0;  // wall time of the steps (after upload, before download)
};

// Throws std::runtime_error on CUDA / cuBLAS errors, or when the plan's arenas do not fit in the
// device's free memory. With `trace`, copies each step's written values back after it (slow: for
// locating a divergence on small instances).
FuncCudaRun RunFuncPlanCuda(const FuncPlan& plan, const FuncExecOptions& opts, int device,
                            StepTrace* trace = nullptr);

}  // namespace tpsim::validate
