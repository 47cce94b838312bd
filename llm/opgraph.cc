#include "llm/opgraph.h"

#include <algorithm>

// Cost model of one decoder layer. Notation: B sequences, S new tokens each,
// C cached tokens, T = C + S, M = B*S rows, H hidden, nh/nkv heads, d head_dim,
// I intermediate, b dtype bytes; every weight and activation is b bytes.
//
// FLOPs per element of the non-GEMM ops:
//   RMSNorm      4  (square, accumulate, scale by 1/rms, scale by gamma)
//   RoPE         3  (x*cos + rotate_half(x)*sin: two multiplies, one add)
//   softmax      5  (max, subtract, exp, sum, divide)
//   SiLU * mul   5  (x / (1 + exp(-x)): negate, exp, add, divide; then the multiply)
//   residual     1
// Bytes: each op reads its inputs and writes its outputs once at b bytes; the
// norm gammas are weights. RoPE's cos/sin tables are not counted (per position,
// shared by all heads, cached on chip). kv_write moves the new K and V into the
// cache; attn_qk and attn_pv each read K (resp. V) of all T tokens once per KV
// head and sequence (GQA: the query heads of a group share the read).
//
// MoE (router + experts replace gate/up/silu_mul/down): the router is a GEMM
// [M,H]x[H,E] plus a softmax over E (5 FLOPs per logit), plus 2 FLOPs per selected expert
// when norm_topk_prob renormalises the top-k weights; top-k selection is not counted; it
// writes the top-k expert ids (int32) and gate weights per row. Shared experts
// (shared_expert_intermediate_size Is > 0): one FFN every row goes through, 2*M*H*2Is +
// 5*M*Is + 2*M*Is*H FLOPs plus M*H for adding it to the routed output. Layers that
// IsMoeLayer excludes (mlp_only_layers, decoder_sparse_step) have the dense MLP.
// `experts` fuses every expert's gate, up, SiLU*mul and down and the weighted
// combine: R = M*top_k routed rows; FLOPs = 2*R*H*2Im + 5*R*Im + 2*R*Im*H + 2*R*H;
// it reads each routed row's input (R*H), the weights of min(E, R) experts (the
// most that R rows can activate: all of them in prefill, only the activated ones
// in small-batch decode), and writes the combined M*H output. Its shape fields
// describe the gate+up GEMM of one active expert: batch = active experts,
// m = ceil(R / active), k = H, n = 2*Im.

namespace tpsim::llm {

const char* ToString(OpKind k) {
  switch (k) {
    case OpKind::kGemm:
      return "gemm";
    case OpKind::kBatchedGemm:
      return "batched_gemm";
    case OpKind::kNorm:
      return "norm";
    case OpKind::kRope:
      return "rope";
    case OpKind::kSoftmax:
      return "softmax";
    case OpKind::kElementwise:
      return "elementwise";
    case OpKind::kKvWrite:
      return "kv_write";
    case OpKind::kRouter:
      return "router";
    case OpKind::kCollective:
      return "collective";
  }
  return "?";
}

const char* ToString(OpClass c) {
  switch (c) {
    case OpClass::kQkv:
      return "qkv";
    case OpClass::kAttention:
      return "attention";
    case OpClass::kO:
      return "o";
    case OpClass::kGateUp:
      return "gate_up";
    case OpClass::kDown:
      return "down";
    case OpClass::kNorm:
      return "norm";
    case OpClass::kElementwise:
      return "elementwise";
    case OpClass::kRouter:
      return "router";
    case OpClass::kExperts:
      return "experts";
  }
  return "?";
}

const char* ToString(OpRole r) {
  static const char* const kNames[kNumOpRoles] = {
      "attn_norm",     "q_proj",   "k_proj",    "v_proj",        "q_norm",   "k_norm",
      "rope",          "kv_write", "attn_qk",   "softmax",       "attn_pv",  "o_proj",
      "attn_residual", "mlp_norm", "gate_proj", "up_proj",       "silu_mul", "down_proj",
      "mlp_residual",  "router",   "experts",   "shared_experts"};
  const int i = static_cast<int>(r);
  return i >= 0 && i < kNumOpRoles ? kNames[i] : "?";
}

double LayerGraph::Flops() const {
  double s = 0;
  for (const auto& op : ops) s += op.flops;
  return s;
}

uint64_t LayerGraph::BytesRead() const {
  uint64_t s = 0;
  for (const auto& op : ops) s += op.bytes_read;
  return s;
}

uint64_t LayerGraph::BytesWritten() const {
  uint64_t s = 0;
  for (const auto& op : ops) s += op.bytes_written;
  return s;
}

uint64_t LayerGraph::WeightBytes() const {
  uint64_t s = 0;
  for (const auto& op : ops) s += op.weight_bytes;
  return s;
}

namespace {

// Every op is named after its role (ToString(OpRole)).
Op NewOp(OpRole role, OpKind kind, OpClass cls) {
  Op op;
  op.name = ToString(role);
  op.kind = kind;
  op.cls = cls;
  op.role = role;
  return op;
}

constexpr double kNormFlops = 4, kRopeFlops = 3, kSoftmaxFlops = 5, kSiluMulFlops = 5, kResidualFlops = 1;

class Builder {
 public:
  explicit Builder(LayerGraph* g) : g_(g), b_(g->phase.dtype_bytes) {}

