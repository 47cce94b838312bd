// Pins the operator graph of one Qwen3-4B decoder layer to numbers computed by
// hand from the published dimensions (Qwen/Qwen3-4B config.json), op by op.

#include "llm/opgraph.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "llm/model.h"

namespace tpsim::llm {
namespace {

// Qwen3-4B, bf16.
constexpr uint64_t kH = 2560, kHeads = 32, kKvHeads = 8, kHeadDim = 128, kI = 9728, kB = 2;
constexpr uint64_t kQ = kHeads * kHeadDim;     // 4096
constexpr uint64_t kKv = kKvHeads * kHeadDim;  // 1024
// Weights of one layer: q, k, v, o, gate, up, down, two RMSNorm gammas, q/k-norm gammas.
constexpr uint64_t kLayerParams = kH * kQ + 2 * kH * kKv + kQ * kH + 3 * kH * kI + 2 * kH + 2 * kHeadDim;
static_assert(kLayerParams == 100'930'816);

config::Model Qwen3_4B() {
  return ImportHuggingFace(std::string(TPSIM_SOURCE_DIR) + "/configs/models/qwen3-4b.json");
}

const Op& Find(const LayerGraph& g, const std::string& name) {
  for (const auto& op : g.ops) {
    if (op.name == name) return op;
  }
  ADD_FAILURE() << "no op " << name;
  static Op none;
  return none;
}

struct Expect {
  double flops;
  uint64_t read, written;
};

void CheckOps(const LayerGraph& g, const std::map<std::string, Expect>& want) {
  for (const auto& [name, e] : want) {
    const Op& op = Find(g, name);
    EXPECT_DOUBLE_EQ(op.flops, e.flops) << name;
    EXPECT_EQ(op.bytes_read, e.read) << name;
    EXPECT_EQ(op.bytes_written, e.written) << name;
  }
}

TEST(OpGraph, Qwen3_4BPrefillB1S256) {
  constexpr uint64_t M = 256, T = 256;  // B = 1, S = 256, nothing cached
  constexpr uint64_t kScores = kHeads * M * T;
  LayerGraph g = BuildLayer(Qwen3_4B(), Phase{.decode = false, .batch = 1, .new_tokens = 256, .cached = 0});

  const std::vector<std::string> order = {
      "attn_norm", "q_proj",  "k_proj",   "v_proj",    "q_norm",      "k_norm",        "rope",
      "kv_write",  "attn_qk", "softmax",  "attn_pv",   "o_proj",      "attn_residual", "mlp_norm",
      "gate_proj", "up_proj", "silu_mul", "down_proj", "mlp_residual"};
  ASSERT_EQ(g.ops.size(), order.size());
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(g.ops[i].name, order[i]);

  // The big ones: GEMM shapes, and attention's batched GEMMs over B*heads.
  const Op& k_proj = Find(g, "k_proj");
  EXPECT_EQ(k_proj.m, M);
  EXPECT_EQ(k_proj.k, kH);
  EXPECT_EQ(k_proj.n, kKv);  // GQA: 8 KV heads x 128
  EXPECT_EQ(k_proj.weight_bytes, kH * kKv * kB);
  const Op& qk = Find(g, "attn_qk");
  EXPECT_EQ(qk.kind, OpKind::kBatchedGemm);
  EXPECT_EQ(qk.batch, kHeads);
  EXPECT_EQ(qk.m, M);
  EXPECT_EQ(qk.k, kHeadDim);
  EXPECT_EQ(qk.n, T);
  const Op& pv = Find(g, "attn_pv");
  EXPECT_EQ(pv.batch, kHeads);
  EXPECT_EQ(pv.m, M);
  EXPECT_EQ(pv.k, T);
  EXPECT_EQ(pv.n, kHeadDim);

  CheckOps(g, {
                  {"attn_norm", {4.0 * M * kH, (M * kH + kH) * kB, M * kH * kB}},
                  {"q_proj", {2.0 * M * kH * kQ, (M * kH + kH * kQ) * kB, M * kQ * kB}},
                  {"k_proj", {2.0 * M * kH * kKv, (M * kH + kH * kKv) * kB, M * kKv * kB}},
                  {"v_proj", {2.0 * M * kH * kKv, (M * kH + kH * kKv) * kB, M * kKv * kB}},
                  {"q_norm", {4.0 * M * kQ, (M * kQ + kHeadDim) * kB, M * kQ * kB}},
                  {"k_norm", {4.0 * M * kKv, (M * kKv + kHeadDim) * kB, M * kKv * kB}},
                  {"rope", {3.0 * M * (kQ + kKv), M * (kQ + kKv) * kB, M * (kQ + kKv) * kB}},
                  {"kv_write", {0, 2 * M * kKv * kB, 2 * M * kKv * kB}},
                  {"attn_qk", {2.0 * kHeads * M * T * kHeadDim, (M * kQ + T * kKv) * kB, kScores * kB}},
                  {"softmax", {5.0 * kScores, kScores * kB, kScores * kB}},
                  {"attn_pv", {2.0 * kHeads * M * T * kHeadDim, (kScores + T * kKv) * kB, M * kQ * kB}},
                  {"o_proj", {2.0 * M * kQ * kH, (M * kQ + kQ * kH) * kB, M * kH * kB}},
                  {"attn_residual", {1.0 * M * kH, 2 * M * kH * kB, M * kH * kB}},
                  {"gate_proj", {2.0 * M * kH * kI, (M * kH + kH * kI) * kB, M * kI * kB}},
                  {"up_proj", {2.0 * M * kH * kI, (M * kH + kH * kI) * kB, M * kI * kB}},
                  {"silu_mul", {5.0 * M * kI, 2 * M * kI * kB, M * kI * kB}},
                  {"down_proj", {2.0 * M * kI * kH, (M * kI + kI * kH) * kB, M * kH * kB}},
                  {"mlp_residual", {1.0 * M * kH, 2 * M * kH * kB, M * kH * kB}},
              });

  // Totals: dense GEMMs are 2*M*(weights); attention adds 2 x 2*heads*S*T*d.
  constexpr double kFlops = 2.0 * M * (kLayerParams - 2 * kH - 2 * kHeadDim)  // projections
                            + 2 * 2.0 * kHeads * M * T * kHeadDim             // QK^T, PV
                            + 4.0 * (2 * M * kH + M * kQ + M * kKv)           // four RMSNorms
                            + 3.0 * M * (kQ + kKv) + 5.0 * kScores + 5.0 * M * kI + 2.0 * M * kH;
  static_assert(kFlops == 52'786'233'344.0);
  constexpr uint64_t kWeights = kLayerParams * kB;
  constexpr uint64_t kRead =
      kWeights + kB * (M * kH + 3 * M * kH + M * kQ + M * kKv + M * (kQ + kKv) + 2 * M * kKv  // to kv_write
                       + M * kQ + T * kKv + 2 * kScores + T * kKv + M * kQ                    // attention, o
                       + 2 * M * kH + M * kH + 2 * M * kH + 2 * M * kI + M * kI + 2 * M * kH);
  static_assert(kRead == 251'144'704);
  constexpr uint64_t kWritten =
      kB * (M * kH + M * kQ + 2 * M * kKv + M * kQ + M * kKv + M * (kQ + kKv) + 2 * M * kKv + 2 * kScores +
            M * kQ + 3 * M * kH + 3 * M * kI + 2 * M * kH);
  static_assert(kWritten == 42'729'472);
  EXPECT_DOUBLE_EQ(g.Flops(), kFlops);
  EXPECT_EQ(g.WeightBytes(), kWeights);
  EXPECT_EQ(g.BytesRead(), kRead);
  EXPECT_EQ(g.BytesWritten(), kWritten);
}

TEST(OpGraph, Qwen3_4BDecodeB1L1024) {
  constexpr uint64_t M = 1, L = 1024, T = L + 1;  // one new token attends to 1024 cached + itself
  constexpr uint64_t kScores = kHeads * T;
  LayerGraph g = BuildLayer(Qwen3_4B(), Phase{.decode = true, .batch = 1, .new_tokens = 1, .cached = 1024});

  const Op& qk = Find(g, "attn_qk");
  EXPECT_EQ(qk.batch, kHeads);
  EXPECT_EQ(qk.m, 1u);
  EXPECT_EQ(qk.n, T);
  CheckOps(g, {
                  {"q_proj", {2.0 * kH * kQ, (kH + kH * kQ) * kB, kQ * kB}},
                  {"k_proj", {2.0 * kH * kKv, (kH + kH * kKv) * kB, kKv * kB}},
                  {"kv_write", {0, 2 * kKv * kB, 2 * kKv * kB}},
                  // K and V of all T tokens, 8 KV heads x 128, read once each.
                  {"attn_qk", {2.0 * kHeads * T * kHeadDim, (kQ + T * kKv) * kB, kScores * kB}},
                  {"softmax", {5.0 * kScores, kScores * kB, kScores * kB}},
                  {"attn_pv", {2.0 * kHeads * T * kHeadDim, (kScores + T * kKv) * kB, kQ * kB}},
                  {"o_proj", {2.0 * kQ * kH, (kQ + kQ * kH) * kB, kH * kB}},
                  {"gate_proj", {2.0 * kH * kI, (kH + kH * kI) * kB, kI * kB}},
                  {"down_proj", {2.0 * kI * kH, (kI + kI * kH) * kB, kH * kB}},
              });

  constexpr double kFlops = 2.0 * M * (kLayerParams - 2 * kH - 2 * kHeadDim) +
                            2 * 2.0 * kHeads * T * kHeadDim + 4.0 * (2 * kH + kQ + kKv) + 3.0 * (kQ + kKv) +
                            5.0 * kScores + 5.0 * kI + 2.0 * kH;
  static_assert(kFlops == 218'918'560.0);
  constexpr uint64_t kWeights = kLayerParams * kB;
  constexpr uint64_t kKvCacheRead = 2 * T * kKv * kB;  // 4.2 MB of K and V against 202 MB of weights
  constexpr uint64_t kRead = kWeights + kKvCacheRead +
                             kB * (kH + 3 * kH + kQ + kKv + (kQ + kKv) + 2 * kKv + kQ + 2 * kScores + kQ +
                                   2 * kH + kH + 2 * kH + 2 * kI + kI + 2 * kH);
  static_assert(kRead == 206'346'880);
  constexpr uint64_t kWritten = kB * (kH + kQ + 2 * kKv + kQ + kKv + (kQ + kKv) + 2 * kKv + 2 * kScores + kQ +
                                      3 * kH + 3 * kI + 2 * kH);
  static_assert(kWritten == 265'344);
  EXPECT_DOUBLE_EQ(g.Flops(), kFlops);
  EXPECT_EQ(g.WeightBytes(), kWeights);
  EXPECT_EQ(g.BytesRead(), kRead);
  EXPECT_EQ(g.BytesWritten(), kWritten);
}

TEST(OpGraph, ClassesKindsAndEdges) {
  LayerGraph g = BuildLayer(Qwen3_4B(), Phase{.batch = 2, .new_tokens = 16, .cached = 32});
  const std::map<std::string, OpClass> cls = {{"attn_norm", OpClass::kNorm},
                                              {"q_proj", OpClass::kQkv},
                                              {"k_proj", OpClass::kQkv},
                                              {"v_proj", OpClass::kQkv},
                                              {"q_norm", OpClass::kAttention},
                                              {"k_norm", OpClass::kAttention},
                                              {"rope", OpClass::kAttention},
                                              {"kv_write", OpClass::kAttention},
                                              {"attn_qk", OpClass::kAttention},
                                              {"softmax", OpClass::kAttention},
                                              {"attn_pv", OpClass::kAttention},
                                              {"o_proj", OpClass::kO},
                                              {"attn_residual", OpClass::kElementwise},
                                              {"mlp_norm", OpClass::kNorm},
                                              {"gate_proj", OpClass::kGateUp},
                                              {"up_proj", OpClass::kGateUp},
                                              {"silu_mul", OpClass::kElementwise},
                                              {"down_proj", OpClass::kDown},
                                              {"mlp_residual", OpClass::kElementwise}};
  std::set<std::string> names;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    EXPECT_TRUE(names.insert(op.name).second) << "duplicate " << op.name;
    ASSERT_TRUE(cls.count(op.name)) << op.name;
    EXPECT_EQ(op.cls, cls.at(op.name)) << op.name;
    for (int in : op.inputs) {
      EXPECT_GE(in, 0);
      EXPECT_LT(in, static_cast<int>(i)) << op.name << " must come after its inputs";
    }
    if (op.kind == OpKind::kGemm && op.cls != OpClass::kExperts) {
      EXPECT_EQ(op.flops, 2.0 * op.batch * op.m * op.n * op.k) << op.name;
    }
  }
  EXPECT_EQ(Find(g, "q_proj").m, 32u);  // M = B * new_tokens
  EXPECT_EQ(Find(g, "attn_qk").batch, 2 * kHeads);
  EXPECT_EQ(Find(g, "attn_qk").n, 48u);  // cached + new
  EXPECT_STREQ(ToString(OpClass::kGateUp), "gate_up");
  EXPECT_STREQ(ToString(OpKind::kBatchedGemm), "batched_gemm");
}

// Every op carries its role, set where the graph is built; the role names the op, and each
// role appears at most once (lowering looks ops up by role, never by name).
TEST(OpGraph, RolesAreSetAndNameTheOps) {
  LayerGraph g = BuildLayer(Qwen3_4B(), Phase{.batch = 1, .new_tokens = 4});
  ASSERT_EQ(g.ops.size(), 19u);
  std::set<OpRole> roles;
  for (const Op& op : g.ops) {
    EXPECT_EQ(op.name, ToString(op.role));
    EXPECT_TRUE(roles.insert(op.role).second) << op.name;
  }
  EXPECT_EQ(g.ops[1].role, OpRole::kQProj);
  EXPECT_EQ(g.ops[4].role, OpRole::kQNorm);
  EXPECT_EQ(g.ops[9].role, OpRole::kSoftmax);
  EXPECT_EQ(g.ops.back().role, OpRole::kMlpResidual);
  config::Model moe = Qwen3_4B();
  moe.set_num_experts(8);
  moe.set_num_experts_per_token(2);
  moe.set_moe_intermediate_size(64);
  LayerGraph m = BuildLayer(moe, Phase{});
  EXPECT_EQ(Find(m, "router").role, OpRole::kRouter);
  EXPECT_EQ(Find(m, "experts").role, OpRole::kExperts);
  EXPECT_STREQ(ToString(OpRole::kAttnResidual), "attn_residual");
}

TEST(OpGraph, LlamaHasNoQkNorm) {
  config::Model m = ImportHuggingFace(std::string(TPSIM_SOURCE_DIR) + "/configs/models/llama-3.1-8b.json");
  LayerGraph g = BuildLayer(m, Phase{.decode = true, .batch = 1, .new_tokens = 1, .cached = 10});
  for (const auto& op : g.ops) EXPECT_TRUE(op.name != "q_norm" && op.name != "k_norm") << op.name;
  EXPECT_EQ(g.ops.size(), 17u);
  EXPECT_EQ(Find(g, "rope").inputs, (std::vector<int>{1, 2}));  // straight from q_proj, k_proj
}

// Qwen3-30B-A3B: hidden 2048, 128 experts, top-8, expert intermediate 768, 32 heads, 4 KV heads.
TEST(OpGraph, Qwen3MoeLayerShape) {
  config::Model m = ImportHuggingFace(std::string(TPSIM_SOURCE_DIR) + "/configs/models/qwen3-30b-a3b.json");
  constexpr uint64_t H = 2048, E = 128, K = 8, Im = 768;

  LayerGraph dec = BuildLayer(m, Phase{.decode = true, .batch = 1, .new_tokens = 1, .cached = 100});
  for (const auto& op : dec.ops) {
    EXPECT_TRUE(op.name != "gate_proj" && op.name != "up_proj" && op.name != "down_proj") << op.name;
  }
  const Op& router = Find(dec, "router");
  EXPECT_EQ(router.cls, OpClass::kRouter);
  EXPECT_EQ(router.kind, OpKind::kRouter);
  EXPECT_EQ(router.k, H);
  EXPECT_EQ(router.n, E);
  EXPECT_EQ(router.weight_bytes, H * E * 2);
  const Op& ex = Find(dec, "experts");
  EXPECT_EQ(ex.cls, OpClass::kExperts);
  // One token, top-8: 8 experts' gate/up/down weights are read, not all 128.
  EXPECT_EQ(ex.weight_bytes, K * 3 * H * Im * 2);
  EXPECT_EQ(ex.batch, K);
  EXPECT_DOUBLE_EQ(ex.flops, 2.0 * K * H * 2 * Im + 5.0 * K * Im + 2.0 * K * Im * H + 2.0 * K * H);
  EXPECT_EQ(Find(dec, "k_proj").n, 4u * 128);

  // Prefill of 256 tokens routes 2048 rows: every expert is read.
  LayerGraph pre = BuildLayer(m, Phase{.batch = 1, .new_tokens = 256});
  const Op& ex2 = Find(pre, "experts");
  EXPECT_EQ(ex2.weight_bytes, E * 3 * H * Im * 2);
  EXPECT_EQ(ex2.batch, E);
  EXPECT_EQ(ex2.m, 256u * K / E);
  // Active parameters per token: router + 8 experts, far below the 128 experts stored.
  EXPECT_LT(ex.weight_bytes * 10, ex2.weight_bytes);
}

// A continuous-batching iteration: one prefill chunk of 128 new tokens after 256 cached,
// and two decode tokens after 100 and 300 cached. Weight GEMMs, norms and element-wise ops
// run over all M = 130 rows; attention is per sequence over its own context.
TEST(OpGraph, Qwen3_4BMixedBatchOneChunkTwoDecodes) {
  constexpr uint64_t M = 128 + 1 + 1;
  // Per sequence: new tokens S and context T = cached + S.
  constexpr uint64_t S0 = 128, T0 = 256 + 128, S1 = 1, T1 = 100 + 1, S2 = 1, T2 = 300 + 1;
  constexpr uint64_t kScores = kHeads * (S0 * T0 + S1 * T1 + S2 * T2);  // 32 x 49,554
  static_assert(kScores == 1'585'728);
  LayerGraph g = BuildMixedLayer(Qwen3_4B(), {{128, 256}, {1, 100}, {1, 300}}, 2);

  EXPECT_FALSE(g.phase.decode);
  EXPECT_EQ(g.phase.batch, 3u);
  EXPECT_EQ(g.phase.new_tokens, M);
  EXPECT_EQ(g.phase.cached, 300u);
  for (const char* name : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"})
    EXPECT_EQ(Find(g, name).m, M) << name;
  const Op& qk = Find(g, "attn_qk");
  EXPECT_EQ(qk.batch, 3 * kHeads);
  EXPECT_EQ(qk.n, T0);  // the longest context
  EXPECT_EQ(Find(g, "attn_pv").k, T0);

  CheckOps(g, {
                  {"q_proj", {2.0 * M * kH * kQ, (M * kH + kH * kQ) * kB, M * kQ * kB}},
                  {"kv_write", {0, 2 * M * kKv * kB, 2 * M * kKv * kB}},
                  {"attn_qk",
                   {2.0 * kHeads * kHeadDim * (S0 * T0 + S1 * T1 + S2 * T2),
                    (M * kQ + (T0 + T1 + T2) * kKv) * kB, kScores * kB}},
                  {"softmax", {5.0 * kScores, kScores * kB, kScores * kB}},
                  {"attn_pv",
                   {2.0 * kHeads * kHeadDim * (S0 * T0 + S1 * T1 + S2 * T2),
                    (kScores + (T0 + T1 + T2) * kKv) * kB, M * kQ * kB}},
                  {"down_proj", {2.0 * M * kI * kH, (M * kI + kI * kH) * kB, M * kH * kB}},
              });
  // As the prefill test's total, with the attention terms summed per sequence.
  constexpr double kFlops = 2.0 * M * (kLayerParams - 2 * kH - 2 * kHeadDim) +
                            2 * 2.0 * kHeads * kHeadDim * (S0 * T0 + S1 * T1 + S2 * T2) +
                            4.0 * (2 * M * kH + M * kQ + M * kKv) + 3.0 * M * (kQ + kKv) + 5.0 * kScores +
                            5.0 * M * kI + 2.0 * M * kH;
  static_assert(kFlops == 27'074'746'176.0);
  EXPECT_DOUBLE_EQ(g.Flops(), kFlops);
  EXPECT_EQ(g.WeightBytes(), kLayerParams * kB);
}

// A mixed iteration of a single chunk is exactly BuildLayer's graph for that chunk.
TEST(OpGraph, MixedLayerOfOneChunkEqualsBuildLayer) {
  const config::Model m = Qwen3_4B();
  for (const SeqChunk c : {SeqChunk{256, 0}, SeqChunk{512, 1024}, SeqChunk{1, 1024}, SeqChunk{1, 0}}) {
    SCOPED_TRACE(std::to_string(c.new_tokens) + " new after " + std::to_string(c.cached));
    LayerGraph mixed = BuildMixedLayer(m, {c}, 2);
    LayerGraph one = BuildLayer(
        m, Phase{.decode = c.new_tokens == 1, .batch = 1, .new_tokens = c.new_tokens, .cached = c.cached});
    EXPECT_EQ(mixed.phase.decode, one.phase.decode);
    EXPECT_EQ(mixed.phase.batch, 1u);
    EXPECT_EQ(mixed.phase.new_tokens, one.phase.new_tokens);
    EXPECT_EQ(mixed.phase.cached, one.phase.cached);
    ASSERT_EQ(mixed.ops.size(), one.ops.size());
    for (size_t i = 0; i < one.ops.size(); ++i) {
      const Op &a = mixed.ops[i], &b = one.ops[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.kind, b.kind) << b.name;
      EXPECT_EQ(a.cls, b.cls) << b.name;
      EXPECT_EQ(std::make_tuple(a.batch, a.m, a.n, a.k, a.elements),
                std::make_tuple(b.batch, b.m, b.n, b.k, b.elements))
          << b.name;
      EXPECT_EQ(a.flops, b.flops) << b.name;
      EXPECT_EQ(a.weight_bytes, b.weight_bytes) << b.name;
      EXPECT_EQ(a.bytes_read, b.bytes_read) << b.name;
      EXPECT_EQ(a.bytes_written, b.bytes_written) << b.name;
      EXPECT_EQ(a.inputs, b.inputs) << b.name;
    }
  }
}

TEST(OpGraph, DegenerateModelDoesNotCrash) {
  config::Model m;  // all zero
  LayerGraph g = BuildLayer(m, Phase{});
  EXPECT_EQ(g.Flops(), 0.0);
  m.set_num_experts(4);
  m.set_num_experts_per_token(2);
  g = BuildLayer(m, Phase{.batch = 0, .new_tokens = 0});
  EXPECT_EQ(Find(g, "experts").m, 0u);
}

}  // namespace
}  // namespace tpsim::llm
