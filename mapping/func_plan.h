#pragma once
// The one CPU interpreter of a Program's data semantics (Program::func, mapping/func_data.h):
// the data as flat buffers and a straight list of steps that a backend executes in order.
// mapping::RunFunctional (mapping/functional.h) is BuildFuncPlan + RunFuncPlanCpu, and
// tpsim-validate's CPU backend is the same code; its CUDA backend (validate/func_exec.cu,
// cuBLAS + the harness's kernels) runs the same FuncPlan.
//
// Storage: one arena of float elements per core that touches data, one shared arena for the
// weights (identical on every core, read-only) and one staging arena for transfers in flight.
// Every (tensor, core) pair that a step touches gets the whole logical [rows, cols] tensor in that
// core's arena, row-major; a step addresses a strided view of it:
//
//   element (i, j) of a FuncView = arena[view.arena][view.offset + i * view.ld + j * view.cs]
//
// Steps, in the Program's task order, with the functional executor's exact semantics:
//   op      every compute task's FuncOp: a matmul (QK^T and PV become batched matmuls, one batch
//           entry per query head, the shared KV head's view repeated), or a norm / RoPE /
//           softmax / add / silu*mul / copy on views
//   pack    a collective's pack copies (region -> buffer), before anything touches its buffer
//   stage   a transfer: the source range of the sender's buffer -> the staging arena
//   apply   when a (collective, step) group ends: each staged range -> the receiver's buffer,
//           copied, or added when the transfer reduces (same order as the Program's tasks)
//   unpack  after a collective's last transfer: buffer -> regions
// Ranks are cores; a backend may place the arenas on one device (the CUDA backend does: every
// transfer is then a device-to-device copy on that GPU) or on several.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mapping/functional.h"
#include "mapping/program.h"

