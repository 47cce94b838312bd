// The memory plan's KV room in the first prefill (mapping/memory_plan.h SramTimeline): layer
// j's KV region holds nothing before layer j's prefill writes it, so a task of layer l
// reserves the KV of its stage's layers up to l only; decode steps, prefills after a cached
// prefix and mixed iterations reserve the whole cache.
#include <gtest/gtest.h>

#include <string>

#include "arch/chip.h"
#include "configs/load.h"
#include "llm/model.h"
#include "mapping/mapping.h"
#include "mapping_test_util.h"
#include "tests/arch/test_util.h"
#include "tests/mapping/lower_test_util.h"

namespace tpsim::mapping {
namespace {

using testing::ExpectWellFormed;
using testing::FindOp;
using testing::Map;
using testing::MeshChip;
using testing::SmallModel;
using testing::Work;

// SmallModel (hidden 64, 4 heads and 2 KV heads of 16, intermediate 128) at tp 1, 32 layers,
// weights resident. One layer's weights: q and o 64 x 64, k and v 64 x 32, gate, up and down
// 64 x 128 each: 36,864 elements, 73,728 B. One layer's KV for lmax positions: K and V x lmax
// x 2 KV heads x 16 x 2 B = 128 lmax B. SRAM is sized to hold the weights and the whole KV
// cache exactly, so a task that reserves the whole cache has no room left.
constexpr uint32_t kLayers = 32;
constexpr uint64_t kLayerWeights = (64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 128) * 2;
constexpr uint64_t KvPerLayer(uint64_t lmax) { return 2 * lmax * 2 * 16 * 2; }
constexpr uint64_t ExactSram(uint64_t lmax) { return kLayers * (kLayerWeights + KvPerLayer(lmax)); }

// q_proj of s new tokens with no room at all: its own X [s x 64] and Y [s x 64] spilled
// (written and read back), and the layer input x [s x 64], held for attn_residual and not
// read by q_proj, evicted.
constexpr uint64_t QProjNoRoom(uint64_t s) { return (s * 64 + s * 64) * 2 + s * 64 * 2; }

uint64_t LayerSpill(const Program& p, const std::string& phase, uint32_t step, uint32_t layer) {
  uint64_t sum = 0;
  for (const OpInfo& o : p.ops)
    if (ToString(o.ref.phase) == phase && o.ref.step == step && o.ref.layer == layer) sum += o.spilled_bytes;
  return sum;
}

const OpInfo* FindStepOp(const Program& p, const std::string& phase, uint32_t step, uint32_t layer,
                         const std::string& name) {
  for (const OpInfo& o : p.ops)
    if (ToString(o.ref.phase) == phase && o.ref.step == step && o.ref.layer == layer && o.ref.op == name)
      return &o;
  return nullptr;
}

Program LowerSmall(uint64_t sram, const config::Workload& wl, const config::Mapping& m = Map(1, "megatron"),
                   int cores = 1) {
  arch::Chip chip = arch::Chip::Build(MeshChip(1, cores, sram));
  Program p = Lower(chip, SmallModel(), wl, m);
  ExpectWellFormed(p, chip);
  EXPECT_EQ(p.weights_location, WeightsLocation::kSram);
  EXPECT_EQ(p.kv_location, KvLocation::kSram);
  return p;
}

TEST(KvRoom, PlanWeightsOfTheSmallModel) {
  arch::Chip chip = arch::Chip::Build(MeshChip(1, 1, ExactSram(8)));
  const WeightPlan plan = PlanWeights(chip, SmallModel(), Map(1, "megatron"), kLayers, "bf16");
  EXPECT_EQ(plan.weight_bytes_per_core, kLayers * kLayerWeights);
  EXPECT_EQ(plan.layers_per_core, kLayers);
  EXPECT_EQ(plan.kv_heads_per_core, 2u);
}

// A prefill of 8 tokens (lmax 8: 1 KiB of KV per layer). Layer 0 reserves one layer's KV and
// has 31 KiB for its activations: more than all of a layer's tensors together (each at most
// [8 x 128] x 2 B = 2 KiB: x, h, q, k, v, their norms and rope, attn, o, the residual, h2,
// gate, up, act, down, the second residual, under 24 KiB with the attention scratch), so it
// spills nothing. The last layer reserves the whole cache, as every layer did before (and as
// every layer spilled then): no room, so q_proj spills QProjNoRoom(8) = 3 KiB.
TEST(KvRoom, FirstPrefillReservesTheKvOfTheLayersWrittenSoFar) {
  const Program p = LowerSmall(ExactSram(8), Work(8, 0, kLayers));
  EXPECT_EQ(LayerSpill(p, "prefill", 0, 0), 0u);
  const OpInfo* q = FindOp(p, "prefill", kLayers - 1, "q_proj");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->spilled_bytes, QProjNoRoom(8));
  EXPECT_EQ(QProjNoRoom(8), 3072u);
  EXPECT_GT(LayerSpill(p, "prefill", 0, kLayers - 1), 0u);
  // The room shrinks layer by layer: no layer spills less than the one before it.
  for (uint32_t l = 1; l < kLayers; ++l)
    EXPECT_GE(LayerSpill(p, "prefill", 0, l), LayerSpill(p, "prefill", 0, l - 1)) << "layer " << l;
}

// Attention replicas (mapping.attention_dp 2, batch 2): each replica's core holds one
// sequence's cache, 1 KiB per layer as above, and the same rule holds on each: layer 0 spills
// nothing, the last layer's q_proj row sums both replicas' QProjNoRoom(8).
TEST(KvRoom, FirstPrefillRuleHoldsPerAttentionReplica) {
  config::Mapping m = Map(1, "megatron");
  m.set_attention_dp(2);
  config::Workload wl = Work(8, 0, kLayers);
  wl.set_batch(2);
  const Program p = LowerSmall(ExactSram(8), wl, m, 2);
  EXPECT_EQ(LayerSpill(p, "prefill", 0, 0), 0u);
  const OpInfo* q = FindOp(p, "prefill", kLayers - 1, "q_proj");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->spilled_bytes, 2 * QProjNoRoom(8));
}

