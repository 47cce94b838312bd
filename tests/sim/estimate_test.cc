// mapping::EstimateProgram against the Programs mapping::Lower makes: an upper bound on
// the tasks, within a stated factor, on every shipped experiment (serving ones aside) and
// on each partitioner x collective algorithm of the reference experiment.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "mapping/estimate.h"
#include "mapping/mapping.h"
#include "sim/experiment.h"

namespace tpsim::sim {
namespace {

const std::string kDir = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/";

struct Case {
  std::string file;
  std::vector<std::string> sets;
};

// Actual tasks / estimated tasks: 1 at most (an upper bound), and at least kTightness
// (the bound is not so loose that it refuses runs that fit).
constexpr double kTightness = 0.2;

void Check(const Case& c) {
  std::vector<Override> sets;
  for (const auto& s : c.sets) sets.push_back(ParseOverride(s));
  const Experiment e = LoadExperiment(kDir + c.file, sets);
  const arch::Chip chip = ValidateExperiment(e);
  const mapping::ProgramEstimate est =
      mapping::EstimateProgram(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping());
  const mapping::Program p = mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping());
  const double ratio = static_cast<double>(p.num_tasks()) / est.tasks;
  std::string label = c.file;
  for (const auto& s : c.sets) label += " " + s;
  size_t transfers = 0, memory = 0, compute = 0;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    auto k = p.kind(i);
    (k == mapping::TaskKind::kTransfer ? transfers : k == mapping::TaskKind::kMemory ? memory : compute)++;
  }
  std::printf(
      "%-90s tasks %9zu estimate %11.0f ratio %.3f  bytes/task %.1f  coll/layer-pass %.2f  c/m/t "
      "%zu/%zu/%zu\n",
      label.c_str(), p.num_tasks(), est.tasks, ratio,
      static_cast<double>(p.TaskBytes()) / static_cast<double>(p.num_tasks()),
      p.collectives.size() / (est.layers * est.passes), compute, memory, transfers);
  EXPECT_LE(ratio, 1.0) << label;
  EXPECT_GE(ratio, kTightness) << label;
}

TEST(Estimate, BoundsEveryShippedExperiment) {
  for (const char* f :
       {"default.textproto", "mesh-4x4-hbm-qwen3-0.6b.textproto", "mesh-16x16-hbm-qwen3-8b.textproto",
        "reference-qwen3-4b.textproto", "wafer-32x32-qwen3-32b.textproto", "moe-qwen3-30b-a3b.textproto",
        "moe-qwen3-30b-a3b-h200.textproto", "moe-qwen3-235b-a22b.textproto"})
    Check({f, {}});
  // MoE: skewed routing (fewer experts get tokens), and every expert on every rank's slot.
  Check({"moe-qwen3-30b-a3b.textproto", {"mapping.moe.routing=zipf", "mapping.moe.zipf_s=1.2"}});
  Check({"moe-qwen3-30b-a3b.textproto", {"mapping.moe.ep=1", "mapping.moe.tp=16"}});
  Check({"moe-qwen3-30b-a3b.textproto", {"chip.core.sram_bytes=1048576", "workload.num_layers=8"}});
  for (const char* part : {"k_split", "n_split", "m_split_rotate", "mn_2d"})
    for (const char* algo : {"ring", "direct", "mesh_2d"})
      Check({"moe-qwen3-30b-a3b.textproto",
             {std::string("mapping.partition=") + part, std::string("mapping.collective=") + algo,
              "workload.num_layers=8", "workload.decode_steps=1"}});
  Check({"moe-qwen3-30b-a3b.textproto", {"mapping.moe.ep=2", "mapping.moe.tp=4", "workload.batch=8"}});
}

TEST(Estimate, BoundsEachPartitionerAndAlgorithm) {
  for (const char* part : {"k_split", "n_split", "megatron", "m_split_rotate", "mn_2d"})
    for (const char* algo : {"ring", "bidirectional_ring", "direct", "halving_doubling", "mesh_2d"})
      Check({"reference-qwen3-4b.textproto",
             {std::string("mapping.partition=") + part, std::string("mapping.collective=") + algo,
              "workload.decode_steps=2"}});
}

TEST(Estimate, BoundsOtherShapes) {
  const std::string ref = "reference-qwen3-4b.textproto";
  Check({ref, {"mapping.tp=1", "workload.decode_steps=2"}});
  Check({ref, {"mapping.tp=16", "mapping.pipeline_stages=4", "workload.decode_steps=2"}});
  Check({ref, {"mapping.tp=64", "mapping.pipeline_stages=1", "workload.decode_steps=1"}});
  Check({ref,
         {"mapping.tp=64", "mapping.pipeline_stages=1", "workload.decode_steps=1",
          "mapping.partition=megatron"}});
  Check({ref, {"chip.core.sram_bytes=1048576", "workload.decode_steps=2"}});
  Check({ref, {"chip.core.sram_bytes=262144", "workload.decode_steps=2", "workload.seq_len=2048"}});
  Check({ref,
         {"chip.core.sram_bytes=262144", "workload.decode_steps=2", "workload.seq_len=2048",
          "mapping.partition=megatron"}});
  Check({ref,
         {"chip.core.sram_bytes=262144", "workload.decode_steps=2", "workload.seq_len=2048",
          "mapping.partition=m_split_rotate"}});
  Check({ref, {"workload.decode_steps=2", "workload.seq_len=4096", "workload.batch=8"}});
  Check({ref, {"mapping.weights=dram", "workload.decode_steps=2"}});
  Check({ref,
         {"mapping.partition=mn_2d", "mapping.mn_2d_weights=k_steps", "mapping.tp=16",
          "mapping.pipeline_stages=4", "workload.decode_steps=2"}});
  Check({"mesh-16x16-hbm-qwen3-8b.textproto",
         {"mapping.tp=64", "mapping.pipeline_stages=4", "mapping.partition=k_split",
          "workload.decode_steps=0", "workload.num_layers=8"}});
  Check({"mesh-16x16-hbm-qwen3-8b.textproto",
         {"mapping.tp=32", "mapping.pipeline_stages=8", "mapping.partition=n_split",
          "mapping.collective=direct", "workload.decode_steps=1"}});
  // Above 128 ranks the collectives' transfers are scaled, not counted.
  Check({"mesh-16x16-hbm-qwen3-8b.textproto",
         {"mapping.tp=256", "mapping.pipeline_stages=1", "workload.num_layers=1", "workload.decode_steps=0",
          "workload.seq_len=256"}});
}

}  // namespace
}  // namespace tpsim::sim