  int Add(Op op) {
    g_->ops.push_back(std::move(op));
    return static_cast<int>(g_->ops.size()) - 1;
  }

  // Y[m,n] = X[m,k] . W[k,n].
  int Gemm(OpRole role, OpClass cls, uint64_t m, uint64_t k, uint64_t n, std::vector<int> in) {
    Op op = NewOp(role, OpKind::kGemm, cls);
    op.m = m, op.k = k, op.n = n;
    op.flops = 2.0 * m * n * k;
    op.weight_bytes = k * n * b_;
    op.bytes_read = m * k * b_ + op.weight_bytes;
    op.bytes_written = m * n * b_;
    op.inputs = std::move(in);
    return Add(std::move(op));
  }

  // RMSNorm over `rows` rows of `width` values, gamma of `width`.
  int Norm(OpRole role, OpClass cls, uint64_t rows, uint64_t width, std::vector<int> in) {
    Op op = NewOp(role, OpKind::kNorm, cls);
    op.m = rows, op.k = width, op.elements = rows * width;
    op.flops = kNormFlops * op.elements;
    op.weight_bytes = width * b_;
    op.bytes_read = op.elements * b_ + op.weight_bytes;
    op.bytes_written = op.elements * b_;
    op.inputs = std::move(in);
    return Add(std::move(op));
  }

  // Element-wise op producing `elements` values from `operands` inputs each.
  int Eltwise(OpRole role, OpKind kind, OpClass cls, uint64_t elements, int operands,
              double flops_per_element, std::vector<int> in) {
    Op op = NewOp(role, kind, cls);
    op.elements = elements;
    op.flops = flops_per_element * elements;
    op.bytes_read = operands * elements * b_;
    op.bytes_written = elements * b_;
    op.inputs = std::move(in);
    return Add(std::move(op));
  }

  uint64_t b() const { return b_; }

