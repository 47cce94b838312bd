// mapping::EstimateProgram against the Programs mapping::Lower makes: an upper bound on
// the tasks, within a stated factor, on every shipped experiment (serving ones aside) and
// on each partitioner x collective algorithm of the reference experiment.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "mapping/estimate.h"
#include "mapping/mapping.h"
#include "sim/engine.h"
#include "sim/experiment.h"
#include "sim/run.h"

namespace tpsim::sim {
namespace {

namespace fs = std::filesystem;

const std::string kDir = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/";

struct Case {
  std::string file;
  std::vector<std::string> sets;
};

// Actual tasks / estimated tasks: 1 at most (an upper bound), and at least kTightness
// (the bound is not so loose that it refuses runs that fit).
constexpr double kTightness = 0.2;

void Check(const Case& c, double tightness = kTightness) {
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
  EXPECT_GE(ratio, tightness) << label;
  // The deps: at most 4 a task beside the collectives' and the MoE combines'
  // (ProgramEstimate::collective_deps, all_to_all_deps).
  const double deps = static_cast<double>(p.dep_list().size());
  EXPECT_LE(deps, est.collective_deps + est.all_to_all_deps + 4 * est.tasks)
      << label << ": " << deps << " deps";
}

TEST(Estimate, BoundsEveryShippedExperiment) {
  for (const char* f :
       {"default.textproto", "mesh-4x4-hbm-qwen3-0.6b.textproto", "mesh-16x16-hbm-qwen3-8b.textproto",
        "reference-qwen3-4b.textproto", "wafer-32x32-qwen3-32b.textproto", "moe-qwen3-30b-a3b.textproto",
        "moe-qwen3-30b-a3b-h200.textproto", "moe-qwen3-235b-a22b.textproto", "moe-qwen3-30b-a3b-dp.textproto",
        "moe-mixtral-8x7b.textproto"})
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

// Decode steps of MoE models: a step's collectives and all_to_alls move a batch of rows, far
// fewer transfers than the prefill's. Counted as the prefill's, moe-qwen3-235b-a22b with 9
// decode steps was estimated at 10.5 times its tasks (ratio 0.095), and 32 decode steps (680 MB
// when run) were refused at 24.2 GB.
TEST(Estimate, BoundsMoeDecodeSteps) {
  const std::string big = "moe-qwen3-235b-a22b.textproto";
  Check({big, {"workload.decode_steps=9"}});
  for (const char* algo : {"ring", "bidirectional_ring", "direct", "mesh_2d", "halving_doubling"})
    for (const char* a2a : {"direct", "pairwise", "hierarchical"})
      for (const char* batch : {"1", "4", "32"})
        Check({big,
               {std::string("mapping.collective=") + algo, std::string("mapping.moe.all_to_all=") + a2a,
                std::string("workload.batch=") + batch, "workload.num_layers=4", "mapping.pipeline_stages=2",
                "workload.decode_steps=9"}});
  // Partitioners whose collectives are not all between rows and replicated keep the full count.
  // (m_split_rotate: 0.178, its 64 weight shards' rotations counted in every decode step as in
  // the prefill; 0.17 before.)
  for (const char* part : {"k_split", "n_split", "m_split_rotate", "mn_2d"})
    Check({big,
           {std::string("mapping.partition=") + part, "workload.num_layers=4", "mapping.pipeline_stages=2",
            "workload.decode_steps=9"}},
          std::string(part) == "m_split_rotate" ? 0.15 : kTightness);
  Check({"moe-qwen3-30b-a3b.textproto", {"workload.decode_steps=9"}});
  Check({"moe-qwen3-30b-a3b.textproto", {"mapping.moe.ep=2", "mapping.moe.tp=4", "workload.decode_steps=9"}});
  Check({"moe-qwen3-30b-a3b-h200.textproto", {"workload.decode_steps=9"}});
  // Attention replicas: each collective over one replica's TP ranks and tokens.
  Check({"moe-qwen3-30b-a3b-dp.textproto", {"workload.decode_steps=9"}});
  Check({"moe-mixtral-8x7b.textproto", {"workload.decode_steps=9", "workload.batch=4"}});
}

// A decode step's tasks against the estimate's per decode step (per_layer_decode, and the MoE
// blocks of its batch): the Program's growth from 1 to 2 decode steps, an upper bound within
// kDecodeTightness. Spills are counted where a decode step's own data may not fit (before
// 2026-12-07, wherever the prefill's did), and a stage's hand-over where collectives move whole
// rows as P sends and 2 T (P - 1) transfers, not P x P: moe-qwen3-235b-a22b's decode step at 16
// layers was estimated at 153,536 tasks for 22,225 (ratio 0.145: 3,456 spills a layer counted and
// none lowered, 61,440 hand-over transfers for 1,905), now 39,650.
constexpr double kDecodeTightness = 0.4;

void CheckDecodeStep(const Case& c, double tightness = kDecodeTightness) {
  auto lower = [&](const char* steps, mapping::ProgramEstimate* est) {
    std::vector<Override> sets;
    for (const auto& s : c.sets) sets.push_back(ParseOverride(s));
    sets.push_back(ParseOverride(std::string("workload.decode_steps=") + steps));
    const Experiment e = LoadExperiment(kDir + c.file, sets);
    const arch::Chip chip = ValidateExperiment(e);
    *est = mapping::EstimateProgram(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping());
    return static_cast<double>(
        mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping()).num_tasks());
  };
  mapping::ProgramEstimate one, two;
  const double step = lower("2", &two) - lower("1", &one);
  const double ratio = step / (two.tasks - one.tasks);
  std::string label = c.file;
  for (const auto& s : c.sets) label += " " + s;
  std::printf("%-90s decode step: tasks %9.0f estimate %11.0f ratio %.3f\n", label.c_str(), step,
              two.tasks - one.tasks, ratio);
  EXPECT_LE(ratio, 1.0) << label;
  EXPECT_GE(ratio, tightness) << label;
}

TEST(Estimate, BoundsDecodeStepsOfTheirOwnSize) {
  const std::string big = "moe-qwen3-235b-a22b.textproto";
  CheckDecodeStep({big, {"workload.num_layers=16"}});
  for (const char* algo : {"ring", "bidirectional_ring", "direct", "mesh_2d", "halving_doubling"})
    for (const char* batch : {"1", "4", "32"})
      CheckDecodeStep({big,
                       {std::string("mapping.collective=") + algo, std::string("workload.batch=") + batch,
                        "workload.num_layers=4", "mapping.pipeline_stages=2"}},
                      0);
  CheckDecodeStep({"reference-qwen3-4b.textproto", {}});
  CheckDecodeStep({"mesh-4x4-hbm-qwen3-0.6b.textproto", {}});
  // Its prefill spills and its decode steps do not: 38,080 and 34,048 tasks a layer counted.
  CheckDecodeStep({"wafer-32x32-qwen3-32b.textproto", {"workload.num_layers=16"}});
  CheckDecodeStep({"moe-qwen3-30b-a3b.textproto", {}});
  CheckDecodeStep({"moe-qwen3-30b-a3b-dp.textproto", {}});
  CheckDecodeStep({"default.textproto", {}});
  CheckDecodeStep({"mesh-16x16-hbm-qwen3-8b.textproto", {}});
  // GPU nodes: a collective is one NCCL kernel a rank (0.243 when its ring transfers were
  // counted).
  CheckDecodeStep({"moe-mixtral-8x7b.textproto", {}});
  CheckDecodeStep({"moe-qwen3-30b-a3b-h200.textproto", {}});
  CheckDecodeStep({"../../validate/experiments/qwen3-4b-h200.textproto", {}});
  CheckDecodeStep({"../../validate/experiments/llama-3.1-8b-h200.textproto", {}});
  // Decode steps that spill: SRAM too small for the weights streamed and a long context.
  for (const char* part : {"megatron", "k_split", "m_split_rotate"})
    CheckDecodeStep(
        {"reference-qwen3-4b.textproto",
         {"chip.core.sram_bytes=262144", "workload.seq_len=2048", std::string("mapping.partition=") + part}},
        0);
  CheckDecodeStep({"moe-qwen3-30b-a3b.textproto", {"chip.core.sram_bytes=1048576", "workload.num_layers=8"}},
                  0);
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
  // Direct's deps grow as p^3 a collective (p - 1 a transfer of an all-reduce's second step).
  Check({ref,
         {"mapping.tp=64", "mapping.pipeline_stages=1", "workload.decode_steps=0", "workload.num_layers=1",
          "mapping.collective=direct"}});
  // Above 128 ranks the collectives' transfers are scaled, not counted.
  Check({"mesh-16x16-hbm-qwen3-8b.textproto",
         {"mapping.tp=256", "mapping.pipeline_stages=1", "workload.num_layers=1", "workload.decode_steps=0",
          "workload.seq_len=256"}});
}

// ValidateDramCapacity (mapping.h): what each memory channel holds against its capacity_bytes.
// `sets` on `file`; the ConfigError's first diag, or none when the experiment validates.
std::optional<config::Diag> DramDiag(const std::string& file, const std::vector<std::string>& sets) {
  std::vector<Override> o;
  for (const auto& s : sets) o.push_back(ParseOverride(s));
  try {
    ValidateExperiment(LoadExperiment(kDir + file, o));
  } catch (const config::ConfigError& err) {
    return err.diags().front();
  }
  return std::nullopt;
}

TEST(DramCapacity, StreamedWeightsAndKvOfOneCore) {
  // reference-qwen3-4b: one layer of Qwen3-4B per core, k_split over 4 ranks. Its weight GEMMs
  // hold 2560 x (4096 + 1024 + 1024) + 4096 x 2560 + 3 x 2560 x 9728 = 100,925,440 elements, a
  // quarter each, bf16: 50,462,720 bytes > 32 MiB of SRAM, so streamed from the core's own
  // channel. The KV cache for 256 + 40000 positions: 2 (K, V) x 40256 x 2 KV heads x 128 x 2 bytes
  // = 41,222,144 bytes, beyond SRAM too: 91,684,864 bytes in all.
  const std::string ref = "reference-qwen3-4b.textproto";
  const std::string steps = "workload.decode_steps=40000";
  EXPECT_FALSE(DramDiag(ref, {steps, "chip.memory[0].capacity_bytes=91684864"}));
  const std::optional<config::Diag> d = DramDiag(ref, {steps, "chip.memory[0].capacity_bytes=91684863"});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->field, "chip.memory[0].capacity_bytes");
  EXPECT_EQ(d->value, "91684863");
  EXPECT_NE(d->rule.find("memory channel dram0, used by 1 core of the mapping, would hold 91.7 MB (weights: "
                         "50.5 MB; KV cache for 40256 positions"),
            std::string::npos)
      << d->rule;
  EXPECT_NE(d->rule.find("(and 63 more channels overflow)"), std::string::npos) << d->rule;
  EXPECT_EQ(d->rule.find("batch"), std::string::npos) << d->rule;  // one sequence
  // Batch 2 doubles the KV cache (82,444,288 bytes; 132,907,008 in all), and says so.
  const std::optional<config::Diag> b2 =
      DramDiag(ref, {steps, "workload.batch=2", "chip.memory[0].capacity_bytes=132907007"});
  ASSERT_TRUE(b2);
  EXPECT_NE(b2->rule.find(
                "would hold 133 MB (weights: 50.5 MB; KV cache for 40256 positions (workload.cached_prefix "
                "+ seq_len + decode_steps) x batch 2 (workload.batch): 82.4 MB)"),
            std::string::npos)
      << b2->rule;
  EXPECT_NE(b2->rule.find("or shorten the context or lower workload.batch"), std::string::npos) << b2->rule;
  EXPECT_FALSE(DramDiag(ref, {steps, "workload.batch=2", "chip.memory[0].capacity_bytes=132907008"}));
  // With 256 + 20000 positions the KV cache (20,742,144 bytes) stays in SRAM: the weights alone.
  EXPECT_FALSE(DramDiag(ref, {"workload.decode_steps=20000", "chip.memory[0].capacity_bytes=50462720"}));
  EXPECT_TRUE(DramDiag(ref, {"workload.decode_steps=20000", "chip.memory[0].capacity_bytes=50462719"}));
  // Weights in SRAM (exactly 50,462,720 bytes of it) are not in DRAM, but leave no room there
  // for the KV cache of 256 + 20 positions: 2 x 276 x 2 x 128 x 2 = 282,624 bytes.
  const std::string exact = "chip.core.sram_bytes=50462720";
  EXPECT_FALSE(DramDiag(ref, {exact, "chip.memory[0].capacity_bytes=282624"}));
  EXPECT_TRUE(DramDiag(ref, {exact, "chip.memory[0].capacity_bytes=282623"}));
  // Capacity 0: not checked.
  EXPECT_FALSE(DramDiag(ref, {steps, "chip.memory[0].capacity_bytes=0"}));
}

// mapping.weights sram pins the weights in SRAM: they must fit there (ValidateMapping). The
// reference keeps 50,462,720 bytes of weights a core (above).
TEST(DramCapacity, WeightsPinnedInSramMustFit) {
  const std::string ref = "reference-qwen3-4b.textproto";
  EXPECT_FALSE(DramDiag(ref, {"mapping.weights=sram", "chip.core.sram_bytes=50462720"}));
  const std::optional<config::Diag> d =
      DramDiag(ref, {"mapping.weights=sram", "chip.core.sram_bytes=50462719"});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->field, "mapping.weights");
  EXPECT_EQ(d->value, "sram");
  // Both round to 50.5 MB: the bytes are given (it read "50.5 MB of weights in its 50.5 MB").
  EXPECT_NE(
      d->rule.find("each core of the stage with the most layers (1) would keep 50462720 B of weights in "
                   "its 50462719 B of SRAM"),
      std::string::npos)
      << d->rule;
  const std::optional<config::Diag> far =
      DramDiag(ref, {"mapping.weights=sram", "chip.core.sram_bytes=40000000"});
  ASSERT_TRUE(far);
  EXPECT_NE(far->rule.find("would keep 50.5 MB of weights in its 40 MB of SRAM"), std::string::npos)
      << far->rule;
  // The shipped 32 MiB: refused; auto streams them instead.
  EXPECT_TRUE(DramDiag(ref, {"mapping.weights=sram"}));
  EXPECT_FALSE(DramDiag(ref, {"mapping.weights=auto"}));
}

