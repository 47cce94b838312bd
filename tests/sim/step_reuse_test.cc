// Decode-step reuse (sim/step_reuse.h) against the unrolled Program: the whole Result JSON
// (summary, per-op rows, layers, links, channels, cores and every task's times) must be
// byte-identical, on every shipped experiment that `tpsim run` runs and on random ones
// (sim/agree's family, with more decode steps).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "llm/model.h"
#include "sim/agree/agree.h"
#include "sim/result.h"
#include "sim/run.h"
#include "sim/step_reuse.h"

namespace tpsim::sim {
namespace {

std::string SourceDir() { return TPSIM_SOURCE_DIR; }

struct Both {
  RunOutput unrolled, reused;
};

// `tasks`: with every task's times in the Result (RunOptions::keep_task_times).
Both RunBoth(const Experiment& e, bool tasks = false) {
  RunOptions off;
  off.keep_task_times = tasks;
  off.reuse = RunOptions::Reuse::kOff;
  RunOptions on = off;
  on.reuse = RunOptions::Reuse::kForce;
  return {RunExperiment(e, off), RunExperiment(e, on)};
}

void ExpectSame(const Experiment& with_energy, bool must_reuse, bool tasks = false) {
  // The shipped chips model energy, which reuse does not account yet: it must fall back
  // there (same result; checked where reuse is expected, the cheap cases), and reuse is
  // checked on the chip without its energy block.
  if (must_reuse) {
    const Both b = RunBoth(with_energy, tasks);
    if (with_energy.cfg.chip().has_energy()) {
      EXPECT_FALSE(b.reused.reused) << b.reused.reuse;
    }
    EXPECT_TRUE(ResultToJson(b.unrolled.result) == ResultToJson(b.reused.result));
  }
  Experiment e = with_energy;
  e.cfg.mutable_chip()->clear_energy();
  const Both b = RunBoth(e, tasks);
  SCOPED_TRACE(e.cfg.name() + ": " + b.reused.reuse);
  EXPECT_FALSE(b.unrolled.reused);
  if (must_reuse) {
    EXPECT_TRUE(b.reused.reused);
  }
  // EXPECT_TRUE, not EXPECT_EQ: gtest's diff of two large JSON texts takes gigabytes.
  EXPECT_TRUE(ResultToJson(b.unrolled.result) == ResultToJson(b.reused.result));
  EXPECT_TRUE(ResultTable(b.unrolled.result, true) == ResultTable(b.reused.result, true));
}

Experiment Load(const std::string& file, uint32_t steps) {
  return LoadExperiment(SourceDir() + "/configs/experiments/" + file,
                        {Override{"workload.decode_steps", std::to_string(steps)}});
}

// The reference streams its weights from DRAM: each stage reads step s + 1's weights while
// later stages run step s, so steps overlap, and its decode steps' all-reduce transfers share
// links (their floating-point sharing may round a picosecond apart from step to step): every
// step is lowered, and the results are the same either way. At TP 1 (no collectives) the
// schedule is periodic (sim/step_period.h) until attention binds (step 65).
Experiment Tp1(uint32_t steps) {
  return LoadExperiment(SourceDir() + "/configs/experiments/reference-qwen3-4b.textproto",
                        {{"mapping.tp", "1"}, {"workload.decode_steps", std::to_string(steps)}});
}
TEST(StepReuse, ReferenceReused) { ExpectSame(Tp1(13), true, true); }

// Qwen3-0.6B at TP 1 on the reference chip with its weights resident in SRAM: no step reads
// ahead, so steps do not overlap and each is timed alone, shifted (sim/step_reuse.h); the
// attention's time grows with the context and decides the step time, which that way allows.
TEST(StepReuse, SeparateStepsReused) {
  for (uint32_t steps : {12u, 100u}) {
    Experiment e = LoadExperiment(
        SourceDir() + "/configs/experiments/reference-qwen3-4b.textproto",
        {{"mapping.tp", "1"}, {"mapping.weights", "sram"}, {"workload.decode_steps", std::to_string(steps)}},
        "qwen3-0.6b");
    ExpectSame(e, true, true);
  }
}
TEST(StepReuse, ReferenceUpTo200Steps) {
  for (uint32_t steps : {5u, 8u, 200u}) ExpectSame(Load("reference-qwen3-4b.textproto", steps), false, true);
  for (uint32_t steps : {11u, 40u, 60u}) ExpectSame(Tp1(steps), true, true);
}

// Past RunOptions::row_steps the reused steps' op rows are summed: the table per op (the count
// column included), the summary, layers, links, channels and cores are the unrolled run's.
TEST(StepReuse, SummedOpRows) {
  Experiment e = Tp1(40);
  e.cfg.mutable_chip()->clear_energy();  // reuse falls back on chips with an energy model
  RunOptions off;
  off.reuse = RunOptions::Reuse::kOff;
  RunOptions on;
  on.reuse = RunOptions::Reuse::kForce;
  on.row_steps = 20;
  const RunOutput u = RunExperiment(e, off), r = RunExperiment(e, on);
  ASSERT_TRUE(r.reused) << r.reuse;
  EXPECT_TRUE(ResultTable(u.result, true) == ResultTable(r.result, true));
  config::Result a = u.result, b = r.result;
  EXPECT_LT(b.ops_size(), a.ops_size());
  a.clear_ops();
  b.clear_ops();
  EXPECT_TRUE(ResultToJson(a) == ResultToJson(b));
}

// Where attention decides a step's time once the context is long, nothing is periodic and
// every step is lowered (at TP 1 from step 65 on).
TEST(StepReuse, FallsBackWhenAttentionBinds) {
  RunOptions on;
  on.reuse = RunOptions::Reuse::kForce;
  Experiment e = Tp1(80);
  e.cfg.mutable_chip()->clear_energy();  // else it falls back for the energy model first
  const RunOutput r = RunExperiment(e, on);
  EXPECT_FALSE(r.reused);
  EXPECT_NE(r.reuse.find("would delay another task"), std::string::npos) << r.reuse;
}

TEST(StepReuse, ObserveSteps) {
  EXPECT_EQ(ParseObserveSteps("first,last,every:4", 10), (std::vector<uint32_t>{1, 4, 8, 10}));
  EXPECT_EQ(ParseObserveSteps("3,3,1", 10), (std::vector<uint32_t>{1, 3}));
  EXPECT_THROW(ParseObserveSteps("every:0", 10), std::invalid_argument);
  EXPECT_THROW(ParseObserveSteps("11", 10), std::invalid_argument);
  EXPECT_THROW(ParseObserveSteps("firsts", 10), std::invalid_argument);
}

TEST(StepReuse, ReferenceVariants) {
  const std::vector<std::vector<Override>> variants = {
      {{"mapping.partition", "n_split"}},
      {{"mapping.partition", "megatron"}, {"mapping.collective", "bidirectional_ring"}},
      {{"mapping.partition", "mn_2d"}, {"mapping.placement", "snake"}},
      {{"mapping.partition", "m_split_rotate"}},
      {{"workload.batch", "3"}},
      {{"mapping.tp", "16"}, {"mapping.pipeline_stages", "4"}},
      {{"workload.cached_prefix", "512"}},
  };
  for (auto sets : variants) {
    sets.push_back({"workload.decode_steps", "12"});
    const Experiment e =
        LoadExperiment(SourceDir() + "/configs/experiments/reference-qwen3-4b.textproto", sets);
    ExpectSame(e, false);
  }
}

// Every shipped experiment `tpsim run` runs: the serving ones (serving-*.textproto) are
// request streams that only `tpsim serve` runs, so they are skipped. 12 steps: the periodic
// reuse applies from 11. ShippedExperiments (slow label: the wafer-32x32 and MoE-235B runs
// take minutes) takes every one; ShippedSmall the others.
void ShippedSame(bool big) {
  std::vector<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(SourceDir() + "/configs/experiments"))
    if (f.path().extension() == ".textproto") files.push_back(f.path().filename().string());
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    if (f.starts_with("serving-")) continue;
    const bool is_big = f.starts_with("wafer-32x32") || f.starts_with("moe-qwen3-235b");
    if (is_big != big) continue;
    SCOPED_TRACE(f);
    ExpectSame(Load(f, 12), false);
  }
}
TEST(StepReuse, ShippedSmall) { ShippedSame(false); }
TEST(StepReuse, ShippedExperiments) { ShippedSame(true); }

TEST(StepReuse, RandomExperiments) {
  for (uint32_t i = 0; i < 6; ++i) {
    const agree::Drawn d = agree::RandomExperiment(18, i);
    Experiment e;
    e.path = d.cfg.name();
    e.cfg = d.cfg;
    *e.cfg.mutable_model() =
        llm::ImportHuggingFace(llm::CatalogPath(d.cfg.model_name(), config::Location{}, "model_name"));
    e.cfg.mutable_workload()->set_decode_steps(12);
    ExpectSame(e, false);
  }
}

}  // namespace
}  // namespace tpsim::sim
