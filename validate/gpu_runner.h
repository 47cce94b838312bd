#pragma once
// Running a LaunchPlan on the GPUs of this machine (CUDA, cuBLAS, NCCL; see gpu_runner.cu).
//
// Every launch is timed on synthetic bf16 data: `warmup` runs, then the median of `reps` runs.
// How a run is timed is GpuRunOptions::timing: kQueued (the default) queues a GPU's compute
// launches back to back behind a gate kernel that holds the stream until the host has queued them
// all, with a CUDA event between launches, so each launch's time is the GPU's alone (the kernel
// and the gap to the next, as a profiler's timeline shows it), not the host's launch latency;
// kAlone brackets each launch by events with the GPU idle before it, so the host's launch
// latency (5-10 us on an H200 with cuBLAS) is counted in. Plan GPU g runs on device g's core id when the
// machine has a device for every core the plan uses; otherwise every rank's compute runs on device (g %
// devices), one rank after another, and NCCL calls are not run (left unmeasured). Collectives run over a
// communicator of exactly their participating devices.

#include <cstdint>
#include <string>
#include <vector>

#include "mapping/program.h"
#include "validate/gpu_csv.h"
#include "validate/lowering.h"
#include "validate/measured.h"

namespace tpsim::validate {

enum class Timing { kQueued, kAlone };

struct GpuRunOptions {
  int reps = 20;
  int warmup = 3;
  Timing timing = Timing::kQueued;
  // --gemms in kQueued: each queued GEMM reads its own copy of the weight, enough copies that
  // the weights read since a copy's last use fill twice the L2, so every weight comes from HBM
  // (as in a layer, where each weight is read once); with warm_l2 every launch reads the same
  // weight, which stays in L2 where it fits.
  bool warm_l2 = false;
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

// Time in seconds of one cuBLAS bf16 GEMM (fp32 accumulation, CUBLAS_GEMM_DEFAULT) per shape on
// device 0. kAlone: `warmup` runs, then the median of `reps`, each alone. kQueued: `reps` GEMMs
// queued back to back behind a gate and timed together, per GEMM the median of 5 such runs
// (after `warmup` x `reps` unqueued ones), each reading its weight cold or warm (warm_l2). Throws
// std::runtime_error for a dtype other than bf16 and on CUDA / cuBLAS errors.
std::vector<double> MeasureGemms(const std::vector<GemmShapeRow>& shapes, const GpuRunOptions& opts);

}  // namespace tpsim::validate