TEST(DramCapacity, SharedChannelsAndTheShippedCapacity) {
  // mesh-4x4-hbm-qwen3-0.6b, weights streamed: 7 of Qwen3-0.6B's 28 layers per stage, megatron
  // over 4 ranks: 1024 x (2048 + 1024 + 1024) + 2048 x 1024 + 3 x 1024 x 3072 = 15,728,640
  // elements a layer, a quarter each, bf16 x 7 layers = 55,050,240 bytes a core; each of the four
  // HBM channels serves the 4 of the 16 cores nearest it: 220,200,960 bytes.
  const std::string mesh = "mesh-4x4-hbm-qwen3-0.6b.textproto";
  auto caps = [](uint64_t c) {
    return std::vector<std::string>{"mapping.weights=dram",
                                    "chip.memory[0].capacity_bytes=" + std::to_string(c),
                                    "chip.memory[1].capacity_bytes=" + std::to_string(c)};
  };
  EXPECT_FALSE(DramDiag(mesh, caps(220200960)));
  const std::optional<config::Diag> d = DramDiag(mesh, caps(220200959));
  ASSERT_TRUE(d);
  EXPECT_NE(d->rule.find("used by 4 cores of the mapping, would hold 220 MB (weights: 220 MB)"),
            std::string::npos)
      << d->rule;
  EXPECT_NE(d->rule.find("(and 3 more channels overflow)"), std::string::npos) << d->rule;
  // Qwen3-4B's 36 layers on one core: 36 x 100,925,440 x 2 bytes = 7.27 GB of weights and the KV
  // cache of 512 + 32 positions, 36 x 2 x 544 x 8 KV heads x 128 x 2 bytes = 80.2 MB, more than
  // wafer-8x8's 4 GiB a channel; the error is located at the chip file's capacity_bytes.
  const std::optional<config::Diag> one =
      DramDiag("default.textproto", {"mapping.tp=1", "mapping.pipeline_stages=1"});
  ASSERT_TRUE(one);
  EXPECT_EQ(one->field, "chip.memory[0].capacity_bytes");
  EXPECT_EQ(one->value, "4294967296");
  EXPECT_EQ(fs::path(one->where.file).filename(), "wafer-8x8.textproto");
  EXPECT_EQ(one->where.line, 43);
  EXPECT_NE(one->rule.find("would hold 7.35 GB (weights: 7.27 GB; KV cache for 544 positions"),
            std::string::npos)
      << one->rule;
  // Every shipped experiment fits (Estimate.BoundsEveryShippedExperiment validates them too).
  for (const char* f :
       {"default.textproto", "reference-qwen3-4b.textproto", "wafer-32x32-qwen3-32b.textproto",
        "moe-qwen3-235b-a22b.textproto", "moe-qwen3-30b-a3b-h200.textproto",
        "mesh-16x16-hbm-qwen3-8b.textproto", mesh.c_str()})
    EXPECT_FALSE(DramDiag(f, {})) << f;
}

