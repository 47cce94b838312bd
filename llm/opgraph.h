#pragma once
// One decoder layer as an operator graph, for prefill or decode.
//
// Every op is either a (batched) GEMM  Y[M,N] = X[M,K] . W[K,N]  (batch = number
// of independent products, e.g. attention heads x sequences) or an element-wise /
// reduction op over `elements` values. Each op knows its FLOPs and the bytes it
// reads and writes at the workload's dtype; weights are counted separately.
//
// Attention is counted without causal skipping: QK^T is S x (cached + S) per
// head and sequence, as the score matrix is computed in full.

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "model.pb.h"

namespace tpsim::llm {

enum class OpKind {
  kGemm,         // weight GEMM: X[M,K] . W[K,N], W a model weight
  kBatchedGemm,  // activation x activation (attention QK^T and PV)
  kNorm,         // RMSNorm over rows of `k` values (elements = M*K)
  kRope,         // rotary embedding on Q and K
  kSoftmax,      // row softmax over `n` values per row
  kElementwise,  // SiLU*mul, residual add
  kKvWrite,      // append new K,V to the KV cache
  kRouter,       // MoE gate GEMM + top-k
  // A collective as one kernel per rank (NCCL on a GPU-node chip; mapping/cost.h): not an op
  // of the layer graph, only a Program task's kind.
  kCollective,
};

// Which partitioner choice governs an op (mapping.overrides[].op).
enum class OpClass { kQkv, kAttention, kO, kGateUp, kDown, kNorm, kElementwise, kRouter, kExperts };

// What an op is within the layer, set where the graph is built (BuildLayer): lowering walks
// the graph by role and never guesses from names. ToString gives the canonical op name.
enum class OpRole : uint8_t {
  kAttnNorm,
  kQProj,
  kKProj,
  kVProj,
  kQNorm,
  kKNorm,
  kRope,
  kKvWrite,
  kAttnQk,
  kSoftmax,
  kAttnPv,
  kOProj,
  kAttnResidual,
  kMlpNorm,
  kGateProj,
  kUpProj,
  kSiluMul,
  kDownProj,
  kMlpResidual,
  kRouter,
  kExperts,
  kSharedExperts,
};
constexpr int kNumOpRoles = static_cast<int>(OpRole::kSharedExperts) + 1;

const char* ToString(OpKind k);
const char* ToString(OpClass c);
const char* ToString(OpRole r);

struct Op {
  std::string name;  // unique within the layer: "attn_norm", "q_proj", "qk_norm", "rope", ...
  OpKind kind;
  OpClass cls;
  OpRole role;
  // GEMM shape (kGemm, kBatchedGemm, kRouter): batch x [M,K]x[K,N].
  uint64_t batch = 1, m = 0, n = 0, k = 0;
  uint64_t elements = 0;       // element-wise ops: values produced
  double flops = 0;            // 2*M*N*K*batch for GEMMs; per-element counts otherwise (see opgraph.cc)
  uint64_t weight_bytes = 0;   // model weights read
  uint64_t bytes_read = 0;     // activations + weights + KV read
  uint64_t bytes_written = 0;  // activations + KV written
  std::vector<int> inputs;     // indices of producer ops in the layer
};

struct Phase {
  bool decode = false;
  uint32_t batch = 1;
  uint32_t new_tokens = 1;  // prefill: S; decode: 1
  uint32_t cached = 0;      // tokens already in the KV cache (decode: context L)
  uint32_t dtype_bytes = 2;
};

struct LayerGraph {
  Phase phase;
  std::vector<Op> ops;
  double Flops() const;
  uint64_t BytesRead() const;
  uint64_t BytesWritten() const;
  uint64_t WeightBytes() const;
};

// Prefill: batch B, S new tokens, `cached` tokens already in the cache. The layer of an MoE
// model is sparse (router, experts, shared experts) unless IsMoeLayer(model, layer) is false.
LayerGraph BuildLayer(const config::Model& model, const Phase& phase, uint32_t layer = 0);

// Whether layer `layer` (0-based) of `model` has the MoE block: the model has experts, the
// layer is not in mlp_only_layers, and (layer + 1) % decoder_sparse_step == 0 (HuggingFace's
// Qwen-MoE rule; a step of 0 or 1 makes every layer sparse).
bool IsMoeLayer(const config::Model& model, uint32_t layer);
// How many of layers 0 .. layers - 1 IsMoeLayer counts, in closed form (mlp_only_layers read
// once: a count layer by layer over 2^31 layers with 200 of them took hours).
uint64_t MoeLayerCount(const config::Model& model, uint32_t layers);
// Whether every one of layers 0 .. layers - 1 has the MoE block (the model has experts): such
// layers have no dense MLP for a partitioner, an override or the estimate to count.
bool AllMoeLayers(const config::Model& model, uint32_t layers);

// One sequence's share of a mixed (continuous-batching) iteration: `new_tokens`
// processed now (a prefill chunk, or 1 for a decode step) after `cached` tokens
// already in its KV cache.
struct SeqChunk {
  uint32_t new_tokens = 1;
  uint32_t cached = 0;
  bool operator==(const SeqChunk&) const = default;
  auto operator<=>(const SeqChunk&) const = default;
};

// A mixed iteration's layer: every weight GEMM, norm and element-wise op runs over
// all M = sum(new_tokens) rows at once; attention (rope aside) is per sequence with
// its own context: attn_qk, softmax and attn_pv are the sums over chunks of
// BuildLayer's counts for { batch 1, new_tokens, cached } (batch = nh * chunks,
// m = M, n = k = max context for the shape fields). phase: batch = number of
// chunks, new_tokens = M, cached = max cached, decode = every chunk has 1 token.
LayerGraph BuildMixedLayer(const config::Model& model, const std::vector<SeqChunk>& chunks,
                           uint32_t dtype_bytes);

}  // namespace tpsim::llm
