// LowerOptions::plan_layers: a few lowered layers standing for more (tpsim serve's
// mapping.serving.layers_simulated) are planned with the residency of the layers each stage
// really holds.
#include <gtest/gtest.h>

#include <string>

#include "arch/chip.h"
#include "configs/load.h"
#include "llm/model.h"
#include "mapping/mapping.h"
#include "tests/arch/test_util.h"

namespace tpsim::mapping {
namespace {

// Qwen3-0.6B (hidden 1024, 16 query and 8 KV heads of 128, intermediate 3072, 28 layers) on
// mesh-4x4-hbm (48 MiB of SRAM per core), tp 4 in 4 stages. One layer's weights: q 1024 x 2048,
// k and v 1024 x 1024 each, o 2048 x 1024, gate, up and down 1024 x 3072 each: 15 Mi elements,
// 30 MiB in bf16, 7.5 MiB per core of tp 4. 4 lowered layers: 1 per stage, 7.5 MiB, in SRAM;
// the model's 28: 7 per stage, 52.5 MiB > 48 MiB, streamed from HBM.
struct Qwen06b {
  arch::Chip chip = arch::Chip::Build(arch::testing::LoadChipConfig("mesh-4x4-hbm"), config::SourceMap());
  config::Model model = llm::LoadModelFile(TPSIM_SOURCE_DIR "/configs/models/qwen3-0.6b.json", nullptr);
  config::Mapping m;
  Qwen06b() {
    m.set_tp(4);
    m.set_pipeline_stages(4);
    m.set_partition("megatron");
    m.set_placement("ring");
    m.set_collective("ring");
  }
};

constexpr uint64_t kMiB = 1024 * 1024;

TEST(PlanLayers, PlanWeightsOfTheLayersEachStageHolds) {
  Qwen06b f;
  const WeightPlan one = PlanWeights(f.chip, f.model, f.m, 4, "bf16");
  EXPECT_EQ(one.weight_bytes_per_core, 15 * kMiB / 2);
  EXPECT_EQ(one.layers_per_core, 1u);
  EXPECT_TRUE(one.weights_in_sram);
  const WeightPlan all = PlanWeights(f.chip, f.model, f.m, 0, "bf16");
  EXPECT_EQ(all.weight_bytes_per_core, 7 * 15 * kMiB / 2);
  EXPECT_EQ(all.layers_per_core, 7u);
  EXPECT_FALSE(all.weights_in_sram);
}

// The iteration of 4 lowered layers keeps the weights in SRAM when the plan is its own, and
// streams them when it is the model's 28 layers' (before, serving timed decode without
// streaming: TPOT 1.898 ms against 2.234 ms with all 28 layers lowered).
TEST(PlanLayers, IterationStreamsTheWeightsTheModelsStagesCannotHold) {
  Qwen06b f;
  const std::vector<llm::SeqChunk> decode{{1, 512}};
  const Program own = LowerIteration(f.chip, f.model, f.m, decode, 4, "bf16");
  EXPECT_EQ(own.weights_location, WeightsLocation::kSram);
  LowerOptions opts;
  opts.plan_layers = 28;
  const Program planned = LowerIteration(f.chip, f.model, f.m, decode, 4, "bf16", opts);
  EXPECT_EQ(planned.weights_location, WeightsLocation::kDramStreamed);
  // The KV cache (2 x 513 tokens x 2 KV heads x 128 x 2 bytes x 7 layers = 1.84 MB) still fits
  // SRAM beside no resident weights.
  EXPECT_EQ(planned.kv_location, KvLocation::kSram);
  // The same 4 layers are lowered either way: only the memory tasks differ (weight reads).
  EXPECT_EQ(own.ops.size(), planned.ops.size());
  size_t reads_own = 0, reads_planned = 0;
  for (size_t i = 0; i < own.num_tasks(); ++i)
    reads_own += own.task(i).kind == TaskKind::kMemory && !own.task(i).write;
  for (size_t i = 0; i < planned.num_tasks(); ++i)
    reads_planned += planned.task(i).kind == TaskKind::kMemory && !planned.task(i).write;
  EXPECT_EQ(reads_own, 0u);
  EXPECT_GT(reads_planned, 0u);
  // plan_layers equal to the lowered layers is the default plan, to the task.
  opts.plan_layers = 4;
  EXPECT_EQ(LowerIteration(f.chip, f.model, f.m, decode, 4, "bf16", opts).num_tasks(), own.num_tasks());
}

}  // namespace
}  // namespace tpsim::mapping