 private:
  LayerGraph* g_;
  uint64_t b_;
};

// decoder_sparse_step's part of IsMoeLayer.
bool SparseByStep(uint32_t step, uint32_t layer) { return step <= 1 || (uint64_t{layer} + 1) % step == 0; }

}  // namespace

bool IsMoeLayer(const config::Model& model, uint32_t layer) {
  if (model.num_experts() == 0) return false;
  for (uint32_t l : model.mlp_only_layers())
    if (l == layer) return false;
  return SparseByStep(model.decoder_sparse_step(), layer);
}

uint64_t MoeLayerCount(const config::Model& model, uint32_t layers) {
  if (model.num_experts() == 0) return 0;
  const uint32_t step = model.decoder_sparse_step();
  uint64_t count = step <= 1 ? layers : layers / step;  // (l + 1) % step == 0 for l < layers
  std::vector<uint32_t> dense(model.mlp_only_layers().begin(), model.mlp_only_layers().end());
  std::sort(dense.begin(), dense.end());
  dense.erase(std::unique(dense.begin(), dense.end()), dense.end());
  for (uint32_t l : dense) count -= l < layers && SparseByStep(step, l);
  return count;
}

bool AllMoeLayers(const config::Model& model, uint32_t layers) {
  return model.num_experts() > 0 && MoeLayerCount(model, layers) == layers;
}

LayerGraph BuildLayer(const config::Model& model, const Phase& phase, uint32_t layer) {
  LayerGraph g;
  g.phase = phase;
  Builder bld(&g);
  const uint64_t b = bld.b();
  const uint64_t B = phase.batch, S = phase.new_tokens, T = uint64_t(phase.cached) + phase.new_tokens;
  const uint64_t M = B * S, H = model.hidden_size(), nh = model.num_attention_heads(), d = model.head_dim();
  // A model without num_key_value_heads is multi-head attention (the loader sets it; a model
  // built in code may not).
  const uint64_t nkv = model.num_key_value_heads() ? model.num_key_value_heads() : nh;
  const uint64_t qd = nh * d, kvd = nkv * d;

  int attn_norm = bld.Norm(OpRole::kAttnNorm, OpClass::kNorm, M, H, {});
  int q = bld.Gemm(OpRole::kQProj, OpClass::kQkv, M, H, qd, {attn_norm});
  int k = bld.Gemm(OpRole::kKProj, OpClass::kQkv, M, H, kvd, {attn_norm});
  int v = bld.Gemm(OpRole::kVProj, OpClass::kQkv, M, H, kvd, {attn_norm});
  if (model.qk_norm()) {
    q = bld.Norm(OpRole::kQNorm, OpClass::kAttention, M * nh, d, {q});
    k = bld.Norm(OpRole::kKNorm, OpClass::kAttention, M * nkv, d, {k});
  }
  int rope =
      bld.Eltwise(OpRole::kRope, OpKind::kRope, OpClass::kAttention, M * (qd + kvd), 1, kRopeFlops, {q, k});
  int kv_write =
      bld.Eltwise(OpRole::kKvWrite, OpKind::kKvWrite, OpClass::kAttention, 2 * M * kvd, 1, 0, {rope, v});

  const uint64_t scores = B * nh * S * T;
  Op qk = NewOp(OpRole::kAttnQk, OpKind::kBatchedGemm, OpClass::kAttention);
  qk.batch = B * nh, qk.m = S, qk.k = d, qk.n = T;
  qk.flops = 2.0 * qk.batch * qk.m * qk.n * qk.k;
  qk.bytes_read = M * qd * b + B * T * kvd * b;  // Q, and K of every token from the cache
  qk.bytes_written = scores * b;
  qk.inputs = {rope, kv_write};
  int attn_qk = bld.Add(std::move(qk));

  Op sm = NewOp(OpRole::kSoftmax, OpKind::kSoftmax, OpClass::kAttention);
  sm.m = B * nh * S, sm.n = T, sm.elements = scores;
  sm.flops = kSoftmaxFlops * scores;
  sm.bytes_read = scores * b;
  sm.bytes_written = scores * b;
  sm.inputs = {attn_qk};
  int softmax = bld.Add(std::move(sm));

  Op pv = NewOp(OpRole::kAttnPv, OpKind::kBatchedGemm, OpClass::kAttention);
  pv.batch = B * nh, pv.m = S, pv.k = T, pv.n = d;
  pv.flops = 2.0 * pv.batch * pv.m * pv.n * pv.k;
  pv.bytes_read = scores * b + B * T * kvd * b;  // P, and V of every token from the cache
  pv.bytes_written = M * qd * b;
  pv.inputs = {softmax, kv_write};
  int attn_pv = bld.Add(std::move(pv));

  int o = bld.Gemm(OpRole::kOProj, OpClass::kO, M, qd, H, {attn_pv});
  int attn_res = bld.Eltwise(OpRole::kAttnResidual, OpKind::kElementwise, OpClass::kElementwise, M * H, 2,
                             kResidualFlops, {o});
  int mlp_norm = bld.Norm(OpRole::kMlpNorm, OpClass::kNorm, M, H, {attn_res});

  int mlp_out;
  if (!IsMoeLayer(model, layer)) {
    const uint64_t I = model.intermediate_size();
    int gate = bld.Gemm(OpRole::kGateProj, OpClass::kGateUp, M, H, I, {mlp_norm});
    int up = bld.Gemm(OpRole::kUpProj, OpClass::kGateUp, M, H, I, {mlp_norm});
    int act = bld.Eltwise(OpRole::kSiluMul, OpKind::kElementwise, OpClass::kElementwise, M * I, 2,
                          kSiluMulFlops, {gate, up});
    mlp_out = bld.Gemm(OpRole::kDownProj, OpClass::kDown, M, I, H, {act});
  } else {
    const uint64_t E = model.num_experts(), topk = model.num_experts_per_token(),
                   Im = model.moe_intermediate_size();
    Op r = NewOp(OpRole::kRouter, OpKind::kRouter, OpClass::kRouter);
    r.m = M, r.k = H, r.n = E;
    // Renormalising the top-k gate weights: a sum and a division per selected expert.
    r.flops = 2.0 * M * H * E + kSoftmaxFlops * M * E + (model.norm_topk_prob() ? 2.0 * M * topk : 0);
    r.weight_bytes = H * E * b;
    r.bytes_read = M * H * b + r.weight_bytes;
    r.bytes_written = M * topk * (4 + b);
    r.inputs = {mlp_norm};
    int router = bld.Add(std::move(r));

    const uint64_t R = M * topk, active = std::min(E, R);
    Op ex = NewOp(OpRole::kExperts, OpKind::kGemm, OpClass::kExperts);
    ex.batch = active, ex.m = active ? (R + active - 1) / active : 0, ex.k = H, ex.n = 2 * Im;
    ex.flops = 2.0 * R * H * 2 * Im + kSiluMulFlops * R * Im + 2.0 * R * Im * H + 2.0 * R * H;
    ex.weight_bytes = active * 3 * H * Im * b;
    ex.bytes_read = R * H * b + ex.weight_bytes;
    ex.bytes_written = M * H * b;
    ex.inputs = {mlp_norm, router};
    mlp_out = bld.Add(std::move(ex));
    if (const uint64_t Is = model.shared_expert_intermediate_size()) {
      // Every row through one FFN of size Is (gate+up, SiLU*mul, down), added to the routed
      // experts' combined output.
      Op sh = NewOp(OpRole::kSharedExperts, OpKind::kGemm, OpClass::kExperts);
      sh.m = M, sh.k = H, sh.n = 2 * Is;
      sh.flops = 2.0 * M * H * 2 * Is + kSiluMulFlops * M * Is + 2.0 * M * Is * H + double(M) * H;
      sh.weight_bytes = 3 * H * Is * b;
      sh.bytes_read = M * H * b + sh.weight_bytes + M * H * b;
      sh.bytes_written = M * H * b;
      sh.inputs = {mlp_norm, mlp_out};
      mlp_out = bld.Add(std::move(sh));
    }
  }
  bld.Eltwise(OpRole::kMlpResidual, OpKind::kElementwise, OpClass::kElementwise, M * H, 2, kResidualFlops,
              {mlp_out, attn_res});
  return g;
}

LayerGraph BuildMixedLayer(const config::Model& model, const std::vector<SeqChunk>& chunks,
                           uint32_t dtype_bytes) {
  Phase all;
  all.batch = 1;
  all.dtype_bytes = dtype_bytes;
  all.new_tokens = 0;
  all.decode = !chunks.empty();
  uint32_t max_ctx = 0;
  for (const SeqChunk& c : chunks) {
    all.new_tokens += c.new_tokens;
    all.cached = std::max(all.cached, c.cached);
    all.decode = all.decode && c.new_tokens == 1;
    max_ctx = std::max(max_ctx, c.cached + c.new_tokens);
  }
  LayerGraph g = BuildLayer(model, all);
  g.phase.batch = static_cast<uint32_t>(chunks.size());
  for (Op& op : g.ops) {
    if (op.kind != OpKind::kBatchedGemm && op.kind != OpKind::kSoftmax) continue;
    op.flops = 0, op.bytes_read = 0, op.bytes_written = 0, op.elements = 0;
    for (const SeqChunk& c : chunks) {
      Phase one = all;
      one.new_tokens = c.new_tokens;
      one.cached = c.cached;
      LayerGraph part = BuildLayer(model, one);
      for (const Op& p : part.ops)
        if (p.role == op.role) {
          op.flops += p.flops, op.bytes_read += p.bytes_read, op.bytes_written += p.bytes_written;
          op.elements += p.elements;
        }
    }
    const uint64_t nh = model.num_attention_heads();
    if (op.kind == OpKind::kBatchedGemm) {
      op.batch = nh * chunks.size();
      if (op.role == OpRole::kAttnQk) op.n = max_ctx;
      if (op.role == OpRole::kAttnPv) op.k = max_ctx;
    } else {
      op.n = max_ctx;
    }
  }
  return g;
}

}  // namespace tpsim::llm