// The analytical engine's link calendars count a hold in 64 bits of 1/1024 ps: a flow that holds
// one link for 2.5 hours or more ends past the clock there. The reference's first prefill
// transfer (q_proj's reduce-scatter over 4 ranks: 256 x 4096 x 2 B / 4 = 524,288 B) at 1.5e-9
// GB/s holds a link 524,288 / 1.5e-9 ns = 97.1 hours: the error says so and points at the TLM
// engine (it said "ends later than the 106.7 days", for a flow that starts within a second and
// takes 4 days alone).
TEST(ClockLimit, AFlowHoldingALinkForHoursNamesTheAnalyticalCalendars) {
  const Experiment e = LoadExperiment(
      kDir + "reference-qwen3-4b.textproto",
      {ParseOverride("chip.noc.link_bandwidth_gbps=1.5e-9"), ParseOverride("workload.decode_steps=0"),
       ParseOverride("workload.num_layers=1"), ParseOverride("mapping.pipeline_stages=1")});
  RunOptions opts;
  opts.engine = "analytical";
  try {
    RunExperiment(e, opts);
    FAIL() << "ran";
  } catch (const TimeOverflowError& err) {
    const std::string what = err.what();
    EXPECT_NE(
        what.find("holds a link for 97.1 hours, longer than the analytical engine's link calendars take "
                  "(2.5 hours"),
        std::string::npos)
        << what;
    EXPECT_NE(what.find("the TLM engine times it (--engine tlm)"), std::string::npos) << what;
  }
}

