// The memory plan sizes each weight GEMM by the partitioner the run's steps lower it with
// (mapping/memory_plan.h SizeWeights, GemmEmitter::ShardElems): an mn_2d whose rows do not
// divide by the grid rows runs n_split and holds n_split's shards; a run whose prefill runs
// mn_2d and whose decode steps fall back holds both layouts, in every step alike, and where
// both do not fit (or leave no room for the KV cache) keeps the decode steps' and streams the
// prefill's (WeightPlan::resident_rows).
#include <gtest/gtest.h>

#include <optional>
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

// SmallModel (hidden 64, 4 heads and 2 KV heads of 16, intermediate 128), tp 4, bf16, 2 layers.
// One layer's GEMMs (k x n): q 64 x 64, k and v 64 x 32, o 64 x 64, gate and up 64 x 128,
// down 128 x 64.
//
// mn_2d on a 2x2 grid, replicated column shards (k x n/2; q, k, v by whole heads of 16):
// q 64 x 32 + k 64 x 16 + v 64 x 16 + o 64 x 32 + gate 64 x 64 + up 64 x 64 + down 128 x 32
// = 2048 + 1024 + 1024 + 2048 + 4096 + 4096 + 4096 = 18432 elements.
constexpr uint64_t kMn2dElems = 18432;
// n_split (k x n/4; q, k, v by whole heads, and with 2 KV heads over 4 ranks each rank keeps
// the whole KV head its query head uses: 16 columns): q 64 x 16 + k 64 x 16 + v 64 x 16 +
// o 64 x 16 + gate 64 x 32 + up 64 x 32 + down 128 x 16 = 1024 x 4 + 2048 x 3 = 10240.
constexpr uint64_t kNSplitElems = 10240;
// m_split_rotate (k x n/4, plain columns): q 64 x 16 + k 64 x 8 + v 64 x 8 + o 64 x 16 +
// gate 64 x 32 + up 64 x 32 + down 128 x 16 = 1024 + 512 + 512 + 1024 + 2048 x 3 = 9216.
// k_split (k/4 x n; o's k by whole heads, 4 heads over 4 ranks): q 16 x 64 + k 16 x 32 +
// v 16 x 32 + o 16 x 64 + gate 16 x 128 + up 16 x 128 + down 32 x 64 = 9216 as well.
constexpr uint64_t kRotateElems = 9216, kKSplitElems = 9216;
constexpr uint64_t kLayers = 2, kD = 2;

config::Mapping Mn2d() {
  config::Mapping m = Map(4, "mn_2d");
  m.set_grid_rows(2);
  return m;
}

// Bytes the memory tasks of the weight GEMMs of `phase` read from DRAM (every core, every layer).
uint64_t WeightReadBytes(const Program& p, const std::string& phase) {
  uint64_t bytes = 0;
  for (const TaskRecord& r : p.records()) {
    if (r.kind != TaskKind::kMemory) continue;
    const OpRef& ref = p.ops[r.op].ref;
    const MemoryDetail& m = p.memories()[r.detail];
    const bool gemm = ref.op == "q_proj" || ref.op == "k_proj" || ref.op == "v_proj" || ref.op == "o_proj" ||
                      ref.op == "gate_proj" || ref.op == "up_proj" || ref.op == "down_proj";
    if (gemm && !m.write && ToString(ref.phase) == phase) bytes += m.bytes;
  }
  return bytes;
}

std::string LabelOf(const Program& p, const std::string& phase, const std::string& op) {
  const OpInfo* o = FindOp(p, phase, 0, op);
  return o ? o->ref.Label() : "(no " + phase + " " + op + ")";
}

// A prefill of 3 tokens (3 rows: not divisible by 2 grid rows) and a decode step (1 row):
// every step runs n_split, so the cores hold n_split's shards, 2 x 10240 x 2 B = 40960 B,
// not mn_2d's 2 x 18432 x 2 B = 73728 B (what the plan held before, sized before the rows were
// known). 64 KiB of SRAM holds them: resident, with the KV cache (2 x 4 positions x 1 KV head
// x 16 x 2 B = 256 B a layer) beside them.
TEST(PlanRows, Mn2dThatFallsBackInEveryStepHoldsNSplitShards) {
  arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, 64 * 1024));
  const config::Workload wl = Work(3, 1, kLayers);
  EXPECT_EQ(PlanWeights(chip, SmallModel(), Mn2d(), kLayers, "bf16", &wl).weight_bytes_per_core,
            kLayers * kNSplitElems * kD);
  // Without the run's rows (a request stream's plan): mn_2d's own shards, as before.
  EXPECT_EQ(PlanWeights(chip, SmallModel(), Mn2d(), kLayers, "bf16").weight_bytes_per_core,
            kLayers * kMn2dElems * kD);
  const Program p = Lower(chip, SmallModel(), wl, Mn2d());
  ExpectWellFormed(p, chip);
  EXPECT_EQ(LabelOf(p, "prefill", "q_proj"), "mn_2d->n_split (M=3 not divisible by grid_rows=2)");
  EXPECT_EQ(LabelOf(p, "decode", "q_proj"), "mn_2d->n_split (M=1 not divisible by grid_rows=2)");
  EXPECT_EQ(p.weights_location, WeightsLocation::kSram);
  EXPECT_EQ(p.kv_location, KvLocation::kSram);
}

