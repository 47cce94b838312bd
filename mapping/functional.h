#pragma once
// The functional executor: runs a Program on small random float32 tensors on the CPU
// (each core computes its shard, transfers move real data, collectives really reduce),
// and the unpartitioned reference layer it must agree with.
//
// Numerics of a layer, per sequence (a batch is independent sequences): x -> rmsnorm ->
// q,k,v projections -> per-head rmsnorm of q and k (qk_norm) -> RoPE (theta 10000, position
// = cached + token) -> KV cache append -> causal softmax(q k^T / sqrt(head_dim)) v per head
// (GQA: query head h uses KV head h / (heads / kv_heads)) -> o projection -> residual ->
// rmsnorm -> silu(gate) * up -> down -> residual. Sequence s of a batch reads rows
// [s*T, (s+1)*T) of the phase's random input and its own cache prefix (random from
// FuncSequenceSeed); outputs are [batch * tokens, hidden], sequence-major. Norms have unit
// gain; weights are N(0, 1/fan_in)-like uniforms from fixed seeds, so the reference and the
// Program see the same numbers.

#include <vector>

#include "mapping.pb.h"
#include "mapping/program.h"
#include "model.pb.h"
#include "workload.pb.h"

namespace tpsim::mapping {

struct Matrix {
  uint32_t rows = 0, cols = 0;
  std::vector<float> v;
  float& at(uint32_t r, uint32_t c) { return v[uint64_t{r} * cols + c]; }
  float at(uint32_t r, uint32_t c) const { return v[uint64_t{r} * cols + c]; }
};

// The numerics' constants, shared by the reference, the CPU interpreter (mapping/func_plan.h) and
// the GPU harness's kernels (validate/reference.h).
constexpr float kFuncNormEps = 1e-6f;       // rmsnorm: x / sqrt(mean(x^2) + eps)
constexpr double kFuncRopeTheta = 10000.0;  // RoPE base

// Roles of the MoE block's weights (FuncSeed(layer, role)), shared by lowering and reference:
// the router [H, E]; the shared experts' gate, up [H, Is] and down [Is, H] at kFuncSharedRole
// + 0, 1, 2; expert e's gate, up [H, Im] and down [Im, H] at kFuncExpertRole + 3e + 0, 1, 2.
// (The dense layer's q, k, v, o, gate, up, down are roles 0..6; KV caches 100, 101; inputs 200.)
constexpr int kFuncRouterRole = 7, kFuncSharedRole = 8, kFuncExpertRole = 16;
// The gate bias of an expert a token did not reach (norm_topk_prob: the router softmax over
// logits + bias gives the renormalised top-k weights; exp(-1e30) is 0 in float and bf16).
constexpr float kFuncMaskedLogit = -1e30f;

// Seed of functional tensor `role` of layer (or phase) `index`; shared by lowering and reference.
uint64_t FuncSeed(uint32_t index, int role);
// Element `i` of the tensor with `seed`: a deterministic uniform in [-1, 1) (splitmix64).
// Weights with `rows` rows are scaled by FuncWeightScale(rows) = 1 / sqrt(rows).
// The CPU interpreter (mapping/func_plan.h) and the GPU harness use these too.
float FuncRand(uint64_t seed, uint64_t i);
float FuncWeightScale(uint32_t rows);
// Seed of sequence `sequence`'s cached prefix in a KV cache with `seed` (batch > 1; sequence
// 0 keeps `seed`, so its data is the batch-1 data).
uint64_t FuncSequenceSeed(uint64_t seed, uint32_t sequence);

// Runs the Program with the one CPU interpreter of functional data (BuildFuncPlan +
// RunFuncPlanCpu, mapping/func_plan.h); returns the last layer's output of prefill, then of
// each decode step. The Program must be lowered with LowerOptions::functional. Throws std::invalid_argument
// for a Program without its functional side tables, or when a task's data is
// inconsistent.
std::vector<Matrix> RunFunctional(const Program& p);

// The same outputs, computed unpartitioned: attention one sequence of the batch at a time, the
// MLP (or MoE block) over all the phase's rows. An MoE layer routes by `moe` (mapping.moe: routing,
// capacity_factor; its ep and tp do not matter): router softmax over the E experts, each expert
// takes the tokens ExpertTokens (mapping/moe_routing.h) gives it from RouteTokens' counts (after
// the capacity cap: the tokens an expert does not take skip it), silu(x Wg) * (x Wu) Wd per
// expert, weighted by the router probability (renormalised over the experts the token reached
// when norm_topk_prob), plus the shared experts (no gate of their own), then the residual.
// Throws config::ConfigError for an unreadable routing trace.
std::vector<Matrix> RunReference(const config::Model& model, const config::Workload& wl,
                                 const config::MoeMapping& moe = config::MoeMapping());

// max |a - b| / max(max |b|, tiny) over all outputs.
double MaxRelativeError(const std::vector<Matrix>& a, const std::vector<Matrix>& b);

}  // namespace tpsim::mapping
