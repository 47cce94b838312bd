#pragma once
// Running a LaunchPlan on the GPUs of this machine (CUDA, cuBLAS, NCCL; see gpu_runner.cu).
//
// Every launch is timed alone on synthetic bf16 data: `warmup` runs, then the median of `reps`
// runs bracketed by CUDA events. Plan GPU g runs on device g's core id when the machine has a
// device for every core the plan uses; otherwise every rank's compute runs on device
// (g % devices), one rank after another, and NCCL calls are not run (left unmeasured).
// Collectives run over a communicator of exactly their participating devices.

#include <cstdint>
#include <string>
#include <vector>

#include "mapping/program.h"
#include "validate/gpu_csv.h"
#include "validate/lowering.h"
#include "validate/measured.h"

namespace tpsim::validate {

struct GpuRunOptions {
  int reps = 20;
  int warmup = 3;
};

struct GpuRunOutput {
  int devices = 0;
  LaunchTimes times;
  int64_t whole_ps = 0;  // median end-to-end run of the whole plan; 0 when it could not run
  std::vector<std::string> notes;
};

int DeviceCount();
std::string DeviceName(int device);
// "CUDA runtime 13000, driver 13000, cuBLAS 130000, NCCL 22800" as the libraries report them.
std::string Versions();

// Throws std::runtime_error on CUDA / cuBLAS / NCCL errors (and when there is no GPU).
GpuRunOutput RunOnGpus(const LaunchPlan& plan, const GpuRunOptions& opts);

// The harness's kernels and cuBLAS GEMMs against the host references (validate/reference.h)
// on random data on device 0; one line per check into `report`. Returns the failures
// ("softmax: max abs error 0.05 > 0.02").
std::vector<std::string> SelfCheck(std::string* report);

struct CollectivePoint {
  std::string kind;  // all_reduce, all_gather, reduce_scatter
  uint64_t bytes = 0;
  int nranks = 0;
  double seconds = 0;
  bool measured = false;
};
// Each kind at each size over devices 0..ranks-1 (nccl-tests' sizes: the all-gather's receive
// buffer, the reduce-scatter's send buffer; bf16). With fewer than 2 devices (or ranks < 2)
// nothing is measured.
std::vector<CollectivePoint> MeasureCollectives(const std::vector<uint64_t>& sizes, int ranks,
                                                const GpuRunOptions& opts);

// Median time in seconds of one cuBLAS bf16 GEMM (fp32 accumulation, CUBLAS_GEMM_DEFAULT) per
// shape on device 0, each alone: `warmup` runs, then the median of `reps`. Throws
// std::runtime_error for a dtype other than bf16 and on CUDA / cuBLAS errors.
std::vector<double> MeasureGemms(const std::vector<GemmShapeRow>& shapes, const GpuRunOptions& opts);

}  // namespace tpsim::validate