// A prefill of 8 tokens runs mn_2d, a decode step (1 row) its n_split fallback: the run lays
// its weights out once and reads both layouts without a DRAM read where both fit, 2 x (18432 +
// 10240) x 2 B = 114688 B. 100 KiB of SRAM holds n_split's only, 2 x 10240 x 2 B = 40960 B (and
// the KV cache, 2 x 9 positions x 16 x 2 B a layer, beside them): the decode steps keep theirs
// resident and the prefill reads mn_2d's from DRAM at each use, 4 cores x 2 x 18432 x 2 B =
// 294912 B. (Before, all 114688 B were streamed, in every decode step too.) A lowering of the
// decode step alone (sim/step_reuse.h) plans the whole run's steps alike. Without the decode
// step only mn_2d runs: 73728 B, resident.
TEST(PlanRows, Mn2dPrefillWithAFallingBackDecodeKeepsTheDecodeLayout) {
  arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, 100 * 1024));
  const config::Workload wl = Work(8, 1, kLayers), prefill_only = Work(8, 0, kLayers);
  const WeightPlan plan = PlanWeights(chip, SmallModel(), Mn2d(), kLayers, "bf16", &wl);
  EXPECT_TRUE(plan.weights_in_sram);
  ASSERT_TRUE(plan.resident_rows.has_value());
  EXPECT_EQ(*plan.resident_rows, 1u);
  EXPECT_EQ(plan.weight_bytes_per_core, kLayers * kNSplitElems * kD);
  EXPECT_EQ(plan.streamed_bytes_per_core, kLayers * kMn2dElems * kD);
  EXPECT_EQ(PlanWeights(chip, SmallModel(), Mn2d(), kLayers, "bf16", &prefill_only).weight_bytes_per_core,
            kLayers * kMn2dElems * kD);
  // The DRAM capacity check counts the streamed layout in each core's channel (one under each).
  const std::optional<MemoryUse> use = PlanMemoryUse(Mn2d(), chip, SmallModel(), wl);
  ASSERT_TRUE(use.has_value());
  EXPECT_FALSE(use->weights_dram);
  ASSERT_EQ(use->channels.size(), 4u);
  for (const ChannelUse& c : use->channels) {
    EXPECT_EQ(c.cores, 1);
    EXPECT_EQ(c.weights, static_cast<double>(kLayers * kMn2dElems * kD));
  }
  // 120 KiB hold both layouts with the KV cache beside them: one plan.
  arch::Chip roomy = arch::Chip::Build(MeshChip(2, 2, 120 * 1024));
  const WeightPlan both = PlanWeights(roomy, SmallModel(), Mn2d(), kLayers, "bf16", &wl);
  EXPECT_FALSE(both.resident_rows.has_value());
  EXPECT_EQ(both.weight_bytes_per_core, kLayers * (kMn2dElems + kNSplitElems) * kD);
  EXPECT_EQ(Lower(roomy, SmallModel(), wl, Mn2d()).weights_location, WeightsLocation::kSram);

  const Program p = Lower(chip, SmallModel(), wl, Mn2d());
  ExpectWellFormed(p, chip);
  EXPECT_EQ(LabelOf(p, "prefill", "q_proj"), "mn_2d(2x2)");
  EXPECT_EQ(LabelOf(p, "decode", "q_proj"), "mn_2d->n_split (M=1 not divisible by grid_rows=2)");
  EXPECT_EQ(p.weights_location, WeightsLocation::kSramPrefillStreamed);
  EXPECT_EQ(p.kv_location, KvLocation::kSram);
  EXPECT_EQ(WeightReadBytes(p, "prefill"), 4 * kLayers * kMn2dElems * kD);
  EXPECT_EQ(WeightReadBytes(p, "decode"), 0u);

  LowerOptions decode_only;
  decode_only.decode_steps_only = {1};
  decode_only.skip_prefill = true;
  const Program d = Lower(chip, SmallModel(), wl, Mn2d(), decode_only);
  ExpectWellFormed(d, chip);
  EXPECT_EQ(d.weights_location, WeightsLocation::kSramPrefillStreamed);
  EXPECT_EQ(WeightReadBytes(d, "decode"), 0u);

  const Program q = Lower(chip, SmallModel(), prefill_only, Mn2d());
  ExpectWellFormed(q, chip);
  EXPECT_EQ(q.weights_location, WeightsLocation::kSram);
}