// One decode step after the 8-token prefill (lmax 9). The prefill's layer 0 spills nothing
// (31 x 1152 B of room); the decode step reserves the whole cache in every layer, as before,
// so every layer plans alike (sim/step_reuse.h): each layer's q_proj spills QProjNoRoom(1) =
// 384 B, layer 0's as the last layer's, and every layer of the step spills the same.
TEST(KvRoom, DecodeStepsReserveTheWholeCache) {
  const Program p = LowerSmall(ExactSram(9), Work(8, 1, kLayers));
  EXPECT_EQ(LayerSpill(p, "prefill", 0, 0), 0u);
  EXPECT_EQ(QProjNoRoom(1), 384u);
  for (uint32_t l : {0u, 1u, kLayers - 1}) {
    const OpInfo* q = FindStepOp(p, "decode", 0, l, "q_proj");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->spilled_bytes, QProjNoRoom(1)) << "layer " << l;
  }
  for (uint32_t l = 1; l < kLayers; ++l)
    EXPECT_EQ(LayerSpill(p, "decode", 0, l), LayerSpill(p, "decode", 0, 0)) << "layer " << l;
}

// A prefill after a cached prefix reads KV written before it: the whole cache is reserved.
// 8 new tokens after 8 cached ones (lmax 16) spill in layer 0 as in the last layer
// (q_proj QProjNoRoom(8)), where a first prefill of 16 tokens (the same lmax, the same SRAM)
// spills nothing in layer 0.
TEST(KvRoom, CachedPrefixPrefillReservesTheWholeCache) {
  const Program first = LowerSmall(ExactSram(16), Work(16, 0, kLayers));
  EXPECT_EQ(LayerSpill(first, "prefill", 0, 0), 0u);
  const Program cached = LowerSmall(ExactSram(16), Work(8, 0, kLayers, 8));
  for (uint32_t l : {0u, kLayers - 1}) {
    const OpInfo* q = FindOp(cached, "prefill", l, "q_proj");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->spilled_bytes, QProjNoRoom(8)) << "layer " << l;
  }
}

// The reproducer of the cliff: Qwen3-0.6B on mesh-4x4-hbm (48 MiB of SRAM per core), 24
// layers in 4 stages of tp 4 (6 layers each), megatron, a 512-token prompt and no decode step
// (lmax 512). A core's weights: 6 layers x 7.5 MiB = 45 MiB (tests/mapping/plan_layers_test.cc);
// its KV: K and V x 512 x 2 KV heads x 128 x 2 B = 0.5 MiB per layer, 3 MiB for 6: they fill
// SRAM exactly. Before, every layer planned with no room and spilled as each stage's last layer
// still does; now the k-th layer of a stage (k = 1..6) has (6 - k) x 0.5 MiB.
TEST(KvRoom, MeshPrefillAtTheCliffSpillsFarLess) {
  arch::Chip chip = arch::Chip::Build(arch::testing::LoadChipConfig("mesh-4x4-hbm"), config::SourceMap());
  config::Model model =
      llm::LoadModelFile(std::string(TPSIM_SOURCE_DIR) + "/configs/models/qwen3-0.6b.json", nullptr);
  const Program p = Lower(chip, model, Work(512, 0, 24), Map(4, "megatron", "ring", "ring", 4));
  ExpectWellFormed(p, chip);
  EXPECT_EQ(p.weights_location, WeightsLocation::kSram);
  EXPECT_EQ(p.kv_location, KvLocation::kSram);
  constexpr uint64_t kMiB = 1024 * 1024;
  // Softmax of a stage's first layer on a core: its 4 heads' scores and probabilities,
  // 2 x 4 x 512 x 512 x 2 B = 4 MiB, against 2.5 MiB of room: 1.5 MiB spilled on each of 4
  // cores (with no room, as before, all 4 MiB).
  for (uint32_t first : {6u, 12u, 18u}) {
    const OpInfo* sm = FindOp(p, "prefill", first, "softmax");
    ASSERT_NE(sm, nullptr);
    EXPECT_EQ(sm->spilled_bytes, 4 * (4 * kMiB - 5 * kMiB / 2)) << "layer " << first;
  }
  // Each stage's last layer has no room: it spills what every layer of its stage spilled
  // before (stages 1-3 hold alike layers: the same bytes), the stage's most.
  uint64_t before = 0;
  for (uint32_t s = 0; s < 4; ++s) {
    const uint64_t last = LayerSpill(p, "prefill", 0, 6 * s + 5);
    before += 6 * last;
    if (s > 1) {
      EXPECT_EQ(last, LayerSpill(p, "prefill", 0, 6 * s - 1));
    }
    for (uint32_t l = 6 * s; l < 6 * s + 5; ++l)
      EXPECT_LT(LayerSpill(p, "prefill", 0, l), last) << "layer " << l;
  }
  // Far less in all: under half of what the old rule spilled.
  EXPECT_LT(2 * p.spilled_bytes, before);
}

}  // namespace
}  // namespace tpsim::mapping
