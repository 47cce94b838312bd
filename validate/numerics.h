#pragma once
// tpsim-validate's numerics check (plain C++ parts): which instance of the experiment's layer it
// runs, the two Programs it compares (the experiment's mapping and the same layer at TP 1 on one
// GPU), and the verdict. The CUDA backend (validate/func_exec.h) runs both FuncPlans; a mismatch
// beyond the tolerance fails the run naming the output, the element, the error and the first op
// that differs (or, when the device disagrees with the CPU backend on the same steps, the first
// step that diverges).

#include <functional>
#include <string>
#include <vector>

#include "arch/chip.h"
#include "mapping.pb.h"
#include "mapping/program.h"
#include "model.pb.h"
#include "validate/func_plan.h"
#include "workload.pb.h"

namespace tpsim::validate {

// max |partitioned - unpartitioned| / max |unpartitioned| over each output, both runs with bf16
// storage (every value a step writes rounded to bf16) and fp32 arithmetic inside each step.
// bf16 keeps 8 significant bits; the two runs round partial sums and reductions at different
// points, so they differ by a few ulps. Measured with the CPU backend when this was written
// (tests/validate/func_plan_test.cc): the small test model at TP 2-8, every partitioner, at most
// 0.0063; Qwen3-4B and Llama-3.1-8B layers on 8 tokens + 1 decode step at TP 8 (megatron,
// k_split, m_split_rotate; n_split and mn_2d gave 0), at most 0.0123 (Qwen3-4B, k_split).
// 2^-5 leaves a 2.5x margin; a dropped reduction gives errors of order 1.
constexpr double kNumericsTolerance = 1.0 / 32;

// The check's instance: the experiment's model, batch and shapes with one layer per pipeline
// stage. When both Programs' data would exceed `max_bytes` (fp32, all ranks on one GPU), the
// batch is halved down to 1, then seq_len (not below 16), until it fits, keeping the cached
// prefix and at most 2 decode steps.
struct NumericsInstance {
  config::Workload workload;
  config::Mapping partitioned;    // the experiment's mapping
  config::Mapping unpartitioned;  // TP 1, one stage, k_split (no collective)
  bool reduced = false;           // batch, seq_len and decode steps were cut to fit
  std::string description;        // e.g. "batch 1, seq_len 512, 2 decode steps, 1 layer"
};
// 24 GiB: fits an 80 GB H100 or a 141 GB H200 with room (the runs free it before timing); the shipped
// experiments need 4.1 GiB (Qwen3-4B, TP 8, 512 + 2 decode) and 7.2 GiB (Llama-3.1-8B).
constexpr uint64_t kNumericsMaxBytes = uint64_t{24} << 30;

struct NumericsPlans {
  NumericsInstance instance;
  mapping::Program part, ref;
  FuncPlan part_plan, ref_plan;
  uint64_t Bytes() const { return (part_plan.TotalElems() + ref_plan.TotalElems()) * 4; }
};

NumericsPlans PlanNumerics(const arch::Chip& chip, const config::Model& model, const config::Workload& wl,
                           const config::Mapping& m, uint64_t max_bytes = kNumericsMaxBytes);

struct NumericsVerdict {
  bool ok = false;
  OutputDiff diff;
  std::string text;  // one line: "prefill output: max error ... (tolerance ...)" or the mismatch
};
// `got` against `want` (outputs of `plan`, in plan.outputs order).
NumericsVerdict JudgeNumerics(const std::string& what, const FuncPlan& plan,
                              const std::vector<mapping::Matrix>& got,
                              const std::vector<mapping::Matrix>& want,
                              double tolerance = kNumericsTolerance);

// A backend that runs a plan with bf16 storage and returns its outputs (filling the trace when
// given): the CUDA backend in tpsim-validate, the CPU backend in tests.
using FuncRunner = std::function<std::vector<mapping::Matrix>(const FuncPlan&, StepTrace*)>;

struct NumericsReport {
  bool ok = false;
  // [0] partitioned vs TP 1, both on `device`; [1] the partitioned plan of the small instance on
  // `device` vs the CPU backend (the same steps: a kernel that got the semantics wrong would
  // cancel out of [0]). A failing [1] names the first step that diverges; a failing [0] names the
  // first op that differs (both runs again, traced) and says whether the CPU backend sees the same
  // mismatch on the small instance (then the Program's data semantics are wrong, not the device
  // run).
  std::vector<NumericsVerdict> verdicts;
  std::string note;  // one line for the report
};
// `device_name` names the device in the texts ("GPU 0").
NumericsReport RunNumericsCheck(const NumericsPlans& np, const NumericsPlans& small, const FuncRunner& device,
                                const std::string& device_name, double tolerance = kNumericsTolerance);

// Locates a mismatch of the partitioned layer against TP 1 from both runs' traces: each op of the
// TP 1 Program (in order) against the op of the same phase, step, layer and name in the
// partitioned one, whose result is put together from the slices its ranks wrote (ops whose
// ranks hold overlapping partial sums, and ops with no counterpart, are skipped). Returns
// "first op that differs: decode step 0 layer 0 softmax [32 x 515]: max |error| ..., relative
// ..." or "" when every comparable op is within `tolerance`.
std::string FirstDifferingOp(const NumericsPlans& np, const StepTrace& part, const StepTrace& ref,
                             double tolerance = kNumericsTolerance);

// The small instance of the kernel cross-check: at most 8 new and 8 cached tokens, one decode step.
config::Workload CrossCheckWorkload(const config::Workload& wl);

}  // namespace tpsim::validate