// Both layouts fit 120 KiB (114688 B), but with 100 decode steps the KV cache, 2 x 108
// positions x 16 x 2 B x 2 layers = 13824 B, does not fit beside them (8192 B left): the plan
// keeps the decode steps' layout (40960 B) with the KV cache beside it, rather than both with
// every decode step reading the cache from DRAM.
TEST(PlanRows, TheDecodeLayoutKeepsTheKvCacheBesideIt) {
  arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, 120 * 1024));
  const config::Workload wl = Work(8, 100, kLayers);
  const WeightPlan plan = PlanWeights(chip, SmallModel(), Mn2d(), kLayers, "bf16", &wl);
  ASSERT_TRUE(plan.resident_rows.has_value());
  EXPECT_EQ(plan.weight_bytes_per_core, kLayers * kNSplitElems * kD);
  const Program p = Lower(chip, SmallModel(), wl, Mn2d());
  ExpectWellFormed(p, chip);
  EXPECT_EQ(p.weights_location, WeightsLocation::kSramPrefillStreamed);
  EXPECT_EQ(p.kv_location, KvLocation::kSram);
  // Pinned in SRAM (mapping.weights "sram"): both layouts, and the KV cache in DRAM.
  config::Mapping pinned = Mn2d();
  pinned.set_weights("sram");
  const Program q = Lower(chip, SmallModel(), wl, pinned);
  EXPECT_EQ(q.weights_location, WeightsLocation::kSram);
  EXPECT_EQ(q.kv_location, KvLocation::kDram);
}

// The same for m_split_rotate: its prefill (8 rows) rotates its column shards, its decode
// step (1 row < 4 ranks) runs k_split's row shards: 2 x (9216 + 9216) x 2 B = 73728 B with a
// decode step, 2 x 9216 x 2 B = 36864 B without. Before, both were sized as k_split's (0 rows
// < 4): 36864 B. 64 KiB holds one layout: the decode steps keep k_split's, the prefill streams.
TEST(PlanRows, MSplitRotateWithADecodeBelowTpHoldsItsKSplitShardsToo) {
  arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, 64 * 1024));
  arch::Chip roomy = arch::Chip::Build(MeshChip(2, 2, 128 * 1024));
  const config::Mapping m = Map(4, "m_split_rotate");
  const config::Workload wl = Work(8, 1, kLayers), prefill_only = Work(8, 0, kLayers);
  EXPECT_EQ(PlanWeights(roomy, SmallModel(), m, kLayers, "bf16", &wl).weight_bytes_per_core,
            kLayers * (kRotateElems + kKSplitElems) * kD);
  const WeightPlan plan = PlanWeights(chip, SmallModel(), m, kLayers, "bf16", &wl);
  ASSERT_TRUE(plan.resident_rows.has_value());
  EXPECT_EQ(plan.weight_bytes_per_core, kLayers * kKSplitElems * kD);
  EXPECT_EQ(plan.streamed_bytes_per_core, kLayers * kRotateElems * kD);
  EXPECT_EQ(PlanWeights(chip, SmallModel(), m, kLayers, "bf16", &prefill_only).weight_bytes_per_core,
            kLayers * kRotateElems * kD);
  const Program p = Lower(chip, SmallModel(), wl, m);
  ExpectWellFormed(p, chip);
  EXPECT_EQ(LabelOf(p, "prefill", "q_proj"), "m_split_rotate");
  EXPECT_EQ(LabelOf(p, "decode", "q_proj"), "m_split_rotate->k_split (M=1 < tp=4)");
  EXPECT_EQ(p.weights_location, WeightsLocation::kSramPrefillStreamed);
  EXPECT_GT(WeightReadBytes(p, "prefill"), 0u);
  EXPECT_EQ(WeightReadBytes(p, "decode"), 0u);
  EXPECT_EQ(Lower(roomy, SmallModel(), wl, m).weights_location, WeightsLocation::kSram);
  EXPECT_EQ(Lower(chip, SmallModel(), prefill_only, m).weights_location, WeightsLocation::kSram);
  // 32 KiB hold neither layout: everything streams.
  arch::Chip small = arch::Chip::Build(MeshChip(2, 2, 32 * 1024));
  EXPECT_EQ(Lower(small, SmallModel(), wl, m).weights_location, WeightsLocation::kDramStreamed);
}

// mapping.weights "sram" is checked against the run's plan: n_split's shards of a run that
// falls back in every step fit 64 KiB (40960 B; mn_2d's replicated ones, 73728 B, which the
// check counted before, would not); both layouts of a run that runs both (114688 B) do not.
TEST(PlanRows, PinnedWeightsAreCheckedAgainstTheShardsTheRunHolds) {
  arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, 64 * 1024));
  config::Mapping m = Mn2d();
  m.set_weights("sram");
  const Program p = Lower(chip, SmallModel(), Work(3, 1, kLayers), m);
  EXPECT_EQ(p.weights_location, WeightsLocation::kSram);
  EXPECT_THROW(Lower(chip, SmallModel(), Work(8, 1, kLayers), m), config::ConfigError);
}

}  // namespace
}  // namespace tpsim::mapping