// --max-memory's sizes: 0 alone means no limit; a positive size under one byte ("0.5") and "-0"
// are refused (they read as 0, no limit), and so is a fraction of a byte ("1.5").
TEST(ByteSize, OnlyZeroMeansNoLimit) {
  EXPECT_EQ(ParseByteSize("0"), 0u);
  EXPECT_EQ(ParseByteSize("1"), 1u);
  EXPECT_EQ(ParseByteSize("1.5K"), 1536u);
  EXPECT_EQ(ParseByteSize("8G"), uint64_t{8} << 30);
  EXPECT_EQ(ParseByteSize("0.5"), std::nullopt);
  EXPECT_EQ(ParseByteSize("1e-4K"), std::nullopt);  // 0.1024 B
  EXPECT_EQ(ParseByteSize("-0"), std::nullopt);
  EXPECT_EQ(ParseByteSize("-1"), std::nullopt);
  // Bytes are whole: "1.5" read as 1 byte; a fraction of a K or more is rounded down.
  EXPECT_EQ(ParseByteSize("1.5"), std::nullopt);
  EXPECT_EQ(ParseByteSize("2.5B"), std::nullopt);
  EXPECT_EQ(ParseByteSize("1.3K"), 1331u);
}

}  // namespace
}  // namespace tpsim::sim