namespace tpsim::mapping {

struct FuncArena {
  int core = -1;  // kWeightsCore, kStagingCore or the core id
  uint64_t elems = 0;
};
constexpr int kWeightsCore = -1;
constexpr int kStagingCore = -2;

struct FuncView {
  uint32_t arena = 0;
  uint64_t offset = 0;
  uint32_t rows = 0, cols = 0;
  uint64_t ld = 0;  // elements between rows
  uint64_t cs = 1;  // elements between columns (1, or the region's rows for a transposed pack)
  uint64_t Elements() const { return uint64_t{rows} * cols; }
};

enum class FuncStepKind : uint8_t {
  kMatmul,   // out[b] (+)= a[b] . op(b[b]) for b < batch; views advanced by the strides
  kRmsNorm,  // out = a / sqrt(mean(a^2) + 1e-6) per group of `group` columns of each row
  kRope,     // rotary over groups of `group` columns, position pos0 + row
  kSoftmax,  // row softmax of a * scale; row r sees columns < cached + (row0 + r) % tokens + 1
  kAdd,      // out = a + b
  kSiluMul,  // out = silu(a) * b
  kCopy,     // out = a
};
const char* ToString(FuncStepKind k);

enum class FuncStepOrigin : uint8_t { kOp, kPack, kStage, kApply, kUnpack };
const char* ToString(FuncStepOrigin o);

struct FuncStep {
  FuncStepKind kind = FuncStepKind::kCopy;
  FuncStepOrigin origin = FuncStepOrigin::kOp;
  FuncView a, b, out;  // matmul: a [m, k], b [k, n] (stored [n, k] when transpose_b), out [m, n]
  uint32_t batch = 1;
  uint64_t stride_a = 0, stride_b = 0, stride_out = 0;
  bool transpose_b = false, accumulate = false;
  uint32_t group = 0;  // rmsnorm: group; rope: head_dim
  uint32_t pos0 = 0;   // rope: position of row 0; softmax: cached tokens
  uint32_t tokens = 0, row0 = 0;
  double scale = 1;         // softmax
  int64_t task = -1;        // the Program task it stands for (pack: the task that triggered it)
  int32_t collective = -1;  // pack, stage, apply, unpack
  int core = -1;            // the core whose data it writes
  // op steps: the logical tensor they write (index into Program::func.tensors) and where the
  // writing core's copy of it starts in out.arena (element (r, c) at tensor_base + r * cols + c).
  int32_t tensor = -1;
  uint64_t tensor_base = 0;
};

// Rows [0, rows) of an arena's region filled with mapping's deterministic uniforms of `seed`
// (times `scale`), or with `values` (rows x cols, row-major) when it is not empty (kConst).
struct FuncInit {
  uint32_t arena = 0;
  uint64_t offset = 0;
  uint32_t rows = 0, cols = 0;
  uint64_t seed = 0;
  float scale = 1;
  std::vector<float> values{};
  uint64_t first = 0;  // the random stream's index of element 0 (a replica's share of the input)
};

struct FuncPlanOutput {
  std::string phase;
  uint32_t step = 0;
  uint32_t rows = 0, cols = 0;
  struct Part {
    FuncView view;            // where the part lives
    uint32_t r0 = 0, c0 = 0;  // where it goes in the output
  };
  std::vector<Part> parts;
};

struct FuncPlan {
  std::vector<FuncArena> arenas;
  std::vector<FuncInit> inits;
  std::vector<FuncStep> steps;
  std::vector<FuncPlanOutput> outputs;  // as Program::func.outputs: prefill, then decode steps
  uint64_t TotalElems() const;
  double MatmulFlops() const;
  // One line per arena and a count of steps per kind (for --dry-run and error messages).
  std::string Summary() const;
  // "op 17 (task 342, core 3): matmul 8x64x16" etc.
  std::string Describe(size_t step, const Program& p) const;
};

// Builds the plan; throws std::invalid_argument for a slice out of range, a transfer without a
// collective, shapes that disagree, or a batch whose rows do not divide into its sequences.
FuncPlan BuildFuncPlan(const Program& p);

// The values of `init` (rows x cols, row-major), rounded to bf16 when `round_bf16`.
std::vector<float> InitValues(const FuncInit& init, bool round_bf16);
// The arenas' initial contents (zeros, then the inits), rounded to bf16 when `round_bf16`.
std::vector<std::vector<float>> InitialArenas(const FuncPlan& plan, bool round_bf16);

// Rounds to the nearest bf16 (ties to even) and back, as CUDA's __float2bfloat16 does. Inline:
// the CPU backend calls it for every value it stores when FuncExecOptions::round_bf16.
inline float RoundBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) {  // inf / nan: keep, quiet the nan
    if (u & 0x007fffffu) u |= 0x00400000u;
    u &= 0xffff0000u;
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
  }
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

struct FuncExecOptions {
  // Round every value a step writes (and every initial value) to bf16: bf16 storage with fp32
  // (CUDA) or double (CPU) arithmetic inside each step, as the timed harness's kernels and
  // cuBLAS bf16 GEMMs with fp32 accumulation compute.
  bool round_bf16 = false;
};

// Per step, the values it wrote (its out view row by row, batch entries in order), after it ran.
using StepTrace = std::vector<std::vector<float>>;
std::vector<float> ReadView(const std::vector<float>& arena, const FuncView& v, uint32_t batch,
                            uint64_t stride);

// Runs the plan on the CPU (double accumulation) and returns
// its outputs; fills `trace` when given.
std::vector<Matrix> RunFuncPlanCpu(const FuncPlan& plan, const FuncExecOptions& opts,
                                   StepTrace* trace = nullptr);

// The final contents of every arena after the plan ran on the CPU.
std::vector<std::vector<float>> RunFuncPlanCpuArenas(const FuncPlan& plan, const FuncExecOptions& opts);
// The same, starting from `arenas` (one per plan arena, of its size) instead of the plan's
// initial contents: the inits are not applied. For tests that run many one-step plans over
// the same initial memory.
std::vector<std::vector<float>> RunFuncPlanCpuArenas(const FuncPlan& plan, const FuncExecOptions& opts,
                                                     std::vector<std::vector<float>> arenas);

// Gathers the outputs from arena contents.
std::vector<Matrix> GatherOutputs(const FuncPlan& plan, const std::vector<std::vector<float>>& arenas);

}  // namespace tpsim::mapping
